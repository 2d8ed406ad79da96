"""The level-2 rungs of three starters: between a level 1 that states the one step to take and a
level that leaves the agent to find it (in run q8 the agent won level 1 of these 4 or 5 times of
5, then 0 or 1 of 5 at the next level, docs/results.md). Each rung keeps the game's rules and
states the method, not the move."""

from __future__ import annotations

import re

import pytest
from starter_helpers import as_actions, load_class, play

from spadework.library import starter_env

SEEDS = range(30)


def env_of(name: str, level: int, max_turns: int = 4):
    return load_class(starter_env(name))(level=level, max_turns=max_turns)


@pytest.mark.parametrize("name", ["delivery_route", "sequence", "sliding_puzzle"])
def test_the_rung_is_a_level_of_its_own_and_won_by_its_solution(name):
    """Level 2 deals differ from level 1's and from level 3's, and solution() wins them."""
    firsts = {}
    for level in (1, 2, 3):
        env = env_of(name, level)
        firsts[level] = set()
        for seed in SEEDS:
            obs, _ = env.reset(seed=seed)
            firsts[level].add(obs)
            _, won = play(env, as_actions(env.solution()))
            assert won, f"{name} level {level} seed {seed}: solution() did not win"
    assert not firsts[2] & firsts[1] and not firsts[2] & firsts[3]


def test_delivery_rung_nearest_first_is_the_one_shortest_route():
    env = env_of("delivery_route", 2)
    nearest_first = type(env).setup.__globals__["nearest_first"]
    for seed in SEEDS:
        obs, _ = env.reset(seed=seed)
        assert env.stops == 3 and "nearest stop not yet visited" in obs
        assert nearest_first(env.points) == env.order
        assert "D" not in obs.split("Blocks")[0]  # no map: the legs are listed
        assert env.example() != " ".join(map(str, env.order))


def test_sequence_rung_states_the_kind_of_rule_not_the_step():
    env = env_of("sequence", 2)
    for seed in SEEDS:
        obs, _ = env.reset(seed=seed)
        step = env.terms[1] - env.terms[0]
        assert "The same number is added each time" in obs
        assert f"is {step} more" not in obs and 2 <= step <= 6
        assert len(as_actions(env.solution())) == 1


def test_sliding_rung_points_at_the_first_tile_then_the_last():
    env = env_of("sliding_puzzle", 2)
    solve = type(env).setup.__globals__["solve"]
    for seed in SEEDS:
        obs, _ = env.reset(seed=seed)
        first, last = solve(env.state, env.goal)
        pointed = re.search(r"First slide the tile at row (\d), column (\d)", obs)
        row, col = map(int, pointed.groups())
        assert env.state[(row - 1) * 3 + col - 1] == first
        obs, *_ = env.step(f"\\boxed{{{first}}}")
        row, col = map(int, re.search(r"One slide solves it.*?row (\d), column (\d)", obs).groups())
        assert env.state[(row - 1) * 3 + col - 1] == last


def test_coin_weighing_without_the_word_weigh_is_a_weighing():
    """The 0.5B agent writes "86 vs 75" for a weighing; it used to be refused as not a move."""
    env = env_of("coin_balance", 2)
    env.reset(seed=3)
    a, b = env.coins[:2]
    obs, reward, terminated, _, _ = env.step(f"\\boxed{{{a} vs {b}}}")
    assert "The scale says" in obs and not terminated and env.log == [([a], [b], env.log[0][2])]
    obs, *_ = env.step("\\boxed{12 and 13}")
    assert "not a move" in obs and len(env.log) == 1  # "and" still needs the word weigh

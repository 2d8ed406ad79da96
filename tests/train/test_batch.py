"""Batch assembly: which turns become samples, with which advantages, and what is dropped."""

from __future__ import annotations

import pytest

from spadework.train.batch import (
    Sample,
    agent_assembly,
)
from spadework.types import ARMS, Episode, Sampling, Turn

T = Sampling(0.7, 0.95, 20)


def turn(out=(5, 6), lps=(-0.1, -0.2)):
    return Turn((1, 2, 3), tuple(out), tuple(lps), "t", "a", "o", 0.0, "stop", T, True)


def episode(env, arm, i, ret, *, turns=2, status="completed", terminated=True):
    return Episode(env, arm, i, i, tuple(turn() for _ in range(turns)), (0.0, ret), terminated,
                   not terminated, status)


def test_agent_zscore_per_env_and_every_turn_carries_the_episode_advantage():
    eps = [episode("a", "no_hint", 0, 1.0), episode("a", "no_hint", 1, 0.0),
           episode("b", "no_hint", 0, 0.5, turns=1), episode("b", "no_hint", 1, 0.5, turns=1)]
    got = agent_assembly(eps)
    advs = [round(s.advantage, 6) for s in got.samples]
    assert advs == [1.0, 1.0, -1.0, -1.0, 0.0, 0.0]  # env b: equal returns, nothing to learn
    assert all(s.role == "agent" for s in got.samples)
    assert got.samples[0].prompt_ids == (1, 2, 3) and got.samples[0].output_ids == (5, 6)
    assert got.dropped == {}


def test_hint_arm_left_out_by_default_and_grouped_apart_when_included():
    eps = [episode("a", "hint", 0, 1.0), episode("a", "hint", 1, 1.0),
           episode("a", "no_hint", 0, 1.0), episode("a", "no_hint", 1, 0.0)]
    default = agent_assembly(eps)
    assert {s.key[1] for s in default.samples} == {"no_hint"}
    assert default.samples[0].key == ("a", "no_hint", 0, 0)  # (env, arm, play, turn)
    assert default.dropped == {"arm_hint": 2}
    both = agent_assembly(eps, arms=ARMS)
    hint_adv = [s.advantage for s in both.samples if s.key[1] == "hint"]
    # the hinted group's returns are all 1: its own z-score is 0 (pooled with no_hint it would be > 0)
    assert hint_adv == [0.0] * 4
    with pytest.raises(ValueError, match="unknown arms"):
        agent_assembly(eps, arms=("hinted",))


def test_failed_episodes_and_untrainable_turns_are_dropped_and_counted():
    bad_turns = Episode("a", "no_hint", 2, 2, (turn(out=(), lps=()), turn(lps=(-0.1,))),
                        (0.0,), True, False, "completed")
    eps = [episode("a", "no_hint", 0, 1.0), episode("a", "no_hint", 1, 0.0, terminated=False,
                                                    status="truncated"),
           episode("a", "no_hint", 3, 1.0, status="env_error"),
           episode("a", "no_hint", 4, 1.0, status="timeout"), bad_turns]
    got = agent_assembly(eps)
    assert got.dropped == {"episode_env_error": 1, "episode_timeout": 1, "no_output_tokens": 1,
                           "logprobs_mismatch": 1}
    # returns in the group: 1.0, 0.0 (truncated scores 0), 0.0 (bad_turns: last reward 0.0)
    assert len(got.samples) == 4


def test_sample_rejects_what_cannot_be_trained():
    with pytest.raises(ValueError, match="output_ids is empty"):
        Sample("agent", (1,), (), (), 0.0, T)
    with pytest.raises(ValueError, match="role"):
        Sample("critic", (1,), (2,), (-0.1,), 0.0, T)
    with pytest.raises(ValueError, match="advantage"):
        Sample("agent", (1,), (2,), (-0.1,), float("nan"), T)
    with pytest.raises(ValueError, match="sampling"):
        Sample("agent", (1,), (2,), (-0.1,), 0.0, None)


def test_format_weight_separates_equal_returns_by_well_formed_replies():
    def ep(i, parsed, ret=0.0):
        turns = tuple(Turn((1, 2), (5,), (-0.1,), "", "", "", 0.0, "stop", T, ok) for ok in parsed)
        return Episode("a", "no_hint", i, i, turns, (ret,), True, False, "completed")

    eps = [ep(0, [True, True]), ep(1, [True, False]), ep(2, [False, False])]
    assert {s.advantage for s in agent_assembly(eps).samples} == {0.0}  # unshaped: all lost
    shaped = agent_assembly(eps, format_weight=0.2)
    by_play = {s.key[2]: s.advantage for s in shaped.samples}
    assert by_play[0] > 0 > by_play[2] and by_play[1] == pytest.approx(0.0, abs=1e-6)
    # a win still outranks perfect formatting
    mixed = agent_assembly([ep(0, [True, True]), ep(1, [False, False], ret=1.0)], format_weight=0.2)
    assert [round(s.advantage, 6) for s in mixed.samples] == [-1.0, -1.0, 1.0, 1.0]


def test_format_added_after_the_zscore_keeps_the_size_its_weight_says():
    def ep(i, parsed, ret=0.0):
        turns = tuple(Turn((1, 2), (5,), (-0.1,), "", "", "", 0.0, "stop", T, ok) for ok in parsed)
        return Episode("a", "no_hint", i, i, turns, (ret,), True, False, "completed")

    # five lost plays, one with an unparsed reply of four: z-scored with the return, the
    # formatting alone gets the size of a win (-2.0 for the one unparsed reply, at any weight)
    lost = [ep(i, [True, True, True, i > 0]) for i in range(5)]
    zscored = {s.key[2]: s.advantage for s in agent_assembly(lost, format_weight=0.2).samples}
    assert zscored[0] == pytest.approx(-2.0) and zscored[1] == pytest.approx(0.5)
    added = {s.key[2]: s.advantage
             for s in agent_assembly(lost, format_weight=0.2, format_shaping="added").samples}
    # 0.2 * (share - mean share): shares 0.75, 1, 1, 1, 1, mean 0.95
    assert added[0] == pytest.approx(0.2 * (0.75 - 0.95)) and added[1] == pytest.approx(0.01)
    # where a play wins, the win carries the group's z-score and the format its small share
    mixed = [ep(0, [True, True]), ep(1, [False, False], ret=1.0)]
    got = {s.key[2]: s.advantage
           for s in agent_assembly(mixed, format_weight=0.2, format_shaping="added").samples}
    assert got[0] == pytest.approx(-1.0 + 0.1) and got[1] == pytest.approx(1.0 - 0.1)
    with pytest.raises(ValueError, match="format_shaping"):
        agent_assembly(lost, format_weight=0.2, format_shaping="after")


def test_turns_without_a_sampling_record_are_dropped():
    """Archived before sampling was recorded: the learner cannot score them as drawn."""
    old = Turn((1, 2, 3), (5, 6), (-0.1, -0.2), "t", "a", "o", 0.0, "stop", None, True)
    eps = [Episode("a", "no_hint", i, i, (old, turn()), (float(i % 2),), True, False, "completed")
           for i in range(2)]
    got = agent_assembly(eps)
    assert got.dropped == {"unknown_sampling": 2} and len(got.samples) == 2


def test_packing_chains_each_episodes_turns_while_their_prompts_continue():
    """Two episodes: one whose turns continue each other (one sequence), one whose second
    prompt re-renders the first reply differently (two sequences); advantages unchanged."""
    from spadework.train.batch import agent_assembly
    from spadework.types import Episode, Sampling, Turn

    T = Sampling(0.7)

    def turn(prompt, out):
        return Turn(tuple(prompt), tuple(out), tuple(-0.1 for _ in out), "", "", "", 0.0, "stop", T, True)

    a = (turn([1, 2], [3, 4]), turn([1, 2, 3, 4, 9], [5]), turn([1, 2, 3, 4, 9, 5, 9], [6]))
    b = (turn([1, 2], [3, 4]), turn([1, 2, 3, 8, 9], [5]))
    eps = [Episode("e", "no_hint", 0, 0, a, (1.0,), True, False, "completed"),
           Episode("e", "no_hint", 1, 1, b, (0.0,), True, False, "completed")]
    plain, packed = agent_assembly(eps), agent_assembly(eps, pack=True)
    assert len(plain.samples) == 5 and plain.packed_turns == 0
    assert [s.n_tokens for s in packed.samples] == [4, 2, 1] and packed.packed_turns == 2
    assert packed.samples[0].output_ids == (3, 4, 9, 5, 9, 6)
    assert [round(s.advantage, 6) for s in packed.samples] == [1.0, -1.0, -1.0]
    assert sum(s.n_tokens for s in packed.samples) == sum(s.n_tokens for s in plain.samples)

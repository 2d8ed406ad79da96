"""Held-out starter environments, the in-run config and call, and benchmark-name hygiene."""

from __future__ import annotations

import pytest

from eval_policies import ScriptedPolicy
from spadework.errors import ConfigError
from spadework.evaluate.heldout import LibrarySuite, heldout_seed
from spadework.library import HELD_OUT, is_held_out
from spadework.env.hygiene import benchmark_matches, env_benchmark_matches
from spadework.evaluate.inrun import EvalConfig, eval_due, evaluate_policy
from spadework.evaluate.judge import Judge
from spadework.evaluate.presets import preset_settings
from spadework.evaluate.suite import RunContext
from spadework.library import starter_env, starter_envs
from spadework.seeding import episode_seed


def test_held_out_names_are_starter_environments_and_leave_every_game_skill_covered():
    names = {e.name for e in starter_envs()}
    assert set(HELD_OUT) <= names
    kept = [e for e in starter_envs("games") if not is_held_out(e.name)]
    assert {e.skill for e in kept} == {e.skill for e in starter_envs("games")}
    assert len([n for n in HELD_OUT if starter_env(n).setting == "tool-use"]) == 1
    assert not is_held_out(None) and is_held_out("nim", ("nim",))


def test_held_out_seeds_are_disjoint_from_training_seeds():
    env = starter_env(HELD_OUT[0])
    train = {episode_seed(s, env.env_id, k) for s in range(3) for k in range(50)}
    held = {heldout_seed(s, env.name, k) for s in range(3) for k in range(50)}
    assert max(train) < 2**31 - 1 <= 2**31 <= min(held) and max(held) < 2**32 - 1
    assert len(held) == 150


def test_library_heldout_plays_each_held_out_env_through_the_sandbox():
    # A policy that always answers the same thing: it plays, it does not win.
    policy = ScriptedPolicy(lambda text: "\\boxed{0}")
    settings = preset_settings("smoke", "library")
    seen = []
    with Judge() as judge:
        rows = LibrarySuite().run(RunContext(policy, settings, judge,
                                             progress=lambda done, total, what: seen.append((done, total))))
    assert seen and all(done <= total for done, total in seen), "progress counts within its total"
    levels = {n: sorted({1, starter_env(n).levels}) for n in HELD_OUT}  # the first and the last
    assert len(rows) == sum(len(v) for v in levels.values()) * settings.items
    assert {r.task for r in rows} == {n if v == [1] else f"{n} level {lv}" for n, v in levels.items()
                                      for lv in v}
    assert any(" level " in r.task for r in rows) and len({r.item_id for r in rows}) == len(rows)
    assert all(r.seed >= 2**31 for r in rows)
    assert all(r.status in ("ok", "env_error", "policy_error") for r in rows)
    assert sum(r.extra["turns"] for r in rows) > 0
    # tool use is played as the tool-use preset plays it; games keep the suite's settings
    tools = {n for n in HELD_OUT if starter_env(n).setting == "tool-use"}
    for r in rows:
        tool = r.task.split(" level ")[0] in tools
        assert (r.extra["max_turns"], r.extra["history_turns"]) == ((8, 0) if tool else (2, None)), r.task


def test_eval_config_validates_with_messages_that_say_what_to_set():
    with pytest.raises(ConfigError, match="every must be an int >= 0"):
        EvalConfig(every=-1)
    with pytest.raises(ConfigError, match="unknown or file-based suite 'gpqa'"):
        EvalConfig(suites=("gpqa",))
    with pytest.raises(ConfigError, match="name at least one suite"):
        EvalConfig(every=2, suites=())
    with pytest.raises(ConfigError, match="preset must be one of"):
        EvalConfig(preset="fast")
    assert EvalConfig(suites=["rg-hard"]).suites == ("rg-hard",)
    assert [eval_due(EvalConfig(every=3), i) for i in range(6)] == [False, False, True] * 2


def test_evaluate_policy_returns_figures_and_skips_past_its_budget(tmp_path):
    policy = ScriptedPolicy(lambda text: "<answer>nothing</answer>")
    cfg = EvalConfig(every=1, suites=("rg-hard", "math"), preset="smoke", max_items=1)
    figures = evaluate_policy(policy, cfg, tmp_path / "iter_0000")
    assert set(figures["suites"]) == {"rg-hard", "math"} and figures["skipped"] == []
    rg = figures["suites"]["rg-hard"]
    assert rg["score"] == 0.0 and rg["items"] == 4 and set(rg["buckets"]) == {
        "Math", "Algorithmic", "Cognition", "Logic"}
    assert (tmp_path / "iter_0000" / "rg-hard" / "summary.json").is_file()
    tight = EvalConfig(every=1, suites=("rg-hard", "math"), preset="smoke", max_items=1,
                       budget_seconds=1e-9)
    figures = evaluate_policy(policy, tight, tmp_path / "iter_0001")
    assert figures["skipped"] == ["math"]


def test_benchmark_name_hygiene():
    assert benchmark_matches("NumberSequenceEnv") == ("number_sequence",)
    assert benchmark_matches("CaesarCipherGame") == ("caesar_cipher",)
    assert benchmark_matches("RiverEnv", "A puzzle in the style of the Tower of Hanoi.") == (
        "tower_of_hanoi",)
    assert benchmark_matches("RiverEnv", "Solve an AIME-style problem") == ("aime",)
    assert benchmark_matches("LedgerEnv", "Count the products, roll the dice.") == ()
    assert benchmark_matches(None, None) == ()
    code = 'ENV_CLASS = "GridEnv"\nclass GridEnv:\n    """Walk a maze to its exit."""\n' \
           '    def reset(self, seed=None): ...\n    def step(self, a): ...\n'
    assert env_benchmark_matches(code) == ("maze",)
    assert env_benchmark_matches("def broken(:") == ()

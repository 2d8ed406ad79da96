"""The self-play loop through the library API, with a scripted policy over the real sandbox and
archive; one test runs the real default model through the CLI (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from design_support import PARCELS
from scripted_policy import (
    RecordingLearner,
    RecordingSync,
    ScriptedPolicy,
    designing_script,
    half_solving_script,
)
from starters import starter_records

from spadework import reward, rss
from spadework.archive import Archive, archive_path
from spadework.config import load_config, override, preset
from spadework.library import HELD_OUT
from spadework.env.actions import parse_action
from spadework.errors import ConfigError
from spadework.loop import Models, run
from spadework.types import Sampling

ROOT = Path(__file__).resolve().parent.parent


def assert_matched_arms(archive: Archive) -> None:
    """Every (iteration, env, play index) was played once in each arm, on one seed."""
    rows = archive.query("SELECT iteration, env_id, play_index, arm, seed FROM episodes")
    by_key: dict = {}
    for r in rows:
        by_key.setdefault((r[0], r[1], r[2]), {})[r[3]] = r[4]
    assert by_key
    for key, arms in by_key.items():
        assert set(arms) == {"hint", "no_hint"}, key
        assert arms["hint"] == arms["no_hint"], key


@pytest.fixture
def cfg():
    # the scripted designer writes a whole module (~480 made-up tokens), beyond smoke's 192
    return override(preset("smoke"), {"curriculum": {"designs_per_regen": 2},
                                      "design": {"max_tokens": 1024}})


@pytest.mark.slow
def test_two_iterations_store_everything_once(tmp_path, cfg):
    out = run(cfg, tmp_path, Models(ScriptedPolicy(designing_script)))
    assert [m.iteration for m in out] == [0, 1]
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["iteration"] for x in lines] == [0, 1]
    first = json.loads(lines[0])
    assert first["regenerated"] and first["validity_funnel"] == {"accepted": 1, "novelty": 1, "total": 2}
    assert first["episodes"] == 2 * 2 * cfg.plays and len(first["win_rate_histogram"]) == 10
    assert set(first["seconds"]) >= {"design", "pool", "hints", "play", "reward"}
    if rss.resident_mib() is not None:  # each stage's own peak of this process's resident memory
        assert set(first["peak_rss_mib"]) == {"design", "pool", "hints", "play", "reward", "train",
                                              "eval"}
        assert all(mib > 0 for mib in first["peak_rss_mib"].values())
    with Archive.open(archive_path(tmp_path)) as a:
        assert_matched_arms(a)
        assert len(a.episodes()) == 2 * 2 * 2 * cfg.plays
        attempts = a.attempts()
        assert [x.outcome for x in attempts] == ["accepted", "novelty"]
        assert all(x.reward is not None for x in attempts)  # credited: played / rejected
        designed = attempts[0].env_id
        assert designed in a.load_state("curriculum")["fresh"]
        stats = a.env_stats(designed)
        assert stats.plays == 2 * cfg.plays and stats.last_played_iteration == 1
        skill = a.get_env(designed).source.skill
        assert skill and skill in a.load_state("learning_potential_skills")
    with pytest.raises(ConfigError, match="--resume"):
        run(cfg, tmp_path, Models(ScriptedPolicy(designing_script)))
    assert run(cfg, tmp_path, Models(ScriptedPolicy(designing_script)), resume=True) == []


@pytest.mark.slow
def test_designer_credit_is_the_blend_of_its_first_plays(tmp_path, cfg):
    one = override(cfg, {"iterations": 1})
    run(one, tmp_path, Models(ScriptedPolicy(designing_script)))
    with Archive.open(archive_path(tmp_path)) as a:
        acc = next(x for x in a.attempts() if x.outcome == "accepted")
        eps = a.episodes(iteration=0, env_id=acc.env_id)
        unhinted = [reward.episode_return(e.rewards, e.terminated) for e in eps if e.arm == "no_hint"]
        hinted = [reward.episode_return(e.rewards, e.terminated) for e in eps if e.arm == "hint"]
        expected = reward.blend(reward.win_rate(unhinted), reward.regret(hinted, unhinted))
        assert acc.reward == pytest.approx(expected)
        rejected = next(x for x in a.attempts() if x.outcome != "accepted")
        assert rejected.reward == one.reward.rejection_reward


def sometimes_boxing_script(conv, turn):
    """Like designing_script, but the agent boxes its move only on even turns."""
    reply = designing_script(conv, turn)
    return reply if turn % 2 == 0 or reply.startswith("```") else reply.replace("\\boxed", "")


@pytest.mark.slow
def test_graded_rejection_reward_and_format_shaping_reach_the_archive(tmp_path, cfg):
    from spadework.designer import rejection_progress

    shaped = override(cfg, {"iterations": 1, "reward": {"rejection_reward": -1.0,
                                                        "rejection_progress": 1.0,
                                                        "format_weight": 0.2}})
    out = run(shaped, tmp_path, Models(ScriptedPolicy(sometimes_boxing_script)))
    with Archive.open(archive_path(tmp_path)) as a:
        rejected = next(x for x in a.attempts() if x.outcome != "accepted")
        assert rejected.outcome == "novelty"
        assert rejected.reward == pytest.approx(-1.0 + rejection_progress(rejected)) == pytest.approx(-1 / 11)
    line = out[0].to_dict()
    assert set(line["losses"]) == {"agent", "designer"}
    with Archive.open(archive_path(tmp_path)) as a:
        unhinted = [e for e in a.episodes() if e.arm == "no_hint"]
        returns = [reward.episode_return(e.rewards, e.terminated) for e in unhinted]
        replies = [t.text for e in unhinted for t in e.turns]
    assert line["rewards"]["agent"] == pytest.approx(sum(returns) / len(returns))
    # the scripted agent boxes every other reply: the share of parsed replies, per episode
    boxed = [parse_action(r, "games").ok for r in replies]
    assert 0 < sum(boxed) < len(boxed)
    assert line["agent_format_share"]["no_hint"] == pytest.approx(
        sum(sum(parse_action(t.text, "games").ok for t in e.turns) / len(e.turns)
            for e in unhinted) / len(unhinted))
    bad = {"reward": {"format_weight": -0.1}}
    with pytest.raises(ConfigError, match="format_weight"):
        override(cfg, bad)


LOCK = (ROOT / "tests" / "fixtures" / "envs" / "good" / "combination_lock.py").read_text()


@pytest.mark.slow
def test_designs_and_starters_are_checked_under_the_play_turn_limit(tmp_path, cfg):
    """Played with one turn, a design whose solution needs 5 moves (valid at the checker's
    default of 20) is rejected at solvable, and the nim starter, whose second level needs two
    moves, is never played; every report records the limit it was checked with."""
    def script(conv, turn):
        if conv.messages[0]["role"] == "system" and "design" in conv.messages[0]["content"]:
            return f"```python\n{LOCK}\n```"
        return designing_script(conv, turn)

    wide = override(cfg, {"iterations": 1, "play": {"max_turns": 1}, "curriculum": {"pool_size": 30}})
    run(wide, tmp_path, Models(ScriptedPolicy(script)))
    with Archive.open(archive_path(tmp_path)) as a:
        attempts = a.attempts()
        assert [x.outcome for x in attempts] == ["solvable", "solvable"]
        lock = a.get_env(attempts[0].env_id)
        assert lock.report.max_turns == 1 and "max_turns=1" in lock.reason
        envs = {r.name: r for r in a.list_envs() if r.origin == "starter"}
        assert {r.report.max_turns for r in envs.values()} == {1}
        puzzle = envs["nim"]
        assert (puzzle.status, puzzle.failed_stage) == ("rejected", "solvable")
        played = {e.env_id for e in a.episodes()}
        games = {r.env_id for r in envs.values() if r.setting == "games" and r.status == "accepted"
                 and r.name not in HELD_OUT}
        assert played == games and puzzle.env_id not in played
        assert not played & {r.env_id for r in envs.values() if r.name in HELD_OUT}


def test_presets_and_toml(tmp_path):
    for name in ("smoke", "cpu", "paper-4b", "paper-30b"):
        assert preset(name).preset == name
    p4 = preset("paper-4b")
    assert (p4.curriculum.pool_size, p4.plays, p4.curriculum.regen_interval) == (24, 8, 4)
    assert (p4.play.temperature, p4.play.top_p, p4.play.top_k, p4.play.max_turns) == (0.6, 0.95, 20, 25)
    assert (p4.learner.lr, p4.learner.clip_low, p4.learner.clip_high, p4.learner.kl_coef) == \
        (1e-6, 0.2, 0.28, 0.0)
    f = tmp_path / "run.toml"
    f.write_text('preset = "smoke"\niterations = 3\n[play]\nmax_turns = 5\n[reward]\nvariant = "regret"\n')
    c = load_config(f)
    assert (c.preset, c.iterations, c.play.max_turns, c.reward.variant) == ("smoke", 3, 5, "regret")
    f.write_text('[play]\nmax_turnz = 5\n')
    with pytest.raises(ConfigError, match="max_turnz"):
        load_config(f)
    with pytest.raises(ConfigError, match="unknown preset"):
        preset("gpu-9000")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_cli_smoke_with_the_default_model(tmp_path):
    """``spadework run --preset smoke --no-train`` end to end with the real default model."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "spadework.cli", "run", "--preset", "smoke",
                        "--no-train", "--run-dir", str(tmp_path)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2
    with Archive.open(archive_path(tmp_path)) as a:
        assert_matched_arms(a)
        assert len(a.episodes()) == 2 * 2 * 2 * 2
        assert all(t.output_ids and len(t.output_ids) == len(t.logprobs)
                   for e in a.episodes() for t in e.turns)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_training_run_checkpoints_and_resumes_with_the_default_model(tmp_path):
    """Both roles train (designer samples credited by their env's plays), the learner's
    checkpoint is kept, and a resumed run restores it and trains on."""
    from spadework.policy.hf import load_hf_policy
    from spadework.train import Learner

    def model_and_learner():
        policy = load_hf_policy(None)
        return {"policy": policy, "learner": Learner(policy, cfg.learner)}

    cfg = override(preset("smoke"), {
        "iterations": 1, "train": True, "plays": 2, "checkpoint_every": 1,
        "play": {"max_turns": 2, "max_tokens": 24},
        "curriculum": {"pool_size": 2, "designs_per_regen": 1, "regen_interval": 1},
        "design": {"max_tokens": 64}})
    out = run(cfg, tmp_path, Models(**model_and_learner()))
    train = out[0].values["train"]
    assert train["designer_samples"] == 1 and train["agent_samples"] > 0
    # a step when some group's plays differ; otherwise the loop says why it skipped
    assert "grad_norm" in train or train["note"].startswith("no update")
    if "grad_norm" in train:  # per-role sampler-to-learner ratios, on policy 1 at the first update
        for role in ("agent", "designer"):
            r = train["importance_ratio"][role]
            assert r is None or abs(r["mean"] - 1) < 0.01, train
    latest = json.loads((tmp_path / "checkpoints" / "latest.json").read_text())
    assert latest == {"iteration": 0, "dir": "iter_0000"}
    assert (tmp_path / "checkpoints" / "iter_0000" / "learner.json").exists()
    with Archive.open(archive_path(tmp_path)) as a:
        assert all(x.trained_iteration == 0 for x in a.attempts())
    out = run(override(cfg, {"iterations": 2}), tmp_path, Models(**model_and_learner()), resume=True)
    assert [m.iteration for m in out] == [1]
    assert json.loads((tmp_path / "checkpoints" / "latest.json").read_text())["iteration"] == 1
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2


def test_train_stage_gets_both_roles_and_marks_them(tmp_path, cfg):
    from spadework.loop import RunContext, run_iteration
    from spadework.sandbox import Limits, Sandbox

    cfg = override(cfg, {"train": True, "plays": 4, "checkpoint_every": 1})
    learner = RecordingLearner()
    with Archive.open(archive_path(tmp_path)) as a, Sandbox(Limits(episode_seconds=600)) as sb:
        a.import_starter(starter_records())
        from spadework.default_corpus import load_default_corpus
        sync = RecordingSync(learner)
        ctx = RunContext(cfg, tmp_path, a, Models(ScriptedPolicy(half_solving_script), learner, sync),
                         sb, corpus=load_default_corpus)
        m = run_iteration(ctx, 0)
        (samples,) = learner.steps
        assert sync.pushed_after == [1] and "sync_seconds" in m.values["train"]  # right after the step
        roles = [s.role for s in samples]
        assert roles.count("designer") == 2 and roles[:2] == ["designer", "designer"]
        agent = [s for s in samples if s.role == "agent"]
        assert agent and {s.advantage > 0 for s in agent} == {True, False}  # wins and losses
        # each sample carries how it was drawn, so the learner scores it at its own temperature
        d, p = cfg.design, cfg.play
        assert {s.sampling for s in samples if s.role == "designer"} == {
            Sampling(d.temperature, d.top_p, d.top_k)}
        assert {s.sampling for s in agent} == {Sampling(p.temperature, p.top_p, p.top_k)}
        assert all(x.trained_iteration == 0 for x in a.attempts())
        assert m.values["train"]["agent_samples"] == len(agent)
        assert json.loads((tmp_path / "checkpoints" / "latest.json").read_text())["iteration"] == 0
        designed = next(x for x in a.attempts() if x.outcome == "accepted")
        assert 0 < a.env_stats(designed.env_id).win_rate < 1


@pytest.mark.slow
def test_an_iteration_without_an_update_still_leaves_a_checkpoint(tmp_path, cfg):
    """Every group scored alike gives no gradient; the iteration still checkpoints, so that
    a resumed run finds the learner state of every trained iteration."""
    def losing(conv, turn):
        designing = conv.messages[0]["role"] == "system" and "design" in conv.messages[0]["content"]
        return designing_script(conv, turn) if designing else "I do not know."

    cfg = override(cfg, {"train": True, "iterations": 1, "checkpoint_every": 1,
                         "curriculum": {"designs_per_regen": 0}})
    learner = RecordingLearner()
    out = run(cfg, tmp_path, Models(ScriptedPolicy(losing), learner, RecordingSync(learner)))
    assert out[0].values["train"]["note"].startswith("no update") and learner.steps == []
    assert json.loads((tmp_path / "checkpoints" / "latest.json").read_text()) == {
        "iteration": 0, "dir": "iter_0000"}


@pytest.mark.slow
def test_a_tool_use_run_designs_plays_and_scores_tool_environments(tmp_path, cfg):
    """The tool-use setting through the whole loop: the designer's ToolEnv subclass is checked
    and accepted, tool-use starters fill the pool, both arms play with tool calls on the same
    seeds, and turns record which replies held a tool call or an answer."""
    def script(conv, turn):
        if conv.messages[0]["role"] == "system" and "design" in conv.messages[0]["content"]:
            return f"```python\n{PARCELS}\n```"
        if turn == 0:
            return '<tool_call>{"name": "clock", "arguments": {}}</tool_call>'
        return "I am not sure." if turn == 1 else "<answer>3</answer>"

    tools = override(cfg, {"iterations": 1, "design": {"setting": "tool-use"},
                           "play": {"max_turns": 4},
                           "curriculum": {"pool_size": 3, "designs_per_regen": 1}})
    out = run(tools, tmp_path, Models(ScriptedPolicy(script)))
    with Archive.open(archive_path(tmp_path)) as a:
        (att,) = a.attempts()
        assert att.outcome == "accepted", att.reason
        played = {e.env_id for e in a.episodes()}
        assert att.env_id in played and len(played) == 3
        assert {a.get_env(x).setting for x in played} == {"tool-use"}
        assert_matched_arms(a)
        turns = [t for e in a.episodes() for t in e.turns]
        assert turns and {t.parsed for t in turns} == {True, False}
    assert out[0].values["episodes"] == 3 * 2 * tools.plays


@pytest.mark.slow
def test_mutation_and_repair_turns_through_the_loop(tmp_path, cfg):
    """A mutation slot edits an archived parent; its first reply fails extraction and a repair
    turn, fed the checker's reason, is accepted. The child records its parent, the repair is
    inference only (never trained), and the rejected first attempt earns the rejection reward."""
    def script(conv, turn):
        if conv.messages[0]["role"] == "system" and "design" in conv.messages[0]["content"]:
            return "I will write it later." if turn == 0 else f"```python\n{LOCK}\n```"
        return designing_script(conv, turn)

    mutating = override(cfg, {"iterations": 1, "play": {"max_turns": 6},
                              "design": {"mutation_ratio": 1.0, "repair_turns": 1,
                                         "example_share": 10.0},  # the starters are long modules
                              "curriculum": {"designs_per_regen": 1}})
    run(mutating, tmp_path, Models(ScriptedPolicy(script)))
    with Archive.open(archive_path(tmp_path)) as a:
        first, repair = a.attempts()
        assert (first.outcome, repair.outcome) == ("extract", "accepted")
        assert "Here is an existing environment" in first.messages[1]["content"]
        assert first.reason in repair.messages[-1]["content"]  # the checker's reason, fed back
        child = a.get_env(repair.env_id)
        parent = a.get_env(child.parent_id)
        assert parent is not None and parent.origin == "starter" and first.memory_ids == (parent.env_id,)
        assert repair.trained_iteration == 0 and repair.reward is None  # never trained, never credited
        assert first.reward == mutating.reward.rejection_reward
        assert child.env_id in {e.env_id for e in a.episodes()}


@pytest.mark.slow
def test_a_policy_error_while_writing_hints_does_not_stop_the_run(tmp_path, cfg):
    def hint_request(conv):
        return "privileged hints" in conv.messages[0]["content"]

    out = run(override(cfg, {"iterations": 1}), tmp_path,
              Models(ScriptedPolicy(designing_script, fail_when=hint_request)))
    hints = out[0].values["hints"]
    assert hints["sources"].get("none", 0) >= 1 and hints["written"] == 0
    assert out[0].values["episodes"] == 2 * 2 * cfg.plays


def test_instances_an_environments_own_solution_loses_are_not_played(tmp_path, cfg):
    """A one-character slip in the cipher's alphabet (% 27) makes solution() lose some instances;
    archived as accepted (as an older checker could accept it), the play stage replays solution()
    on the iteration's instances and plays neither arm on the ones it loses."""
    from spadework.archive.records import EnvRecord
    from spadework.env.solvable import solution_losses
    from spadework.loop import RunContext, run_iteration
    from spadework.sandbox import Limits, Sandbox
    from spadework.seeding import derive_seed, episode_seed
    from spadework.types import CheckReport, CheckResult, env_id_of

    code = (ROOT / "tests" / "fixtures" / "envs" / "bad" / "cipher_alphabet_slip.py").read_text()
    many = override(cfg, {"plays": 24, "iterations": 1, "curriculum": {"designs_per_regen": 0,
                                                                        "pool_size": 1}})
    ok = CheckReport(env_id_of(code), "CipherMachineEnv", (CheckResult("solvable", True, "old"),),
                     max_turns=many.play.max_turns)
    with Archive.open(archive_path(tmp_path)) as a, Sandbox(Limits(episode_seconds=600)) as sb:
        a.add_env(EnvRecord.from_check(code, ok, iteration=0, setting="games", skill="logical deduction"))
        ctx = RunContext(many, tmp_path, a, Models(ScriptedPolicy(designing_script)), sb)
        m = run_iteration(ctx, 0)
        seeds = [episode_seed(derive_seed(many.run_seed, 0), env_id_of(code), i) for i in range(24)]
        lost = {x.seed for x in solution_losses(
            lambda: sb.load(code, max_turns=many.play.max_turns, class_name="CipherMachineEnv"),
            seeds, many.check)}
        played = {e.seed for e in a.episodes() if e.env_id == env_id_of(code)}
    assert lost and played == set(seeds) - lost
    assert m.values["unwinnable_instances"] == {env_id_of(code)[:12]: len(lost)}


@pytest.mark.slow
def test_an_evaluation_runs_when_due_and_lands_in_the_metrics(tmp_path, cfg):
    evaluated = override(cfg, {"iterations": 2, "eval": {"every": 2, "suites": ["library-heldout"],
                                                          "preset": "smoke"}})
    out = run(evaluated, tmp_path, Models(ScriptedPolicy(designing_script)))
    assert out[0].values["eval"] is None
    ev = out[1].values["eval"]
    assert set(ev["suites"]) == {"library-heldout"} and ev["suites"]["library-heldout"]["items"] > 0
    summary = tmp_path / "eval" / "iter_0001" / "library-heldout" / "summary.json"
    assert json.loads(summary.read_text())["metrics"]["overall"]["score"] == \
        ev["suites"]["library-heldout"]["score"]


def _one_trained_iteration(tmp_path, cfg, **changes):
    from spadework.default_corpus import load_default_corpus
    from spadework.loop import RunContext, run_iteration
    from spadework.sandbox import Limits, Sandbox

    cfg = override(cfg, {"train": True, "plays": 4, "checkpoint_every": 1, **changes})
    learner = RecordingLearner()
    with Archive.open(archive_path(tmp_path)) as a, Sandbox(Limits(episode_seconds=600)) as sb:
        a.import_starter(starter_records(cfg.play.max_turns))  # starters enter the pool
        ctx = RunContext(cfg, tmp_path, a, Models(ScriptedPolicy(half_solving_script), learner,
                                                  RecordingSync(learner)), sb, corpus=load_default_corpus)
        m = run_iteration(ctx, 0)
        attempts = a.attempts()
    (samples,) = learner.steps
    return m.values["train"], samples, attempts


def test_designer_advantages_do_not_depend_on_turn_packing(tmp_path, cfg):
    """The reference's designer scale counts agent trajectories (its 192 is 24 environments x 8
    plays): 8 unhinted episodes of 2 environments over 2 design attempts every 2 iterations is
    8 / 2 * 2 = 8, whether the episodes' turns are trained apart or packed into fewer
    sequences. Counting samples made it 3 with packing on and the turn count with it off."""
    packed, with_pack, attempts = _one_trained_iteration(tmp_path / "on", cfg, learner={"pack_turns": True})
    apart, without, _ = _one_trained_iteration(tmp_path / "off", cfg, learner={"pack_turns": False})
    assert packed["agent_episodes"] == apart["agent_episodes"] == 8
    assert packed["designer_scale"] == apart["designer_scale"] == 8.0
    assert packed["packed_turns"] > 0 and apart["packed_turns"] == 0
    assert packed["agent_samples"] < apart["agent_samples"]  # the turns really were packed
    designer_on = [round(s.advantage, 9) for s in with_pack if s.role == "designer"]
    designer_off = [round(s.advantage, 9) for s in without if s.role == "designer"]
    assert designer_on == designer_off and any(designer_on)
    rewards = [x.reward for x in attempts]  # the accepted design's credit and the rejected one's
    assert sorted(designer_on) == sorted(round((r - sum(rewards) / 2) * 8.0, 9) for r in rewards)


@pytest.mark.slow
def test_the_samplers_caches_are_freed_before_the_learners_step(tmp_path, cfg):
    """The weight sync after the learner's step drops every cached conversation anyway: the
    train stage frees the samplers' KV caches before the step (a frozen designer's too, inside
    its BaseWeights), and the design stage the designer's when it ends (the next design stage
    asks about new documents)."""
    from spadework.policy.base import BaseWeights

    class Releasing(ScriptedPolicy):
        def release(self):
            self.released.append(len(learner.steps))

        def base_weights(self):
            import contextlib
            return contextlib.nullcontext(self)

    agent = Releasing(half_solving_script)
    designer = Releasing(half_solving_script)
    agent.released, designer.released = [], []
    learner = RecordingLearner()
    cfg = override(cfg, {"train": True, "iterations": 2, "checkpoint_every": 1,
                         "frozen": ["designer"]})
    run(cfg, tmp_path, Models(agent, learner, RecordingSync(learner), designer=BaseWeights(designer)))
    assert learner.steps and len(agent.released) == 2 and agent.released[0] == 0  # before the step
    # the designer's also when the design stage ends (iteration 0 only, at the cfg's cadence)
    assert designer.released == [0, *agent.released]


class _CountingPolicy(ScriptedPolicy):
    """A scripted policy that keeps engine counters as llama.cpp's does (``COUNTERS``)."""

    COUNTERS = ("chat_calls", "rows")

    @property
    def chat_calls(self) -> int:
        return len(self.calls)

    @property
    def rows(self) -> int:
        return sum(map(len, self.calls))


@pytest.mark.slow
def test_the_play_stages_engine_counters_reach_the_metrics(tmp_path, cfg):
    """What the engine did during play (its counters' growth over the stage alone, not the
    design stage's calls before it) lands in metrics.jsonl as ``engine``."""
    one = override(cfg, {"iterations": 1, "curriculum": {"designs_per_regen": 0, "pool_size": 2}})
    policy = _CountingPolicy(designing_script)
    run(one, tmp_path, Models(policy))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    engine = [r["engine"] for r in rows if r.get("engine")]
    assert len(engine) == 1 and set(engine[0]) == {"chat_calls", "rows"}
    assert 0 < engine[0]["chat_calls"] <= policy.chat_calls
    assert engine[0]["rows"] >= 2 * one.plays  # both arms of at least one environment


@pytest.mark.slow
def test_the_design_stages_engine_counters_reach_the_metrics_apart_from_plays(tmp_path, cfg):
    """What the designer's engine did during a design stage lands as ``design_engine``, and
    play's ``engine`` counts none of it."""
    one = override(cfg, {"iterations": 1, "curriculum": {"pool_size": 2}})
    policy = _CountingPolicy(designing_script)
    run(one, tmp_path, Models(policy))
    (row,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    with Archive.open(tmp_path / "archive.sqlite", create=False) as a:
        attempts = len(a.attempts())
    assert attempts >= 2 and row["design_engine"]["rows"] == attempts  # a row per attempt
    assert row["design_engine"]["rows"] + row["engine"]["rows"] <= policy.rows

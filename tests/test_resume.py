"""Kill a run with SIGKILL mid-iteration, resume it, and check that nothing was lost or counted
twice. The run is ``spadework run --preset smoke --no-train`` in a subprocess; its policy is the
scripted one (hidden ``--policy`` option, tests only) so that a run takes seconds, not minutes,
and kills land at known stages."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_loop import assert_matched_arms

from spadework.archive import Archive, archive_path

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def _cmd(run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "spadework.cli", "run", "--preset", "smoke", "--no-train",
            "--config", str(TESTS / "fixtures" / "smoke_whole_designs.toml"),
            "--run-dir", str(run_dir), "--policy", "scripted_policy:slow_policy_factory",
            "--iterations", "2", *extra]


def _train_cmd(run_dir: Path, *extra: str) -> list[str]:
    """A smoke run that trains: scripted replies, the real learner on a small real Llama."""
    return [sys.executable, "-m", "spadework.cli", "run", "--preset", "smoke",
            "--config", str(TESTS / "fixtures" / "smoke_train.toml"), "--run-dir", str(run_dir),
            "--policy", "scripted_policy:trainable_policy_factory", "--iterations", "2", *extra]


def _env() -> dict:
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


def _progress(run_dir: Path) -> tuple[int, str] | None:
    """(iteration, stage) of the last committed stage, read without disturbing the writer."""
    db = archive_path(run_dir)
    if not db.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            row = con.execute("SELECT value FROM state WHERE key = 'progress'").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    if row is None:
        return None
    p = json.loads(row[0])
    return p["iteration"], p["stage"]


def _run_until_killed(run_dir: Path, when, cmd=_cmd) -> tuple[int, str] | None:
    proc = subprocess.Popen(cmd(run_dir), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            seen = _progress(run_dir)
            if when(seen):
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        else:
            pytest.fail(f"the run ended or stalled before the kill point: {proc.stderr.read()[-800:]!r}")
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return _progress(run_dir)


def _check_consistent(run_dir: Path, reference: Path | None = None) -> None:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["iteration"] for x in lines] == [0, 1]
    with Archive.open(archive_path(run_dir)) as a:
        rows = a.query("SELECT iteration, env_id, arm, play_index FROM episodes")
        assert len(rows) == len(set(map(tuple, rows))) == 2 * 2 * 2 * 2  # iters x envs x arms x plays
        assert_matched_arms(a)
        keys = [x.key for x in a.attempts()]
        assert len(keys) == len(set(keys)) == 1  # one design slot, one attempt, at iteration 0
        assert [x.outcome for x in a.attempts()] == ["accepted"]
        assert all(x.reward is not None for x in a.attempts())
        stats = a.query("SELECT env_id, iteration, plays FROM env_plays")
        assert len(stats) == 4 and all(r[2] == 2 for r in stats)
        episodes = {(e.env_id, e.arm, e.play_index): (e.seed, e.rewards) for e in a.episodes()}
    if reference is not None:  # same episodes as a run that was never killed
        with Archive.open(archive_path(reference)) as b:
            assert episodes == {(e.env_id, e.arm, e.play_index): (e.seed, e.rewards)
                                for e in b.episodes()}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("whole")
    r = subprocess.run(_cmd(d), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    _check_consistent(d)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [
    (0, "design"),   # killed during pool/hints/play of iteration 0
    (0, "play"),     # killed after the episodes of iteration 0 committed
    (1, "hints"),    # killed while iteration 1 plays
])
def test_sigkill_then_resume_counts_everything_once(tmp_path, uninterrupted, kill_at):
    seen = _run_until_killed(tmp_path, lambda p: p is not None and STAGE_ORDER(p) >= STAGE_ORDER(kill_at))
    assert seen is not None and STAGE_ORDER(seen) < STAGE_ORDER((1, "store"))
    r = subprocess.run(_cmd(tmp_path, "--resume"), cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    _check_consistent(tmp_path, uninterrupted)


def test_a_second_run_in_the_same_dir_needs_resume(tmp_path, uninterrupted):
    r = subprocess.run(_cmd(uninterrupted), cwd=ROOT, env=_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and "--resume" in r.stderr


def STAGE_ORDER(p: tuple[int, str]) -> tuple[int, int]:  # noqa: N802 - reads like a key
    from spadework.loop import STAGES

    return p[0], STAGES.index(p[1])


class _Killed(BaseException):
    """Stands in for SIGKILL at a chosen line: nothing after it runs, nothing is committed."""


@pytest.mark.slow
def test_a_kill_inside_the_design_stage_leaves_no_trace(tmp_path, uninterrupted, monkeypatch):
    """The designer archives each round as it goes; a kill after that, before the stage
    commits, must roll it back, or the redo would reject its own design as a duplicate."""
    from scripted_policy import slow_policy_factory

    from spadework import loop
    from spadework.config import override, preset

    cfg = override(preset("smoke"), {"iterations": 2, "train": False, "design": {"max_tokens": 1024}})
    real_design = loop._STAGE_FUNCTIONS["design"]

    def design_then_killed(ctx, it):
        real_design(ctx, it)
        assert ctx.archive.attempts()  # the designer's round is in, uncommitted
        raise _Killed

    monkeypatch.setitem(loop._STAGE_FUNCTIONS, "design", design_then_killed)
    with pytest.raises(_Killed):
        loop.run(cfg, tmp_path, loop.Models(slow_policy_factory()))
    monkeypatch.setitem(loop._STAGE_FUNCTIONS, "design", real_design)
    with Archive.open(archive_path(tmp_path)) as a:
        assert a.attempts() == [] and a.load_state("progress") is None
    loop.run(cfg, tmp_path, loop.Models(slow_policy_factory()), resume=True)
    _check_consistent(tmp_path, uninterrupted)


def _without_seconds(value):
    """Metrics with every wall-clock and memory figure removed (the rest must replay exactly)."""
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items()
                if k not in ("seconds", "peak_rss_mib") and not k.endswith("_seconds")}
    if isinstance(value, list):
        return [_without_seconds(v) for v in value]
    return value


def _learner_state(run_dir: Path) -> tuple[int, dict]:
    from safetensors.numpy import load_file

    latest = json.loads((run_dir / "checkpoints" / "latest.json").read_text())
    folder = run_dir / "checkpoints" / latest["dir"]
    steps = json.loads((folder / "learner.json").read_text())["steps"]
    return steps, load_file(str(folder / "trainable.safetensors"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("trained")
    r = subprocess.run(_train_cmd(d), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return d


@pytest.mark.slow
@pytest.mark.parametrize("iteration", [0, 1])
def test_sigkill_in_the_train_stage_then_resume_trains_once_with_the_same_metrics(
        tmp_path, trained, iteration):
    """Killed while the learner steps (the reward stage committed, the train stage not), the
    resumed run restores the previous checkpoint, takes the step once, and ends with the
    uninterrupted run's metrics, learner weights and step count."""
    seen = _run_until_killed(tmp_path, lambda p: p == (iteration, "reward"), cmd=_train_cmd)
    assert seen == (iteration, "reward")  # the kill landed before the train stage committed
    r = subprocess.run(_train_cmd(tmp_path, "--resume"), cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [_without_seconds(json.loads(x)) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    whole = [_without_seconds(json.loads(x)) for x in (trained / "metrics.jsonl").read_text().splitlines()]
    assert lines == whole and all(line["train"].get("grad_norm") for line in lines)  # both steps ran
    steps, weights = _learner_state(tmp_path)
    whole_steps, whole_weights = _learner_state(trained)
    assert steps == whole_steps == 2 and weights.keys() == whole_weights.keys()
    assert all((weights[k] == whole_weights[k]).all() for k in weights)
    with Archive.open(archive_path(tmp_path)) as a, Archive.open(archive_path(trained)) as b:
        assert [(x.key, x.trained_iteration) for x in a.attempts()] == \
               [(x.key, x.trained_iteration) for x in b.attempts()]


@pytest.mark.slow
def test_a_kill_between_the_checkpoint_and_the_train_commit_keeps_the_step_and_its_figures(
        tmp_path, trained, monkeypatch):
    """The checkpoint is written before the train stage commits; killed in between, the resumed
    run must neither step again nor lose the step's figures (they travel in the checkpoint)."""
    from scripted_policy import trainable_policy_factory

    from spadework import loop
    from spadework.config import load_config, override
    from spadework.policy.load import learner_policy
    from spadework.train import Learner, weight_sync_for
    from spadework.train import checkpoint as ckpt

    cfg = override(load_config(TESTS / "fixtures" / "smoke_train.toml"), {"iterations": 2})
    real_save = ckpt.save_rotating

    def save_then_killed(learner, root, iteration, **kw):
        real_save(learner, root, iteration, **kw)
        if iteration == 1:
            raise _Killed

    def fresh():  # as `spadework run` builds them (commands.run_command)
        policy = trainable_policy_factory()
        learner = Learner(learner_policy(policy), cfg.learner)
        return {"policy": policy, "learner": learner, "sync": weight_sync_for(policy, learner)}

    monkeypatch.setattr(ckpt, "save_rotating", save_then_killed)
    with pytest.raises(_Killed):
        loop.run(cfg, tmp_path, loop.Models(**fresh()))
    monkeypatch.setattr(ckpt, "save_rotating", real_save)
    with Archive.open(archive_path(tmp_path)) as a:
        assert (a.load_state("progress")["iteration"], a.load_state("progress")["stage"]) == (1, "reward")
    loop.run(cfg, tmp_path, loop.Models(**fresh()), resume=True)
    lines = [_without_seconds(json.loads(x)) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    whole = [_without_seconds(json.loads(x)) for x in (trained / "metrics.jsonl").read_text().splitlines()]
    assert lines == whole
    assert _learner_state(tmp_path)[0] == 2  # two steps, not three

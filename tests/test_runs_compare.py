"""`spadework runs compare`: the printed and the JSON figures of two real runs (the loop with a
scripted policy over the real sandbox and archive; one trains with a learner that records the
losses it reports, one does not train) against figures computed here from the archive's
episodes and attempts, the learner's own record and ``metrics.jsonl``; the before/after
evaluation against ``eval compare``; and every bad input."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_policy import ScriptedPolicy, half_solving_script
from starters import starter_records

from spadework import reward
from spadework.archive import Archive, archive_path
from spadework.config import override, preset
from spadework.evaluate.compare import compare_paths
from spadework.evaluate.items import Sample
from spadework.evaluate.summary import write_samples
from spadework.loop import Models, run
from spadework.policy.registry import DEFAULT_MODEL

ROOT = Path(__file__).resolve().parents[1]


class LossLearner:
    """Stands in for the GRPO learner (whose real test needs a model): reports a loss per role
    that names the step and the role's sample count, and keeps what it reported."""

    def __init__(self) -> None:
        self.reported: list[dict[str, float | None]] = []

    def step(self, samples, progress=None):
        n = {role: sum(1 for s in samples if s.role == role) for role in ("agent", "designer")}
        figures = {f"loss_{role}": (0.01 * (len(self.reported) + 1) * k if k else None)
                   for role, k in n.items()}
        self.reported.append(figures)
        return figures

    def save(self, directory):
        Path(directory).mkdir(parents=True, exist_ok=True)
        return Path(directory)

    def load(self, directory):
        pass


def hint_using_script(conv, turn):
    """Designs the arithmetic chain; the hinted arm always solves it (its regret is then above
    0), the unhinted arm the instances whose b is even. With the runs' seeds that is 1 of 2
    instances in iteration 0 and 2 of 2 in iteration 1, so the rows hold a band share and a win
    rate of 1 as well as the starters' 0 (a figure of 0 everywhere would test nothing). A
    starter gets no move at all, whichever the pool draws (a boxed digit won a sliding puzzle's
    level 1, and its negative regret cancelled the chain's)."""
    m = re.search(r"Compute \((\d+) \* (\d+) \+ (\d+)\) mod (\d+)", conv.messages[-1]["content"])
    if conv.messages[0]["role"] != "system":  # the agent playing
        if not m:
            return "I have no move."
        a, b, c, mod = map(int, m.groups())
        hinted = "A hint from the game's designer" in conv.messages[0]["content"]
        return f"\\boxed{{{(a * b + c) % mod if hinted or b % 2 == 0 else mod + 1}}}"
    return half_solving_script(conv, turn)


def cfg(**top):
    return override(preset("smoke"), {"curriculum": {"designs_per_regen": 2},
                                      "design": {"max_tokens": 1024}, **top})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(trained run dir, its learner, untrained run dir): two iterations each (designs at 0)."""
    root = tmp_path_factory.mktemp("compare")
    for d in ("trained", "untrained"):  # the starters checked once per session, not per run
        with Archive.open(archive_path(root / d)) as a:
            a.import_starter(starter_records(preset("smoke").play.max_turns))
    learner = LossLearner()
    run(cfg(train=True, checkpoint_every=1, eval={"every": 2, "suites": ["library-heldout"],
                                                   "preset": "smoke", "max_items": 2}),
        root / "trained", Models(ScriptedPolicy(hint_using_script), learner))
    run(cfg(train=False), root / "untrained", Models(ScriptedPolicy(hint_using_script)))
    return root / "trained", learner, root / "untrained"


def copy_run(src: Path, dst: Path) -> Path:
    """A copy of a run's archive (through SQLite: the source may still hold a WAL file)."""
    dst.mkdir()
    with sqlite3.connect(archive_path(src)) as a, sqlite3.connect(archive_path(dst)) as b:
        a.backup(b)
    return dst


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "spadework.cli", "runs", "compare", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def expected_rows(run_dir: Path, losses: list[dict] | None) -> list[dict]:
    """Each iteration's figures from the archive's rows, not from its play statistics."""
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    out = []
    with Archive.open_read_only(archive_path(run_dir)) as a:
        steps = iter(losses or [])
        for m in lines:
            i = m["iteration"]
            eps = a.episodes(iteration=i)
            ret = [(e.env_id, e.arm, reward.episode_return(e.rewards, e.terminated)) for e in eps]
            failed = {(e.env_id, e.play_index) for e in eps
                      if e.status not in ("completed", "truncated")}
            scored_hinted = [reward.episode_return(e.rewards, e.terminated) for e in eps
                             if e.arm == "hint" and (e.env_id, e.play_index) not in failed]
            envs = sorted({env for env, arm, _ in ret if arm == "no_hint"})
            rates, regrets = [], []
            for env in envs:
                mine = [r for e, arm, r in ret if e == env and arm == "no_hint"]
                hinted = [r for e, arm, r in ret if e == env and arm == "hint"]
                rates.append(sum(r > 0 for r in mine) / len(mine))
                regrets.append(reward.regret(hinted, mine))
            unhinted = [r for _, arm, r in ret if arm == "no_hint"]
            no_hint = [e for e in eps if e.arm == "no_hint"]
            attempts = [x for x in a.attempts() if x.iteration == i]
            updated = losses is not None and not m["train"].get("note")  # a note: no update
            step = next(steps) if updated else {}
            out.append({
                "iteration": i,
                "valid_designs": sum(x.outcome == "accepted" for x in attempts) if attempts else None,
                "design_attempts": len(attempts) if attempts else None,
                "played": len(envs),
                "played_designed": sum(a.get_env(env).origin == "designed" for env in envs),
                "band_share": sum(0.4 <= r <= 0.6 for r in rates) / len(rates),
                "win_rate_zero_share": rates.count(0.0) / len(rates),
                "win_rate_one_share": rates.count(1.0) / len(rates),
                "unhinted_win_rate": sum(r > 0 for r in unhinted) / len(unhinted),
                "mean_regret": sum(regrets) / len(regrets),
                "unhinted_return": sum(unhinted) / len(unhinted),
                "designer_reward": m["designer_reward"]["mean"],
                "loss_agent": step.get("loss_agent"), "loss_designer": step.get("loss_designer"),
                "seconds": sum(v for v in m["seconds"].values() if v is not None),
                "hinted_win_rate": sum(r > 0 for r in scored_hinted) / len(scored_hinted),
                "well_formed_share": sum(sum(t.parsed for t in e.turns) / len(e.turns) for e in no_hint)
                / len(no_hint),
                "cut_share": sum(t.finish_reason == "length" for e in no_hint for t in e.turns)
                / sum(len(e.turns) for e in no_hint),
                "learnable_share": sum(0 < r < 1 for r in rates) / len(rates),
                "mean_level": sum(next(e.level for e in no_hint if e.env_id == env) for env in envs)
                / len(envs),
                "peak_rss_mib": max(m["peak_rss_mib"].values(), default=None),
            })
    return out


def test_the_figures_match_the_archive_rows(runs, tmp_path):
    trained, learner, untrained = runs
    r = cli(str(trained), str(untrained), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["band"] == [0.4, 0.6] and got["arm"] == "no_hint"
    a, b = got["runs"]
    assert a["run_dir"] == str(trained) and a["preset"] == "smoke" and a["iterations_finished"] == 2
    assert a["models"] == [{"role": role, "model": DEFAULT_MODEL, "default": True, "frozen": False}
                           for role in ("designer", "agent")]  # the smoke preset names none
    assert len(learner.reported) == 1  # iteration 1 scored each group alike: no update
    for run_json, run_dir, losses in ((a, trained, learner.reported), (b, untrained, None)):
        want = expected_rows(run_dir, losses)
        assert [row.keys() for row in run_json["iterations"]] == [w.keys() for w in want]
        for row, w in zip(run_json["iterations"], want):
            assert row == pytest.approx(w, abs=2e-3), row["iteration"]  # seconds are kept to ms
        assert run_json["total_seconds"] == pytest.approx(sum(w["seconds"] for w in want), abs=5e-3)
        assert run_json["peak_rss_mib"] == max(w["peak_rss_mib"] for w in want) > 0
    first = a["iterations"][0]
    assert first["design_attempts"] == 2 and first["played_designed"] >= 1  # designs were played
    assert 0 < first["unhinted_win_rate"] < 1 and first["loss_designer"] is not None
    for key in ("band_share", "win_rate_zero_share", "win_rate_one_share", "mean_regret",
                "hinted_win_rate", "well_formed_share"):
        assert any(row[key] > 0 for row in a["iterations"]), key  # a figure the test can tell apart
    assert a["iterations"][1]["design_attempts"] is None  # smoke regenerates every 2nd iteration
    assert a["iterations"][1]["loss_agent"] is None
    assert all(row["loss_agent"] is None and row["loss_designer"] is None for row in b["iterations"])
    # the in-run evaluation after iteration 1, as the metrics carry it
    line = json.loads((trained / "metrics.jsonl").read_text().splitlines()[1])
    suite = line["eval"]["suites"]["library-heldout"]
    assert a["in_run_eval"] == [{"iteration": 1, "suite": "library-heldout", "score": suite["score"],
                                 "ci95": suite["ci95"], "items": suite["items"]}]
    assert b["in_run_eval"] == [] and a["before_after"] is None
    assert a["before_after_note"] == "no before/after eval"


def cells(text: str, run_dir: Path) -> list[list[str]]:
    """The table rows of one run's block, split into cells ("2 (1)" is two)."""
    block = text.split(f"== {run_dir}\n")[1].split("\n\n")[0].splitlines()
    head = next(k for k, line in enumerate(block) if line.split()[:2] == ["it", "designs"])
    return [line.split() for line in block[head + 1:] if line.split()[0].isdigit()]


def test_the_table_prints_the_same_figures(runs, tmp_path):
    trained, learner, untrained = runs
    r = cli(str(trained), str(untrained), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert max(len(line) for line in r.stdout.splitlines()) < 100
    for run_dir, losses in ((trained, learner.reported), (untrained, None)):
        block = r.stdout.split(f"== {run_dir}\n")[1]
        summary = block.splitlines()[0]
        assert summary.startswith(f"   preset smoke, model {DEFAULT_MODEL} (default), 2 iterations "
                                  "finished, ") and summary.endswith(" s")  # under 10 minutes
        assert block.splitlines()[1].startswith("   peak resident memory ")
        assert "unhinted win rate " in block and "no before/after eval" in block
        for row, w in zip(cells(r.stdout, run_dir), expected_rows(run_dir, losses), strict=True):
            designs = "-" if w["design_attempts"] is None else f"{w['valid_designs']}/{w['design_attempts']}"
            assert row[:4] == [str(w["iteration"]), designs, str(w["played"]), f"({w['played_designed']})"]
            keys = ("mean_level", "learnable_share", "band_share", "win_rate_one_share",
                    "mean_regret", "designer_reward", "loss_agent", "loss_designer", "seconds")
            for cell, key in zip(row[4:], keys, strict=True):
                if w[key] is None:
                    assert cell == "-", key
                else:
                    assert float(cell) == pytest.approx(w[key], rel=5e-3, abs=0.051 if key == "seconds"
                                                        else 5e-3), key
    assert "in-run eval library-heldout: it 1 " in r.stdout
    assert "key: designs" in r.stdout and "the agent without the hint" in r.stdout


def write_eval(folder: Path, correct: dict[str, list[bool]]) -> None:
    """An `eval --out` folder of one suite: item -> correctness of its samples."""
    write_samples(folder / "library-heldout" / "samples.jsonl", [
        Sample("library-heldout", "t", "b", item, k, seed=k, prompt_hash=item, correct=c)
        for item, cs in correct.items() for k, c in enumerate(cs)])


def test_before_and_after_evaluations_are_compared_by_eval_compare(runs, tmp_path):
    trained, _, _ = runs
    d = copy_run(trained, tmp_path / "run")
    write_eval(d / "eval" / "before", {f"i{k}": [k < 2, False] for k in range(6)})
    r = cli(str(d), cwd=tmp_path)
    assert r.returncode == 0 and "eval/before exists but" in r.stdout and "--out" in r.stdout
    write_eval(d / "eval" / "after", {f"i{k}": [k < 5, k < 3] for k in range(6)})
    want = compare_paths(d / "eval" / "after", d / "eval" / "before")["comparisons"][0]
    assert want["b"] == pytest.approx(2 / 12, abs=1e-6) and want["a"] == pytest.approx(8 / 12, abs=1e-6)
    got = json.loads(cli(str(d), "--json", cwd=tmp_path).stdout)["runs"][0]["before_after"]
    assert got == [{"suite": "library-heldout", "scope": "overall", "items": 6, "before": want["b"],
                    "after": want["a"], "diff": want["diff"], "ci95": want["ci95"],
                    "p_holm": want["p_holm"], "significant": want["significant"]}]
    text = cli(str(d), cwd=tmp_path).stdout
    assert (f"library-heldout    overall       16.7 ->  66.7   +50.0 [{100 * want['ci95'][0]:+.1f}, "
            f"{100 * want['ci95'][1]:+.1f}]") in text
    write_eval(d / "eval" / "after", {"other": [True]})  # not the items the first side played
    r = cli(str(d), cwd=tmp_path)
    assert r.returncode == 0 and "before/after eval cannot be compared: library-heldout: the two " \
        "sides played different items" in r.stdout


def test_a_run_without_a_finished_iteration(tmp_path):
    d = tmp_path / "fresh"
    Archive.open(archive_path(d)).close()  # what `spadework run` creates before its first stage
    r = cli(str(d), cwd=tmp_path)
    assert r.returncode == 0 and "no iteration finished yet" in r.stdout, r.stderr
    with Archive.open(archive_path(d)) as a:
        a.save_state("progress", {"iteration": 0, "stage": "play"})
        a.save_state("config", {"preset": "cpu", "model": None, "designer_model": "big",
                                "agent_model": None, "frozen": ["designer"]})
    r = cli(str(d), "--json", cwd=tmp_path)
    got = json.loads(r.stdout)["runs"][0]
    assert got["iterations"] == [] and got["total_seconds"] is None
    assert got["in_progress"] == {"iteration": 0, "stage": "play"}
    assert got["models"] == [{"role": "designer", "model": "big", "default": False, "frozen": True},
                             {"role": "agent", "model": DEFAULT_MODEL, "default": True, "frozen": False}]
    text = cli(str(d), cwd=tmp_path).stdout
    assert "iteration 0 under way (committed through its play stage)" in text
    assert f"preset cpu, designer model big (frozen), agent model {DEFAULT_MODEL} (default), 0 " \
        "iterations finished, -" in text


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stdout[-500:], r.stderr[-1500:])
    assert "Traceback" not in r.stderr and r.stdout == "" and r.stderr.count("\n") == 1
    assert all(w in r.stderr for w in words), r.stderr


def test_bad_run_directories_are_one_line_errors(runs, tmp_path):
    trained, _, _ = runs
    one_line_error(cli(str(tmp_path / "nope"), cwd=tmp_path), "no run directory", "nope")
    (tmp_path / "file.txt").write_text("x")
    one_line_error(cli(str(trained), str(tmp_path / "file.txt"), cwd=tmp_path), "is a file")
    one_line_error(cli(str(tmp_path), cwd=tmp_path), "holds no archive.sqlite", "not a spadework run")
    newer = copy_run(trained, tmp_path / "newer")
    with sqlite3.connect(newer / "archive.sqlite") as c:
        c.execute("PRAGMA user_version = 99")
    one_line_error(cli(str(newer), cwd=tmp_path), "schema v99, newer than", "upgrade spadework")
    r = subprocess.run([sys.executable, "-m", "spadework.cli", "runs", "compare"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 2 and "RUN_DIR" in r.stderr


def expected_pairs(run_dir: Path) -> list[tuple[float, float]]:
    """Each (environment, level) played unhinted in two iterations or more, counting only the
    iterations after which its level did not move: its win rate at the first such iteration
    and at the last, from the archive's episodes and level changes."""
    rates: dict[tuple[str, int], dict[int, list[bool]]] = {}
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    with Archive.open_read_only(archive_path(run_dir)) as a:
        moved = {(c["env_id"], c["iteration"]) for c in a.level_changes()}
        for i in (json.loads(x)["iteration"] for x in lines):
            for e in a.episodes(iteration=i, arm="no_hint"):
                if (e.env_id, i) in moved:
                    continue
                won = reward.episode_return(e.rewards, e.terminated) > 0
                rates.setdefault((e.env_id, e.level), {}).setdefault(i, []).append(won)
    return [(sum(by[min(by)]) / len(by[min(by)]), sum(by[max(by)]) / len(by[max(by)]))
            for by in rates.values() if len(by) > 1]


def test_pool_pools_the_runs_replays(runs, tmp_path):
    trained, _, untrained = runs
    want = {d: sorted(expected_pairs(d)) for d in (trained, untrained)}
    assert want[trained] and want[untrained]  # both runs replayed something at the same level
    got = json.loads(cli(str(trained), str(untrained), "--json", "--pool", cwd=tmp_path).stdout)
    for run_json, d in zip(got["runs"], (trained, untrained)):
        pairs = run_json["replayed"]["first_latest"]
        got_pairs = sorted((round(a, 9), round(b, 9)) for a, b in pairs)
        assert got_pairs == [(round(a, 9), round(b, 9)) for a, b in want[d]]
    pooled = got["pooled_replayed"]
    diffs = [b - a for d in want for a, b in want[d]]
    assert pooled["runs"] == [str(trained), str(untrained)] and pooled["pairs"] == len(diffs)
    assert pooled["diff"] == pytest.approx(sum(diffs) / len(diffs))
    assert pooled["first"] == pytest.approx(sum(a for d in want for a, _ in want[d]) / len(diffs))
    assert pooled["ci95"][0] <= pooled["diff"] <= pooled["ci95"][1] and 0 < pooled["p"] <= 1
    assert "pooled_replayed" not in json.loads(cli(str(trained), "--json", cwd=tmp_path).stdout)
    text = cli(str(trained), str(untrained), "--pool", cwd=tmp_path).stdout
    assert (f"== pooled over 2 runs: replayed at the same level, {len(diffs)} (environment, level) "
            "pairs") in text
    assert f"{pooled['diff']:+.2f} [{pooled['ci95'][0]:+.2f}, {pooled['ci95'][1]:+.2f}]" in text
    assert "== pooled" not in cli(str(trained), str(untrained), cwd=tmp_path).stdout
    one_line_error(cli(str(trained), f"{trained}/", "--pool", cwd=tmp_path),
                   "--pool counts each run once", "name each run one time")


def test_replays_leave_out_the_plays_that_moved_the_level():
    """An agent that never changes, under the level controller: every play counted, the
    (environment, level) pairs show a gain, because an environment leaves a level at a high
    (or empty) play and that play is then its latest there; with the plays that moved the
    level left out, the two ends are drawn alike and the change is nil. Without a controller
    (one level) nothing moves and the figure is the same either way."""
    import random

    from spadework.levels import next_level
    from spadework.report.runs import replayed

    def simulate(p, levels):
        rng, rows, moved = random.Random(0), [], set()
        for env in range(400):
            level = 1
            for it in range(12):
                w = sum(rng.random() < p for _ in range(5)) / 5
                rows.append({"env_id": f"e{env}", "iteration": it, "level": level, "win_rate": w})
                nxt = next_level(level, levels, w)
                if nxt != level:
                    moved.add((f"e{env}", it))
                level = nxt
        return rows, moved

    for p in (0.3, 0.5, 0.7):
        rows, moved = simulate(p, levels=3)
        every, held = replayed(rows), replayed(rows, moved)
        assert every.diff > 0.03 and every.ci95[0] > 0, (p, every)  # the selection's false gain
        assert abs(held.diff) < 0.03 and held.ci95[0] < 0 < held.ci95[1], (p, held)
        assert held.left_out == len(moved) > 0
    rows, moved = simulate(0.5, levels=1)
    assert not moved and replayed(rows, moved) == replayed(rows)

"""`spadework eval` through a subprocess, as a person runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spadework.evaluate.items import Sample
from spadework.evaluate.summary import write_samples

HERE = Path(__file__).resolve().parent


def spadework(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(HERE), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "spadework.cli", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)


def one_error_line(p: subprocess.CompletedProcess) -> str:
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert "Traceback" not in p.stderr and len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_list_names_suites_and_unsupported_ones():
    p = spadework("eval", "list")
    assert p.returncode == 0
    assert "rg-hard\n" in p.stdout and "math\n" in p.stdout
    assert "tau2 (unsupported: " in p.stdout and "acebench (unsupported: " in p.stdout


def test_bad_requests_get_one_line_and_the_right_code(tmp_path):
    p = spadework("eval")
    assert p.returncode == 2 and "--suite" in one_error_line(p)
    p = spadework("eval", "--suite", "nope")
    assert p.returncode == 1 and "choose one of" in one_error_line(p)
    p = spadework("eval", "--suite", "rg-hard", "--preset", "fast")
    assert p.returncode == 1 and "paper, paper-inloop, cpu, smoke" in one_error_line(p)
    p = spadework("eval", "--suite", "math", "--checkpoint", str(tmp_path / "none"))
    assert p.returncode == 1 and "RUN_DIR" in one_error_line(p)
    p = spadework("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert p.returncode == 1 and "samples.jsonl" in one_error_line(p)


def test_smoke_run_writes_samples_summary_and_report(tmp_path):
    p = spadework("eval", "--suite", "rg-hard", "--preset", "smoke", "--out", str(tmp_path),
                  "--policy", "eval_policies:wrong_backend")
    assert p.returncode == 0, p.stderr
    assert "overall" in p.stdout and "95% CI" in p.stdout and "disjoint" in p.stdout
    out = tmp_path / "rg-hard"
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["seed"] and r["prompt_hash"] for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["packages"]["reasoning-gym"] == "0.1.25"
    assert summary["metrics"]["overall"]["score"] == 0.0
    assert summary["sampling"]["temperature"] == 0.6
    assert {n for n, active, _ in summary["judge"]["layers"] if active} >= {"seccomp", "rlimits"}
    assert "| overall |" in (out / "summary.md").read_text()
    assert "Traceback" not in p.stderr and "Warning" not in p.stderr
    # no terminal here, so progress comes as lines: one per step, one per tenth done
    assert "eval  rg-hard: sampling" in p.stderr and "eval  4/4" in p.stderr, p.stderr


def test_compare_prints_the_paired_table_and_says_cis_are_unadjusted(tmp_path):
    for side, right in (("a", set(range(30))), ("b", set(range(10)))):
        rows = [Sample("math", "MATH500", "MATH500", f"m/{i}", 0, i, f"h{i}", correct=i in right)
                for i in range(40)]
        write_samples(tmp_path / side / "math" / "samples.jsonl", rows)
    p = spadework("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                  str(tmp_path / "cmp.json"))
    assert p.returncode == 0, p.stderr
    assert "+50.0" in p.stdout and "unadjusted" in p.stdout and "Holm" in p.stdout
    result = json.loads((tmp_path / "cmp.json").read_text())
    assert result["comparisons"][0]["significant"]

"""The report's size, generation time and load time in a headless Chromium.

Figures, for each run measured: the file's size, the seconds ``build_report`` takes, the
seconds from navigation until the page is ready (table rendered, first page routed; measured
outside the page and as the page's own ``performance.now()``), and the seconds to open one
environment page (its chunk inflated and rendered). Baseline from the same browser in the same
run: a trivial HTML file's load (the browser's own floor), so the ratio holds on a noisy machine.

Runs measured: a small real run made here with the scripted policy and the real learner (the
shape of the test fixture: 3 iterations; ``--run-dir DIR`` measures an existing run instead, e.g.
one `make run` wrote), and a synthetic archive of ``--envs`` environments (default 10,000: 40%
accepted and played in 1-2 iterations, 2 plays per arm, 3-5 turns each; 30 iterations of
metrics; every design with its attempt and document), built once under ``--work``.

Targets (docs/report.md): a 10,000-environment archive's report under 20 MB, ready in under 2 s.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/report.py [--envs 10000] [--run-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from spadework.archive import Archive, DesignAttempt, EnvRecord, GroundingDocument, archive_path  # noqa: E402
from spadework.report import build_report  # noqa: E402
from spadework.report.headless import Browser, find_chromium  # noqa: E402
from spadework.types import CheckReport, CheckResult, Episode, Sampling, Turn  # noqa: E402

CODE = (ROOT / "tests" / "fixtures" / "envs" / "good" / "arithmetic_chain.py").read_text()
SKILLS = ("logical deduction", "mathematical reasoning", "optimization", "pattern recognition",
          "planning", "causal inference")
STAGES = ("static", "load", "contract", "determinism", "solvable", "not_trivial", "novelty")


def synthetic(path: Path, n: int, iterations: int = 30) -> None:
    """An archive of ``n`` environments written through the Archive API (seeded, so the same
    every time)."""
    rng = random.Random(0)
    with Archive.open(path) as a, a.transaction():
        for i in range(n):
            it = rng.randrange(iterations)
            code = CODE.replace("ArithmeticChainEnv", f"ArithmeticChain{i}Env") + f"\n# variant {i}: {rng.random()}\n"
            ok = rng.random() < 0.4
            fail = None if ok else rng.choice(STAGES)
            results = tuple(CheckResult(s, ok or STAGES.index(s) < STAGES.index(fail),
                                        "fine" if ok or s != fail else f"{s} failed on seed {rng.randrange(99)}",
                                        rng.random() / 10) for s in STAGES[:STAGES.index(fail) + 1 if fail else None])
            report = CheckReport(None, f"ArithmeticChain{i}Env", results, max_turns=4)
            doc = GroundingDocument(f"doc-{i % 3000}", "Tides rise and fall twice a day. " * 30, f"Doc {i % 3000}")
            skill = SKILLS[i % len(SKILLS)]
            rec = EnvRecord.from_check(code, report, iteration=it, setting="games", skill=skill,
                                       doc_id=doc.doc_id, doc_excerpt=doc.text[:200],
                                       hint="Work the expression left to right." if ok else None)
            a.add_env(rec)
            a.add_document(doc)
            a.add_attempt(DesignAttempt(it, i, 0, skill, "games", doc.doc_id, (), "reply", (1,), (2,), (-0.5,),
                                        "accepted" if ok else fail, env_id=rec.env_id, reward=rng.random()))
            if not ok:
                continue
            for played in sorted({it, min(iterations - 1, it + rng.randrange(3))}):
                wins = 0
                for p in range(2):
                    seed = rng.randrange(2**31)
                    for arm in ("hint", "no_hint"):
                        turns = tuple(Turn((1,) * 40, (2,) * 30, (-0.5,) * 30,
                                           f"Let me think about step {t}. The value is {rng.randrange(99)}, so "
                                           f"\\boxed{{{rng.randrange(99)}}}", f"\\boxed{{{t}}}",
                                           f"Wrong. Compute ({rng.randrange(99)} * 7 + 3) mod 11. Turns left: {4 - t}.",
                                           0.0, "stop", Sampling(0.7), True) for t in range(rng.randrange(3, 6)))
                        win = rng.random() < 0.4
                        wins += win and arm == "no_hint"
                        a.add_episodes(played, [Episode(rec.env_id, arm, p, seed, turns, (0.0,) * (len(turns) - 1)
                                                        + (1.0 if win else 0.0,), win, not win,
                                                        "completed" if win else "truncated",
                                                        opening=f"You are playing a text game.\n\n{'A hint: work left to right.' if arm == 'hint' else ''}\nCompute (3 * 7 + 3) mod 11.")])
                a.record_env_stats(rec.env_id, played, plays=2, wins=wins, regret=rng.uniform(-0.5, 1))
        for it in range(iterations):
            x = it / iterations
            a.record_iteration(it, {
                "agent_return": {"no_hint": x * 0.5, "hint": x * 0.6}, "mean_regret": 0.1 * (1 - x),
                "designer_reward": {"mean": 0.3 + 0.2 * x, "min": 0.0, "max": 0.9, "n": 24},
                "losses": {"agent": 0.01 / (it + 1), "designer": 0.02 / (it + 1)},
                "agent_format_share": {"no_hint": x, "hint": x}, "band_share": 0.2 + 0.3 * x,
                "train": {"importance_ratio": {"agent": {"mean": 1.0, "max": 1.3, "capped_share": 0.0}}},
                "seconds": {"design": 30.0, "play": 100.0 + it, "train": 60.0}, "tokens": {"design": 9000, "play": 20000},
                "pool": {"size": 24, "fresh": 6}, "validity_funnel": {}})
        a.save_state("config", {"preset": "synthetic", "model": None, "run_seed": 0, "train": True})


def scripted_run(path: Path) -> None:
    from test_report import make_run

    make_run(path, 3)


def measure(browser: Browser, run_dir: Path, out: Path, loads: int) -> dict:
    start = time.perf_counter()
    s = build_report(run_dir, out)
    built = time.perf_counter() - start
    url = out.resolve().as_uri()
    walls, own = [], []
    for _ in range(loads):
        browser.call("Page.navigate", url="about:blank")
        walls.append(browser.open(url))
        own.append(float(browser.evaluate("document.body.dataset.readyMs")) / 1000)
    env_id = browser.evaluate("document.querySelector('#table tbody tr:last-child').dataset.id")
    t = time.perf_counter()
    browser.evaluate(f"location.hash = '#env/{env_id}'")
    browser.wait_for("!!document.querySelector('#env .env')")
    opened = time.perf_counter() - t
    return {"bytes": s.bytes, "mb": round(s.bytes / 1e6, 2), "envs": s.envs, "iterations": s.iterations,
            "episodes_embedded": s.episodes_embedded, "episodes_total": s.episodes_total,
            "build_s": round(built, 2), "load_s": round(statistics.median(walls), 3),
            "load_in_page_s": round(statistics.median(own), 3), "open_env_page_s": round(opened, 3),
            "errors": browser.errors[:5]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs", type=int, default=10_000)
    ap.add_argument("--run-dir", type=Path, help="measure this run instead of a scripted one")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "spadework-bench-report")
    ap.add_argument("--loads", type=int, default=3)
    args = ap.parse_args()
    if find_chromium() is None:
        sys.exit("benchmarks/report.py needs Chromium on PATH (Debian's `chromium` package)")
    args.work.mkdir(parents=True, exist_ok=True)
    big = args.work / f"synthetic-{args.envs}"
    if not archive_path(big).exists():
        t = time.perf_counter()
        synthetic(archive_path(big), args.envs)
        print(f"synthetic archive written in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    small = args.run_dir
    if small is None:
        small = Path(tempfile.mkdtemp(prefix="run-", dir=args.work))
        scripted_run(small)
    blank = args.work / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body data-ready='1'>blank</body></html>")
    with Browser(offline=True) as b:
        base = statistics.median(b.open(blank.resolve().as_uri()) for _ in range(args.loads))
        runs = {"run": measure(b, small, args.work / "run.html", args.loads),
                "synthetic": measure(b, big, args.work / "synthetic.html", args.loads)}
    for r in runs.values():
        r["load_vs_blank"] = round(r["load_s"] / base, 1)
    print(json.dumps({"blank_load_s": round(base, 3), "run_dir": str(small), **runs}, indent=2))


if __name__ == "__main__":
    main()

"""A chaos soak: a training run disturbed by faults at seeded moments, resumed after each, then
checked against the same run left alone.

Prints one JSON object. The run is ``spadework run`` in a child process, by default the smoke
preset with training (``tests/fixtures/smoke_train.toml``; scripted replies from
``tests/scripted_policy.py:soak_policy_factory``, whose designs exhaust memory inside the sandbox,
and the real learner on a small random Llama: deterministic, so a disturbed run can be compared
with an undisturbed one). ``--run-args`` replaces it (e.g. ``--preset cpu``; the comparison then
holds only where that run is deterministic).

Faults, drawn in turn from ``--faults`` at a moment drawn from the undisturbed run's wall time:

- ``kill_run``: SIGKILL of the run's process group; resumed with ``--resume``.
- ``kill_sandbox_child``: SIGKILL of one process under the run's sandbox (a zygote's child or the
  zygote); the run goes on (the episode it held is recorded as failed).
- ``disk_full``: the attempt runs under a file-size limit drawn from 128 KiB to below the
  largest file of the undisturbed run's checkpoints (at most 1 MiB; SIGXFSZ ignored: a write
  past it fails with EFBIG, as on a full disk), so that the archive's or the next checkpoint's
  write fails; the run must stop with one ``error:`` line naming the file; resumed without it.
- ``truncated_checkpoint``: between attempts the latest checkpoint's ``optimizer.pt`` is cut to
  half; the resume must pass it over, naming it, and go on from the checkpoint before (recorded
  in the archive's ``checkpoint_fallbacks``; the damaged folder kept as ``iter_XXXX.damaged``).
  The learner is then one update behind the undisturbed run's, so the iterations from there on
  are not compared (``iterations_after_fallback``). Where no earlier checkpoint exists (a full
  disk stopped the one after it) the resume must refuse with one ``error:`` line naming the
  file; the driver then puts it back from the copy it took, as a user restores a backup.
  While there is no checkpoint yet it waits: the next other fault goes first, or, when none is
  left, a start is stopped as soon as the first checkpoint is written (not counted as a fault).

At the end: every iteration in ``metrics.jsonl`` exactly once, ``PRAGMA integrity_check`` ok,
episodes unique by (iteration, environment, arm, play) and as many as the undisturbed run's,
every checkpoint folder loadable, and the iterations whose metrics (timings left out) equal the
undisturbed run's; one that differs is listed with the figures that differ (a killed sandbox
child fails the check or the episode it was running, which changes that iteration's figures).

Usage: .venv/bin/python benchmarks/soak.py [--iterations 10] [--faults kill_run,disk_full,...]
       [--seed 0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
KINDS = ("kill_run", "kill_sandbox_child", "disk_full", "truncated_checkpoint")
DEFAULT_FAULTS = ("kill_run", "kill_sandbox_child", "kill_run", "disk_full", "truncated_checkpoint",
                  "kill_sandbox_child", "kill_sandbox_child", "kill_run", "disk_full",
                  "truncated_checkpoint", "kill_run")
#: The loop's stages in order (spadework.loop.STAGES): a run's progress is a point among them.
STAGES = ("design", "pool", "hints", "play", "reward", "train", "eval", "store")
DEFAULT_RUN = ["--preset", "smoke", "--config", str(TESTS / "fixtures" / "smoke_train.toml"),
               "--policy", "scripted_policy:soak_policy_factory"]


def command(run_dir: Path, args: argparse.Namespace, resume: bool) -> list[str]:
    extra = args.run_args.split() if args.run_args else DEFAULT_RUN
    return [sys.executable, "-m", "spadework.cli", "run", *extra, "--iterations",
            str(args.iterations), "--run-dir", str(run_dir), *(["--resume"] if resume else [])]


def child_env() -> dict[str, str]:
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc), breadth first."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(0), [])
        out += kids
        todo += kids
    return out


def state(run_dir: Path, key: str) -> dict | None:
    """One value of the run's archive ``state`` table, read without disturbing the writer."""
    db = run_dir / "archive.sqlite"
    if not db.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            row = con.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return json.loads(row[0]) if row else None


def progress(run_dir: Path) -> int:
    """The run's last committed stage as a point (iteration x stages + stage), -1 before any."""
    p = state(run_dir, "progress")
    if p is None:
        return -1
    return p["iteration"] * len(STAGES) + STAGES.index(p["stage"])


def largest_checkpoint_file(run_dir: Path) -> int:
    return max((p.stat().st_size for p in (run_dir / "checkpoints").rglob("*") if p.is_file()),
               default=0)


def file_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        # the soft limit only: the sandbox sets its children's own (lower) limit under the hard one
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return apply


KILLS = ("kill_run", "kill_sandbox_child")


def attempt(run_dir: Path, args: argparse.Namespace, resume: bool, plan: list[str],
            rng: random.Random) -> dict:
    """One start of the run with the faults of ``plan``: ``disk_full`` alone (a file-size limit
    set before it starts), or kills in order, each fired a moment (0 to 0.5 s) after the run
    commits a stage drawn one to four stages after where it stood when the previous one fired
    (a killed sandbox child leaves the run going, so a kill may follow it in the same start)."""
    row: dict = {"faults": list(plan), "resume": resume, "fired": []}
    last = args.iterations * len(STAGES) - 1
    kills = [f for f in plan if f in KILLS]

    def draw() -> tuple[int, float]:
        return min(progress(run_dir) + rng.randint(1, 4), last - 1), rng.uniform(0.0, 0.5)

    limit = None
    if "disk_full" in plan:  # below the largest file of a checkpoint: the next save hits it
        limit = rng.randint(min(128 << 10, args.limit_below // 2), args.limit_below - 1)
        row["file_size_limit"] = limit
    log = tempfile.TemporaryFile()  # noqa: SIM115 (the child's stderr, read at its end)
    start = time.monotonic()
    proc = subprocess.Popen(
        command(run_dir, args, resume), cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL,
        stderr=log, start_new_session=True,
        preexec_fn=file_limit(limit) if limit else None)  # noqa: PLW1509 (no threads here)
    target, delay = draw() if kills else (None, 0.0)
    reached = None
    while proc.poll() is None:
        now = time.monotonic() - start
        if "until_checkpoint" in plan and has_checkpoint(run_dir):
            os.killpg(proc.pid, signal.SIGKILL)  # not a fault: a checkpoint to truncate next
            row["stopped_at_checkpoint"] = True
            break
        if kills and reached is None and progress(run_dir) >= target:
            reached = now
        if kills and reached is not None and now >= reached + delay:
            fault = kills[0]
            event = {"fault": fault, "at": f"{target // len(STAGES)}:"
                     f"{STAGES[target % len(STAGES)]} + {delay:.2f} s", "at_s": round(now, 2)}
            if fault == "kill_run":
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                kids = descendants(proc.pid)
                if not kids:  # nothing under the run yet: a little later
                    delay += 0.2
                    continue
                victim = rng.choice(kids)
                try:
                    event["victim"] = Path(f"/proc/{victim}/cmdline").read_bytes()[:48].replace(
                        b"\0", b" ").decode(errors="replace")
                    event["zygote"] = Path(f"/proc/{victim}/stat").read_text().rsplit(
                        ")", 1)[1].split()[1] == str(proc.pid)
                    os.kill(victim, signal.SIGKILL)
                except (OSError, ProcessLookupError):
                    event["victim"] = "gone before the signal"
            row["fired"].append(event)
            kills.pop(0)
            reached = None
            if kills:
                target, delay = draw()
        if now > args.attempt_timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            row["stalled"] = True
        time.sleep(0.02)
    row["rc"] = proc.wait()
    row["wall_s"] = round(time.monotonic() - start, 1)
    log.seek(0)
    err = log.read().decode(errors="replace")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    row["error"] = errors[-1][:300] if errors else None
    row["tracebacks"] = err.count("Traceback (most recent")
    if kills:
        row["not_fired"] = kills  # the run ended before their points
    return row


def has_checkpoint(run_dir: Path) -> bool:
    return (run_dir / "checkpoints" / "latest.json").exists()


def truncate_latest(run_dir: Path, backup: Path) -> dict:
    pointer = run_dir / "checkpoints" / "latest.json"
    target = run_dir / "checkpoints" / json.loads(pointer.read_text())["dir"] / "optimizer.pt"
    shutil.copy2(target, backup)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return {"fault": "truncated_checkpoint", "file": str(target.relative_to(run_dir)),
            "bytes": [len(data), len(data) // 2]}


def outcomes(table: list[dict]) -> dict[str, dict[str, int]]:
    """Per fault kind, what followed: the run went on (``ran_on``), stopped with one ``error:``
    line and was resumed (``clear_error``), was killed and resumed (``killed``), or a traceback
    (``traceback``)."""
    out: dict[str, Counter] = {}
    for r in table:
        fired = r.get("fired", [])
        for e in fired[:-1]:  # a kill followed by another in the same start: the run went on
            out.setdefault(e["fault"], Counter())["ran_on"] += 1
        kinds = [e["fault"] for e in fired[-1:]]
        kinds += [f for f in r.get("faults", []) if f == "disk_full"]
        if r.get("fault") == "truncated_checkpoint":
            out.setdefault("truncated_checkpoint", Counter())[
                "traceback" if r.get("tracebacks") else "fell_back" if r.get("fell_back") else
                "refused_clearly" if r.get("refused_clearly") else "neither"] += 1
        for kind in kinds:
            how = ("traceback" if r.get("tracebacks") else "killed" if r["rc"] == -signal.SIGKILL
                   else "clear_error" if r["rc"] != 0 and r.get("error") else
                   "ran_on" if r["rc"] == 0 else f"rc {r['rc']}")
            out.setdefault(kind, Counter())[how] += 1
    return {k: dict(v) for k, v in out.items()}


def comparable(obj):
    """Metrics without timings and memory peaks, floats rounded (what must match an undisturbed
    run)."""
    if isinstance(obj, dict):
        return {k: comparable(v) for k, v in obj.items()
                if "seconds" not in k and k not in ("wall_s", "sync_seconds", "peak_rss_mib")}
    if isinstance(obj, list):
        return [comparable(v) for v in obj]
    if isinstance(obj, float):
        return float(f"{obj:.6g}") if math.isfinite(obj) else str(obj)
    return obj


def changed(a, b, path: str = "") -> list[str]:
    """The dotted keys where two metrics records differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [x for k in sorted(set(a) | set(b), key=str)
                for x in changed(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))]
    return [] if a == b else [f"{path}: {a} (undisturbed {b})"]


def fallbacks(run_dir: Path) -> list[dict]:
    """The archive's record of resumes that passed over a damaged checkpoint."""
    return (state(run_dir, "checkpoint_fallbacks") or {}).get("events", [])


def metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def episodes(run_dir: Path) -> list[tuple]:
    con = sqlite3.connect(run_dir / "archive.sqlite")
    try:
        return con.execute("SELECT iteration, env_id, arm, play_index FROM episodes").fetchall()
    finally:
        con.close()


def checkpoints_loadable(run_dir: Path) -> dict[str, str]:
    import torch
    from safetensors.torch import load_file

    out = {}
    for folder in sorted((run_dir / "checkpoints").glob("iter_*")):
        if "." in folder.name:  # iter_XXXX.damaged: passed over and kept for inspection
            continue
        try:
            load_file(str(folder / "trainable.safetensors"))
            torch.load(folder / "optimizer.pt", weights_only=True)
            torch.load(folder / "rng.pt", weights_only=True)
            out[folder.name] = "ok" if (folder / "learner.json").is_file() else "no learner.json"
        except Exception as e:  # noqa: BLE001 (reported)
            out[folder.name] = f"{type(e).__name__}: {str(e)[:120]}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--faults", default=",".join(DEFAULT_FAULTS),
                    help="Faults in the order they are injected (comma-separated).")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run-args", default=None, help="Replaces the default run's arguments.")
    ap.add_argument("--attempt-timeout", type=float, default=1800.0)
    ap.add_argument("--keep", type=Path, default=None, help="Keep both run folders here.")
    args = ap.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    unknown = sorted(set(faults) - set(KINDS))
    if unknown:
        raise SystemExit(f"unknown faults {unknown}; choose from {', '.join(KINDS)}")
    rng = random.Random(args.seed)
    base = args.keep or Path(tempfile.mkdtemp(prefix="soak-"))
    ref, run = base / "undisturbed", base / "disturbed"
    for d in (ref, run):
        shutil.rmtree(d, ignore_errors=True)
    start = time.monotonic()
    first = attempt(ref, args, False, [], random.Random(0))
    if first["rc"] != 0:
        raise SystemExit(f"the undisturbed run failed: {first}")
    ref_wall = first["wall_s"]
    # a limit above every file an attempt writes would let it finish with the faults left unfired
    args.limit_below = min(1 << 20, largest_checkpoint_file(ref) or 1 << 20)
    table: list[dict] = []
    backup = base / "optimizer.pt.backup"
    resume, left, dropped, fell_back_at = False, list(faults), [], None
    for _ in range(4 * len(faults) + 10):
        if left and left[0] == "truncated_checkpoint" and not has_checkpoint(run):
            # nothing to truncate yet (every start so far stopped before the first checkpoint):
            # the next other fault first, or a start stopped once the first checkpoint is written
            others = [i for i, f in enumerate(left) if f != "truncated_checkpoint"]
            if others:
                left.insert(0, left.pop(others[0]))
            else:
                table.append(attempt(run, args, resume, ["until_checkpoint"], rng))
                resume = resume or (run / "archive.sqlite").exists()
                continue
        truncated = {}
        if left and left[0] == "truncated_checkpoint":  # then the next start, with its faults
            left.pop(0)
            truncated, before, done_before = truncate_latest(run, backup), len(fallbacks(run)), \
                len(metrics(run))
        plan = [left.pop(0)] if left and left[0] != "truncated_checkpoint" else []
        while plan and plan[-1] == "kill_sandbox_child" and left and left[0] in KILLS:
            plan.append(left.pop(0))
        row = {**truncated, **attempt(run, args, resume, plan, rng)}
        if truncated:
            new = fallbacks(run)[before:]
            row["fell_back"] = bool(new) and all(
                Path(truncated["file"]).name in e["passed_over"][0] for e in new)
            if row["fell_back"] and fell_back_at is None:
                fell_back_at = done_before  # the first iteration the older learner may touch
            row["refused_clearly"] = not new and row["rc"] != 0 and \
                Path(truncated["file"]).name in (row["error"] or "")
            if not new and (run / truncated["file"]).exists():  # nothing earlier loaded: the
                shutil.copy2(backup, run / truncated["file"])  # user restores from a backup
        table.append(row)
        resume = resume or (run / "archive.sqlite").exists()
        done = [m["iteration"] for m in metrics(run)]
        if done == list(range(args.iterations)):  # finished: what is left cannot fire
            dropped += row.get("not_fired", []) + left
            left = []
        else:
            left = row.get("not_fired", []) + left  # a kill the run outran comes again
        if row["rc"] == 0 and done == list(range(args.iterations)) and not left:
            break
    ref_m, run_m = metrics(ref), metrics(run)
    con = sqlite3.connect(run / "archive.sqlite")
    integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    eps, ref_eps = episodes(run), episodes(ref)
    cut = len(run_m) if fell_back_at is None else fell_back_at
    same = [m["iteration"] for m, r in zip(run_m[:cut], ref_m) if comparable(m) == comparable(r)]
    differ = {m["iteration"]: changed(comparable(m), comparable(r))
              for m, r in zip(run_m[:cut], ref_m) if comparable(m) != comparable(r)}
    result = {
        "iterations": args.iterations, "seed": args.seed, "faults": faults,
        "undisturbed_wall_s": ref_wall, "wall_s": round(time.monotonic() - start, 1),
        "attempts": table,
        "injected": dict(Counter(
            [e["fault"] for r in table for e in r.get("fired", [])]
            + [f for r in table for f in r.get("faults", []) if f == "disk_full"]
            + [r["fault"] for r in table if r.get("fault") == "truncated_checkpoint"])),
        "outcomes": outcomes(table),
        "not_injected": dropped,
        "tracebacks": sum(r.get("tracebacks", 0) for r in table),
        "checks": {
            "iterations_once": [m["iteration"] for m in run_m] == list(range(args.iterations)),
            "integrity_check": integrity,
            "episodes_unique": len(eps) == len(set(eps)),
            "episodes": [len(eps), len(ref_eps)],
            "checkpoints": checkpoints_loadable(run),
            "iterations_equal_to_undisturbed": same,
            "iterations_differing": differ,
            "iterations_after_fallback": [m["iteration"] for m in run_m[cut:]],
            "damaged_kept": sorted(p.name for p in (run / "checkpoints").glob("*.damaged*")),
        },
    }
    print(json.dumps(result, indent=1))
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

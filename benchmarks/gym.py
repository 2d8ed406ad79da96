"""What a spadework.gym environment costs, and what preloading math_verify costs the sandbox.

Prints one JSON object (medians over ``--n`` repeats, all from the same run):

- ``make_own_ms``: ``spadework.gym.make("nim")`` with its own fork server (start the zygote,
  probe the layers, fork and load the first child), and ``close_own_ms`` to free it;
- ``make_shared_ms``: the same with ``sandbox=`` a running Sandbox (a fork and a load);
- ``reset_ms``: ``env.reset()`` (a fresh hardened child per episode, then the game's reset);
- ``step_us``: one ``env.step`` round trip (space checks included);
- ``zygote_rss_mib`` / ``zygote_rss_math_verify_mib``: resident memory of one fork server
  without and with ``Limits(math_verify=True)``; ``sandbox_start_ms`` / ``..._math_verify_ms``:
  starting one; children share the zygote's pages until they write them;
- ``import_math_verify_ms``: ``import math_verify`` in a fresh interpreter, less ``pass``;
- ``import_gymnasium_ms``: ``import gymnasium`` likewise.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/gym.py [--n 5]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def _median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 2)


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _import_ms(module: str, n: int) -> float:
    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    base = statistics.median(run("pass") for _ in range(n))
    full = statistics.median(run(f"import {module}") for _ in range(n))
    return round((full - base) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5)
    n = parser.parse_args().n

    import spadework.gym as sg
    from spadework.sandbox import Limits, Sandbox

    out: dict[str, float] = {}
    made = []
    out["make_own_ms"] = _median_ms(lambda: made.append(sg.make("nim")), n)
    closing = list(made)
    out["close_own_ms"] = _median_ms(lambda: closing.pop().close(), n)
    with Sandbox(Limits()) as sb:
        shared = []
        out["make_shared_ms"] = _median_ms(lambda: shared.append(sg.make("nim", sandbox=sb)), n)
        env = shared[0]
        env.reset(seed=0)
        out["reset_ms"] = _median_ms(lambda: env.reset(), 10 * n)
        env.reset(seed=0)
        steps = []
        for _ in range(40 * n):
            start = time.perf_counter()
            _, _, term, trunc, _ = env.step("\\boxed{1}")
            steps.append((time.perf_counter() - start) * 1e6)
            if term or trunc:
                env.reset()
        out["step_us"] = round(statistics.median(steps), 1)
        for e in shared:
            e.close()
        out["zygote_rss_mib"] = _rss_mib(sb.zygote_pid)
    for key, mv in (("sandbox_start_ms", False), ("sandbox_start_math_verify_ms", True)):
        boxes = []

        def start(mv=mv, boxes=boxes) -> None:
            sb = Sandbox(Limits(math_verify=mv))
            sb.start()
            boxes.append(sb)

        out[key] = _median_ms(start, n)
        if mv:
            out["zygote_rss_math_verify_mib"] = _rss_mib(boxes[0].zygote_pid)
        for sb in boxes:
            sb.close()
    out["import_math_verify_ms"] = _import_ms("math_verify", n)
    out["import_gymnasium_ms"] = _import_ms("gymnasium", n)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

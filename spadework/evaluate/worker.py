"""The judge worker: benchmark item generation and answer scoring, in a hardened child process.

Run as ``python -m spadework.evaluate.worker`` by :class:`spadework.evaluate.judge.Judge`, never
imported by the host for its work. Why a separate process: some reasoning-gym generators never
finish (``number_sequence`` item 121 of the hard config), and several reasoning-gym scorers call
``eval`` on the model's answer (``string_insertion``, ``spiral_matrix``, ``binary_matrix``,
``n_queens``) or sympy's ``parse_expr`` (which evaluates Python), as math-verify may. A model's
answer is untrusted text, so it is only ever scored here, after the worker has confined itself
with the sandbox's own layers (:mod:`spadework.sandbox.harden`): rlimits, no new privileges,
Landlock (read-only everywhere, no writes; failing that, the unprivileged uid when started as
root), capabilities emptied, and the seccomp filter (no exec, no sockets, no new processes or
threads). The host kills the worker at a request's deadline and starts a fresh one for the next
request.

Protocol: one JSON object per line on stdin, one reply per line on the original stdout (library
prints go to stderr, which the host sends to a log file). The first line the worker writes is
``{"hello": layers}``. Requests, each answered with ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``:

- ``{"op": "rg_item", "task": NAME, "kwargs": {...}, "index": I}`` -> ``question``, ``answer``
  (a string, or null when the task has no single oracle answer)
- ``{"op": "rg_score", "task": ..., "kwargs": ..., "index": ..., "answer": TEXT|null}`` ->
  ``reward`` (the task's own ``score_answer``)
- ``{"op": "math_verify", "gold": TEXT, "pred": TEXT}`` -> ``correct``
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from spadework.sandbox import harden

#: Address space of the worker: reasoning-gym, sympy and one dataset fit well inside it.
MEMORY_BYTES = 4 << 30
#: CPU seconds over the worker's life; past it the kernel kills it and the host starts another.
CPU_SECONDS = 3600


def _confine() -> list[list]:
    """Apply the sandbox's layers to this process; returns ``[[layer, active, reason], ...]``.

    The uid drop comes only when Landlock does not hold: the worker imports parts of the
    standard library lazily (generators do), and the interpreter may live where the
    unprivileged uid cannot read (``/root/.pyenv``). With Landlock, writes are refused
    everywhere anyway; without it, the unprivileged uid is what keeps files safe.
    """
    libc = harden.libc_handle()
    program, note = harden.build_seccomp()  # compiled before anything is confined
    layers: dict[str, tuple[bool, str]] = {}
    layers["rlimits"] = harden.apply_rlimits({"cpu_seconds": CPU_SECONDS, "file_bytes": 1 << 20,
                                              "memory_bytes": MEMORY_BYTES, "open_files": 64})
    layers["no_new_privs"] = harden.no_new_privs(libc)
    layers["landlock"] = harden.landlock(["/"], [], libc)
    if layers["landlock"][0]:
        layers["uid_drop"] = (False, "not needed: Landlock refuses every write")
    else:
        root = os.geteuid() == 0
        layers["uid_drop"] = harden.drop_uid(65534 if root else None, 65534 if root else None)
    harden.drop_capabilities(libc)
    harden.process_limits(os.getppid(), libc)
    layers["seccomp"] = harden.seccomp(program, note, libc)
    return [[name, *layers[name]] for name in layers]


def _seed_globals(name: str) -> None:
    """Seed the global ``random`` and numpy generators from ``name`` before a dataset or an item
    is built: some generators draw from them unseeded (reasoning-gym 0.1.25's ``codeio`` item 68
    printed a different example in each process), so that every worker builds the same items
    whatever it built before."""
    import random
    import zlib

    seed = zlib.crc32(name.encode())
    random.seed(seed)
    try:
        import numpy
    except ImportError:  # numpy comes with reasoning-gym; without it there is nothing to seed
        return
    numpy.random.seed(seed)


class _State:
    """Datasets built so far and the items drawn from them (one worker's life)."""

    def __init__(self) -> None:
        self.datasets: dict[str, Any] = {}
        self.entries: dict[tuple[str, int], dict] = {}

    def entry(self, task: str, kwargs: dict, index: int) -> dict:
        import reasoning_gym

        key = json.dumps([task, kwargs], sort_keys=True)
        if key not in self.datasets:
            _seed_globals(key)
            self.datasets[key] = reasoning_gym.create_dataset(task, **kwargs)
        if (key, index) not in self.entries:
            _seed_globals(f"{key}:{index}")
            self.entries[(key, index)] = self.datasets[key][index]
        return self.entries[(key, index)]

    def dataset(self, task: str, kwargs: dict) -> Any:
        return self.datasets[json.dumps([task, kwargs], sort_keys=True)]


def _math_verify(gold: str, pred: str) -> bool:
    """math-verify on both answers boxed; failing a parse, exact integer or string equality."""
    from math_verify import parse, verify

    try:
        return bool(verify(parse(f"\\boxed{{{gold}}}"), parse(f"\\boxed{{{pred}}}")))
    except Exception:  # noqa: BLE001 - math-verify raises many types; the fallback decides
        pass
    try:
        return int(gold.strip()) == int(pred.strip())
    except ValueError:
        return gold.strip() == pred.strip()


def handle(state: _State, req: dict) -> dict:
    """Answer one request (see the module docstring)."""
    op = req.get("op")
    if op == "rg_item":
        e = state.entry(req["task"], req["kwargs"], int(req["index"]))
        answer = e.get("answer")
        return {"ok": True, "question": str(e["question"]),
                "answer": None if answer is None else str(answer)}
    if op == "rg_score":
        e = state.entry(req["task"], req["kwargs"], int(req["index"]))
        ds = state.dataset(req["task"], req["kwargs"])
        reward = ds.score_answer(answer=req.get("answer"), entry=e)
        return {"ok": True, "reward": float(reward)}
    if op == "math_verify":
        return {"ok": True, "correct": _math_verify(str(req["gold"]), str(req["pred"]))}
    if op == "ping":
        return {"ok": True}
    return {"ok": False, "error": f"unknown op {op!r}"}


def main() -> None:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # anything a library prints lands in the log, never in the protocol
    sys.stdout = sys.stderr
    import warnings

    warnings.simplefilter("ignore")
    import math_verify  # noqa: F401 - imported before confinement, like the sandbox's preload
    import reasoning_gym  # noqa: F401
    import sympy  # noqa: F401

    out.write(json.dumps({"hello": _confine()}) + "\n")
    state = _State()
    for line in sys.stdin:
        try:
            reply = handle(state, json.loads(line))
        except Exception as e:  # noqa: BLE001 - a benchmark's own failure is data for the host
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        out.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()

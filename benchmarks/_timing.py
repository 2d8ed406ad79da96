"""Timing and engine settings shared by the benchmarks (run as scripts, so this folder is on
sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def flash_attn_settings(value: str) -> list[str]:
    """The ``--flash-attn`` argument (``on``, ``off`` or both, comma-separated, measured in that
    order) as a list; exits with a one-line message on anything else."""
    settings = value.split(",")
    if not settings or any(f not in ("on", "off") for f in settings):
        raise SystemExit(f"--flash-attn: each setting is on or off, got {value!r}")
    return settings


@contextmanager
def engine_steps(engine: Any) -> Iterator[list[tuple[int, int, float]]]:
    """Time each ``llama_decode`` step of a ``LlamaCppPolicy`` while the block runs: yields a list
    that gets (tokens fed, rows whose logits are read, seconds) per step. A step that feeds more
    tokens than it samples prefills a prompt; the others only decode."""
    steps: list[tuple[int, int, float]] = []
    submit = engine._submit

    def timed(batch: Any, entries: list) -> None:
        start = time.perf_counter()
        submit(batch, entries)
        steps.append((len(entries), sum(1 for e in entries if e[3]), time.perf_counter() - start))

    engine._submit = timed
    try:
        yield steps
    finally:
        engine._submit = submit


def forward_passes(entries: list, n_ubatch: int) -> list[tuple[int, int]]:
    """The forward passes llama.cpp runs for one ``llama_decode`` of ``entries`` (token,
    position, sequence, wants logits; ordered by sequence) when every sequence has its own KV
    stream: its rule (``split_equal`` with sequential ids) takes a run of consecutive sequence
    ids that still have tokens, the same number of tokens from each (as many as the shortest
    has, up to ``n_ubatch`` tokens in all), and repeats. Returns (sequences, tokens each) per
    pass. A count of the rule, for the benchmarks' fits; llama.cpp is not asked.

    >>> forward_passes([(1, 0, 2, 0), (1, 1, 2, 0), (1, 0, 3, 0), (1, 0, 5, 0)], 512)
    [(2, 1), (1, 1), (1, 1)]
    """
    left: dict[int, int] = {}
    for e in entries:
        left[e[2]] = left.get(e[2], 0) + 1
    order = sorted(left)
    out = []
    while True:
        run: list[int] = []
        for q in order:
            if left[q] and (not run or q == run[-1] + 1):
                run.append(q)
        if not run:
            return out
        k = 0
        while all(left[q] for q in run):
            for q in run:
                left[q] -= 1
            k += 1
            if (k + 1) * len(run) > n_ubatch:
                break
        out.append((len(run), k))


@contextmanager
def step_work(engine: Any) -> Iterator[list[dict[str, int]]]:
    """Per ``llama_decode`` step of a ``LlamaCppPolicy`` while the block runs, what it computes:
    its forward passes (:func:`forward_passes`), the sum of its tokens' positions (attention
    reads that many cached keys), and its prompt tokens that repeat, from position 0, a text
    already computed in the block (by an earlier step or another sequence of this one, evicted
    since or not: what sharing cached prefixes more could still save). Entered inside
    :func:`engine_steps`, its bookkeeping stays out of that one's timing."""
    work: list[dict[str, int]] = []
    submit = engine._submit
    seen: set[int] = set()  # the hash of every prefix computed so far
    chains: dict[int, list[int]] = {}  # sequence -> hashes of its cached text's prefixes

    def counted(batch: Any, entries: list) -> None:
        submit(batch, entries)
        by_seq: dict[int, list[tuple[int, int]]] = {}
        for tok, pos, seq, _ in entries:
            by_seq.setdefault(seq, []).append((pos, tok))
        repeated = 0
        for seq, toks in by_seq.items():
            chain = chains.setdefault(seq, [])
            del chain[toks[0][0]:]
            prompt = len(toks) > 1 or toks[0][0] == 0
            for _, tok in toks:
                h = hash((chain[-1] if chain else 0, tok))
                repeated += prompt and h in seen
                chain.append(h)
                seen.add(h)
        work.append({"passes": len(forward_passes(entries, engine._ll.llama_n_ubatch(engine._ctx))),
                     "positions": sum(e[1] for e in entries), "repeated": repeated})

    engine._submit = counted
    try:
        yield work
    finally:
        engine._submit = submit


def timed_stream(inner: Any, requests: Any, params: Any, on_done: Callable[[Any, Any], Any],
                 record: Callable[[float], None], seen: Callable[[Any, Any], None] | None = None,
                 **kwargs: Any) -> None:
    """Run ``inner.stream(requests, params, on_done)`` and ``record`` its seconds less those spent
    in ``on_done`` (the caller's own work between results: checking a design, scoring a move),
    so that the figure is the engine's alone; recorded even when the stream raises. ``seen``,
    when given, is called on each result before ``on_done``, inside the engine's time."""
    outside, start = 0.0, time.monotonic()

    def timed(request: Any, result: Any) -> Any:
        nonlocal outside
        if seen is not None:
            seen(request, result)
        t = time.monotonic()
        try:
            return on_done(request, result)
        finally:
            outside += time.monotonic() - t

    try:
        inner.stream(requests, params, timed, **kwargs)
    finally:
        record(time.monotonic() - start - outside)

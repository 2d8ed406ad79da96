"""Designer validity: the share of design attempts the checker accepts, with its confidence interval.

Runs ``--n`` design slots (one fresh attempt per slot, plus ``--repair-turns`` inference-only
repairs of a rejected one) through the project's own designer (:func:`spadework.designer.
design_environments`, what ``spadework design`` calls) with a given model, into a temporary
archive that holds the checked starter library as a run's iteration 0 does (so novelty is judged
against it, and the memory is what a fresh run shows). Slot ``i`` exercises skill ``i mod 6`` and
is grounded in document ``i`` of a fixed list drawn from the default corpus: ``--docs tune`` (the
set the designer was improved on) or ``--docs heldout`` (a disjoint set it was never looked at
on). Both lists are prefixes of two halves of one seeded permutation of the corpus, so they are
disjoint for every ``--n`` and the same on every machine. Sampling seeds derive from ``--seed``.

Prints one JSON object: the share of slots accepted with its 95% Wilson interval, the share
accepted at the first attempt, rejection counts per stage (the reply screen split into replies
cut at ``max_tokens`` and other unusable replies, then the checker's stages) for first attempts,
for every attempt and for each slot's final attempt, a few of each stage's reasons, output
tokens and seconds per attempt (generation and checking apart), each accepted design's
similarity to the example module the prompt showed, the settings and the model's sha256.
Progress lines go to stderr every ``--progress-every`` seconds.

The figure is a share, not a time, so no baseline runs beside it: a change to the designer is
judged by two runs of this script on the same ``--docs`` and ``--seed``, whose intervals say
whether the difference is more than chance (the same seeds make the two runs paired).

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/designer_validity.py
       --model qwen2.5-coder-0.5b-instruct [--docs tune|heldout] [--n 40] [--backend llamacpp]
       [--max-tokens 1024] [--repair-turns 0] [--mutation-ratio 0] [--parents DIR]
       [--rejections K (the checker's verdicts on the last K attempts, shown from the second
        call on; DesignConfig.rejections, default 8; 0 makes every call's prompts independent)]
       [--temperature 0.6] [--max-turns 4] [--seed 0]
       [--weights bf16|f16|q8_0|gguf] [--plan] [--examples K | --no-example]
       [--batch 8] [--archive-dir DIR (keep the archive, to read the replies)]
       [--start-slot K (continue a killed run in --archive-dir)]
       [--reuse DIR (an earlier run's --archive-dir: its first attempts are read back, so a
        --repair-turns 1 run beside a --repair-turns 0 one samples the repairs only)]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spadework.metrics import wilson  # noqa: E402  (the one Wilson interval; benchmarks import it)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import timed_stream  # noqa: E402  (this folder's helpers)

#: The two document sets: alternate positions of one seeded permutation of the corpus.
DOC_SETS = ("tune", "heldout")
#: The reply screen's outcome split by why: a reply cut at max_tokens is the commonest failure of
#: small models and says "shorter module or more tokens", the rest (empty, binary) something else.
CUT = "cut_at_max_tokens"
#: The same for a reply stopped in a loop (``DesignConfig.stop_at_repeat``), before max_tokens.
LOOP = "stopped_in_a_loop"


def choose_documents(documents: Sequence[Any], which: str, n: int, seed: int = 0) -> list[Any]:
    """The first ``n`` documents of set ``which`` ("tune": even positions of a permutation of
    ``documents`` seeded by ``seed``, "heldout": odd ones), so the sets never overlap.

    >>> docs = list(range(10))
    >>> tune, held = choose_documents(docs, "tune", 5), choose_documents(docs, "heldout", 5)
    >>> sorted(tune + held) == docs, choose_documents(docs, "tune", 3) == tune[:3]
    (True, True)
    """
    from spadework.seeding import derive_rng

    if which not in DOC_SETS:
        raise ValueError(f"--docs must be one of {DOC_SETS}, got {which!r}")
    order = sorted(range(len(documents)), key=lambda i: getattr(documents[i], "doc_id", i))
    derive_rng("benchmarks.designer_validity", seed).shuffle(order)
    picked = order[DOC_SETS.index(which)::2][:n]
    if len(picked) < n:
        raise ValueError(f"the corpus has {len(documents)} documents: too few for {n} per set")
    return [documents[i] for i in picked]


class FixedDocuments:
    """A corpus whose ``sample`` gives document ``offset + slot`` of a list (every attempt and
    repair of a slot sees its own document; ``iteration`` is the batch, see :func:`measure`)."""

    def __init__(self, documents: Sequence[Any], per_call: int) -> None:
        self.documents, self.per_call = list(documents), per_call

    def __len__(self) -> int:
        return len(self.documents)

    def sample(self, seed: int, iteration: int, slot: int, attempt: int) -> Any:
        return self.documents[iteration * self.per_call + slot]


class TimedPolicy:
    """Delegates to a policy and adds up the wall time of its ``chat`` calls, and of its
    ``stream`` less the time inside ``on_done`` (where the designer checks each reply), so
    generation and checking stay apart when the designer streams."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seconds = inner, 0.0

    def __getattr__(self, name: str) -> Any:
        if name == "stream" and callable(getattr(self.inner, "stream", None)):
            return self._stream
        return getattr(self.inner, name)

    def _stream(self, requests: Any, params: Any, on_done: Any, **kwargs: Any) -> None:
        def record(seconds: float) -> None:
            self.seconds += seconds
        timed_stream(self.inner, requests, params, on_done, record, **kwargs)

    @property
    def context_length(self) -> int:
        return self.inner.context_length

    def chat(self, conversations: Any, params: Any) -> Any:
        t = time.monotonic()
        try:
            return self.inner.chat(conversations, params)
        finally:
            self.seconds += time.monotonic() - t


class ReusedPolicy:
    """Delegates to a streaming policy, except for a request whose prompt is one an earlier
    measurement's archive holds a first attempt for: that attempt's stored reply (text, ids,
    logprobs, finish reason) is handed back at once, unsampled. With the same documents, seed
    and settings the prompts of the first attempts are the earlier run's, so a measurement with
    ``--repair-turns 1`` pays for its repairs only and its first attempts are the earlier ones
    exactly (judged again by the current checker). ``reused`` counts the replies read back."""

    def __init__(self, inner: Any, archive_dir: Path) -> None:
        import sqlite3

        from spadework.archive import archive_path
        from spadework.archive.records import unpack_floats, unpack_ints
        from spadework.policy.base import Completion

        if not callable(getattr(inner, "stream", None)):
            raise ValueError("--reuse needs a backend that streams (llamacpp)")
        db = archive_path(archive_dir)
        if not db.is_file():
            raise ValueError(f"--reuse {archive_dir}: no archive there ({db} is missing)")
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT prompt_ids, output_ids, logprobs, reply, finish_reason "
                               "FROM attempts WHERE attempt = 0").fetchall()
        finally:
            con.close()
        self.stored = {unpack_ints(p): Completion(text, unpack_ints(p), unpack_ints(o),
                                                  unpack_floats(lp), fin,
                                                  metadata={"seconds": 0.0, "reused": True})
                       for p, o, lp, text, fin in rows}
        self.inner, self.reused = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def context_length(self) -> int:
        return self.inner.context_length

    def chat(self, conversations: Any, params: Any) -> Any:
        raise ValueError("--reuse replays streamed requests only; the designer streams with "
                         "llamacpp (DesignConfig.continuous)")

    def _resolve(self, requests: Any, on_done: Any) -> list[Any]:
        """The requests left to sample once every stored one (and what it led to) is answered."""
        from collections import deque

        left, todo = [], deque(requests)
        while todo:
            q = todo.popleft()
            hit = self.stored.get(tuple(q.prompt_ids))
            if hit is None:
                left.append(q)
            else:
                self.reused += 1
                todo.extend(on_done(q, hit))
        return left

    def stream(self, requests: Any, params: Any, on_done: Any, **kwargs: Any) -> None:
        left = self._resolve(requests, on_done)
        if left:
            self.inner.stream(left, params,
                              lambda q, r: self._resolve(on_done(q, r), on_done), **kwargs)


def stage_of(attempt: Any) -> str:
    """An attempt's outcome, with the reply screen's cut and looping replies named apart
    (:data:`CUT`, :data:`LOOP`)."""
    if attempt.outcome == "reply" and attempt.finish_reason in ("length", "repeat"):
        return CUT if attempt.finish_reason == "length" else LOOP
    return attempt.outcome


def tally(results: Sequence[Any], reasons_per_stage: int = 3) -> dict:
    """The counts of a list of :class:`spadework.designer.DesignResult` (one per slot).

    ``first``: each slot's first attempt; ``all``: every attempt, repairs included; ``final``:
    each slot's last attempt (its verdict). Reasons are the first distinct ones per stage, cut
    to 300 characters.
    """
    first = Counter(stage_of(r.attempts[0]) for r in results if r.attempts)
    every = Counter(stage_of(a) for r in results for a in r.attempts)
    final = Counter(stage_of(r.attempts[-1]) for r in results if r.attempts)
    reasons: dict[str, list[str]] = {}
    for r in results:
        for a in r.attempts:
            seen = reasons.setdefault(stage_of(a), [])
            why = a.reason[:300]
            if a.outcome != "accepted" and why not in seen and len(seen) < reasons_per_stage:
                seen.append(why)
    n = len(results)
    accepted = sum(r.env is not None for r in results)
    lo, hi = wilson(accepted, n)
    attempts = sum(len(r.attempts) for r in results)
    return {
        "slots": n, "attempts": attempts, "accepted": accepted,
        "accepted_share": round(accepted / n, 4) if n else None,
        "accepted_ci95": [round(lo, 4), round(hi, 4)],
        "accepted_first_attempt": first.get("accepted", 0),
        "accepted_by_repair": accepted - first.get("accepted", 0),
        "stages_first_attempt": dict(sorted(first.items())),
        "stages_all_attempts": dict(sorted(every.items())),
        "stages_final": dict(sorted(final.items())),
        "reasons": {k: v for k, v in sorted(reasons.items()) if v},
        "output_tokens": sum(len(a.output_ids) for r in results for a in r.attempts),
        "output_tokens_per_attempt": round(sum(len(a.output_ids) for r in results for a in r.attempts)
                                           / max(attempts, 1), 1),
    }


def example_similarity(results: Sequence[Any], setting: str, k: int = 1) -> list[float]:
    """For each accepted environment, its similarity (the novelty stage's Jaccard index) to the
    example modules a prompt may show (the closest one): how far an accepted design moved from
    the examples (the novelty stage rejects 0.8 and above)."""
    from spadework.designer.examples import prompt_examples
    from spadework.env.novelty import NoveltyIndex

    index = NoveltyIndex(prompt_examples(setting, k))
    if not len(index):
        return []
    return [round(index.most_similar(r.env.code).similarity, 3) for r in results if r.env is not None]


def archived_results(archive: Any, calls: int) -> list[Any]:
    """The :class:`spadework.designer.DesignResult` of each slot of the first ``calls`` design
    calls of an earlier, killed measurement in ``archive`` (call ``k`` is iteration ``k``), as
    :func:`measure` would have returned them; a call killed during its repairs has its first
    attempts only."""
    from spadework.archive.records import ACCEPTED
    from spadework.designer import DesignResult
    from spadework.types import EnvSource

    results = []
    for k in range(calls):
        by_slot: dict[int, list[Any]] = {}
        for a in archive.attempts(k):
            by_slot.setdefault(a.slot, []).append(a)
        for slot, attempts in sorted(by_slot.items()):
            won = next((a for a in attempts if a.outcome == ACCEPTED), None)
            env = None
            if won is not None:
                rec = archive.get_env(won.env_id)
                env = EnvSource(rec.code, rec.class_name or "", rec.setting, rec.skill)
            results.append(DesignResult(slot, attempts[0].skill, env, tuple(attempts)))
    return results


def extra_sources(folder: Path | None) -> list[Any]:
    """The environment modules in ``folder`` (written like the starter library's files: an
    ``ENV_CLASS``, ``SETTING`` and ``SKILL`` each), as sources; none for None."""
    from spadework.library import parse_source

    if folder is None:
        return []
    files = sorted(Path(folder).glob("*.py"))
    if not files:
        raise ValueError(f"{folder} holds no environment modules (*.py)")
    return [parse_source(f.read_text(encoding="utf-8"), f.stem) for f in files]


def measure(policy: Any, documents: Sequence[Any], *, cfg: Any, max_turns: int, seed: int,
            batch: int, archive_dir: Path, progress: Callable[[dict], None] | None = None,
            start_slot: int = 0, parents: Sequence[Any] = ()) -> dict:
    """Design one slot per document through :func:`spadework.designer.design_environments` into
    the archive in ``archive_dir`` (created, holding the checked starters), ``batch`` slots per
    call (call ``k`` is iteration ``k``, so sampling seeds differ per call), and return
    :func:`tally`'s counts plus seconds. Slot ``i`` of the whole run exercises skill ``i mod 6``
    and document ``i``. ``progress(state)`` is called after each call with the running counts.
    ``parents``: more environment sources, checked and archived beside the starters (so that
    short ones can be shown as memory or mutated: the starters are longer than a design's
    ``example_chars``).

    ``start_slot`` (a multiple of ``batch``) continues a killed measurement in the same
    ``archive_dir``: the slots before it are read back (:func:`archived_results`), the rest are
    designed with the seeds the whole run would have used; seconds and the per-attempt figures
    count the new calls only (``attempts_timed``)."""
    if start_slot % batch:
        raise ValueError(f"start_slot {start_slot} must be a multiple of the batch ({batch})")
    from spadework.archive import Archive, archive_path
    from spadework.designer import design_environments
    from spadework.env.checker import CheckConfig
    from spadework.library import check_sources, checked_starters
    from spadework.sandbox import Limits, Sandbox
    from spadework.skills import skills_for

    check = CheckConfig(max_turns=max_turns)
    skills = skills_for(cfg.setting)
    corpus = FixedDocuments(documents, batch)
    timed = TimedPolicy(policy)
    archive_dir.mkdir(parents=True, exist_ok=True)
    with Archive.open(archive_path(archive_dir)) as archive, Sandbox(Limits()) as sb:
        archive.import_starter(checked_starters(sb, check))
        extra = check_sources(parents, sb, check)
        rejected = [f"{r.name}: {r.reason}" for r in extra if r.status != "accepted"]
        if rejected:
            raise ValueError("--parents modules the checker rejects: " + "; ".join(rejected))
        archive.import_starter(extra)
        results: list[Any] = archived_results(archive, start_slot // batch)
        earlier = sum(len(r.attempts) for r in results)
        earlier_tokens = sum(len(a.output_ids) for r in results for a in r.attempts)
        if len(results) != start_slot:
            raise ValueError(f"{archive_dir} holds {len(results)} slots, not the {start_slot} "
                             "before --start-slot")
        start = time.monotonic()
        if progress is not None:
            progress({"slots_done": len(results), "slots": len(documents),
                      "accepted": sum(r.env is not None for r in results), "seconds": 0.0})
        for k in range(start_slot // batch, math.ceil(len(documents) / batch)):
            first = k * batch
            n = min(batch, len(documents) - first)
            rotated = [skills[(first + i) % len(skills)] for i in range(len(skills))]
            results += design_environments(timed, sb, archive, corpus, n=n, iteration=k,
                                           run_seed=seed, skills=rotated, cfg=cfg,
                                           check_config=check)
            if progress is not None:
                progress({"slots_done": len(results), "slots": len(documents),
                          "accepted": sum(r.env is not None for r in results),
                          "seconds": time.monotonic() - start})
        seconds = time.monotonic() - start
    counts = tally(results)
    counts["accepted_similarity_to_example"] = example_similarity(results, cfg.setting, cfg.examples)
    attempts = max(counts["attempts"] - earlier, 1)  # the ones this process made and timed
    new_tokens = counts["output_tokens"] - earlier_tokens
    counts.update({
        "attempts_timed": counts["attempts"] - earlier,
        "seconds": round(seconds, 1), "generation_seconds": round(timed.seconds, 1),
        "seconds_per_attempt": round(seconds / attempts, 2),
        "generation_seconds_per_attempt": round(timed.seconds / attempts, 2),
        "check_seconds_per_attempt": round((seconds - timed.seconds) / attempts, 2),
        "output_tokens_per_generation_second": round(new_tokens / max(timed.seconds, 1e-9), 1),
        "slot_skills": [r.skill for r in results],
        "slot_outcomes": [[stage_of(a) for a in r.attempts] for r in results],
    })
    return counts


def _load_policy(args: argparse.Namespace) -> Any:
    if args.policy:  # tests: MODULE:FACTORY returning a Policy (with tests/ on PYTHONPATH)
        module, factory = args.policy.split(":")
        return getattr(importlib.import_module(module), factory)()
    from spadework.policy.load import load_policy

    return load_policy(args.backend, args.model, max_batch_size=args.batch, threads=args.threads,
                       weights=args.weights)


def _model_sha(model: str | None) -> str | None:
    from spadework.policy.registry import DEFAULT_MODEL, known_models

    spec = known_models().get(model or DEFAULT_MODEL)
    return spec.sha256 if spec is not None else None


class _Heartbeat:
    """A line to stderr every ``every`` seconds while a measurement runs (a design call can take
    minutes; the state is refreshed after each call)."""

    def __init__(self, every: float) -> None:
        self.every, self.state, self.t0 = every, {}, time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def update(self, state: dict) -> None:
        self.state = state
        self._print()

    def _print(self) -> None:
        s = self.state
        done = f"{s['slots_done']}/{s['slots']} slots, {s['accepted']} accepted" if s else "loading"
        print(f"[designer_validity] {time.monotonic() - self.t0:7.0f} s  {done}", file=sys.stderr,
              flush=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            self._print()

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


def main(argv: Sequence[str] | None = None) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="registry name (default: the default model)")
    ap.add_argument("--backend", default="llamacpp", help="llamacpp (default) or hf")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: its own)")
    ap.add_argument("--weights", default="bf16",
                    help="llama.cpp weights: bf16 (default), f16, q8_0, or gguf (the registry's "
                         "quantised file, what a run's frozen designer samples from)")
    ap.add_argument("--plan", action="store_true",
                    help="ask each fresh design for its game in three lines first "
                         "(DesignConfig.plan)")
    ap.add_argument("--examples", type=int, default=None,
                    help="example modules a fresh design is shown (DesignConfig.examples; default 1)")
    ap.add_argument("--no-example", action="store_true",
                    help="show fresh designs no example module (DesignConfig.examples = 0)")
    ap.add_argument("--docs", default="tune", choices=DOC_SETS)
    ap.add_argument("--n", type=int, default=40, help="design slots (one fresh attempt each)")
    ap.add_argument("--batch", type=int, default=8, help="slots per design call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--setting", default="games")
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--repair-turns", type=int, default=None)
    ap.add_argument("--rejections", type=int, default=None,
                    help="latest attempts whose rejections a later call's prompts are shown "
                         "(DesignConfig.rejections; 0: none)")
    ap.add_argument("--temperature", type=float, default=None)
    ap.add_argument("--corpus-words", type=int, default=None)
    ap.add_argument("--parents", type=Path, default=None,
                    help="a folder of short environment modules archived beside the starters")
    ap.add_argument("--mutation-ratio", type=float, default=None,
                    help="share of slots that edit an archived environment (the starters)")
    ap.add_argument("--max-turns", type=int, default=None,
                    help="the turn limit designs are checked under (default: the cpu preset's)")
    ap.add_argument("--archive-dir", type=Path, default=None, help="keep the archive here")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="an earlier measurement's --archive-dir (same --docs, --n, --seed and "
                         "settings): its first attempts are read back instead of sampled")
    ap.add_argument("--start-slot", type=int, default=0,
                    help="continue a killed run in --archive-dir from this slot (a multiple of --batch)")
    ap.add_argument("--progress-every", type=float, default=10.0)
    ap.add_argument("--policy", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.n < 1 or args.batch < 1:
        ap.error("--n and --batch must be at least 1")

    import dataclasses

    import torch

    torch.set_num_threads(1)
    from spadework.config import preset
    from spadework.default_corpus import load_default_corpus
    from spadework.designer import DesignConfig

    overrides = {"max_tokens": args.max_tokens, "repair_turns": args.repair_turns,
                 "temperature": args.temperature, "corpus_words": args.corpus_words,
                 "mutation_ratio": args.mutation_ratio, "rejections": args.rejections,
                 "plan": args.plan or None,
                 "examples": 0 if args.no_example else args.examples}
    cfg = DesignConfig(setting=args.setting, attempts_per_slot=1,
                       **{k: v for k, v in overrides.items() if v is not None})
    max_turns = args.max_turns or preset("cpu").play.max_turns
    documents = choose_documents(load_default_corpus().documents, args.docs, args.n, args.seed)
    t = time.monotonic()
    policy = _load_policy(args)
    if args.reuse is not None:
        policy = ReusedPolicy(policy, args.reuse)
    load_s = time.monotonic() - t
    with tempfile.TemporaryDirectory() as tmp, _Heartbeat(args.progress_every) as beat:
        counts = measure(policy, documents, cfg=cfg, max_turns=max_turns, seed=args.seed,
                         batch=args.batch, archive_dir=args.archive_dir or Path(tmp),
                         progress=beat.update, start_slot=args.start_slot,
                         parents=extra_sources(args.parents))
    print(json.dumps({
        "benchmark": "designer_validity", "docs": args.docs,
        "doc_ids": [d.doc_id for d in documents],
        "model": args.model or "default", "model_sha256": _model_sha(args.model),
        "backend": "scripted" if args.policy else args.backend, "weights": args.weights,
        "load_seconds": round(load_s, 1),
        "settings": {**dataclasses.asdict(cfg), "max_turns": max_turns, "seed": args.seed,
                     "batch": args.batch, "start_slot": args.start_slot,
                     "parents": str(args.parents) if args.parents else None},
        "reused_first_attempts": getattr(policy, "reused", 0),
        "reused_from": str(args.reuse) if args.reuse else None,
        **counts, "load_average": os.getloadavg(),
    }, indent=1))


if __name__ == "__main__":
    main()

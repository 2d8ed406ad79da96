"""Where an iteration's time goes: generation, learning and weight sync, per backend.

Runs iteration 0 of a preset (by default ``cpu`` with training: design, pool, hints, play both
arms, rewards, a learner step, the weight sync, store) with the real default model on CPU, in a
fresh run directory, once per backend (by default ``hf`` then ``llamacpp``: before and after the
fast engine, in the same process and the same conditions), and prints one JSON object: per
backend and stage its wall seconds and the seconds spent inside ``Policy.chat``, and for the
iteration the shares spent in generation, in learning (the train stage less the sync) and in
weight sync. The ratios are measured within one run; absolute times depend on the machine's
load, the shares and the backend-to-backend ratio much less.

Per stage it also reports what the engines did: chat calls and rows, prompt tokens asked for,
and for llama.cpp the prompt tokens computed (``prefilled``) and served from cached prefixes
(``reused``), decode steps and ``occupancy`` (mean rows sampled per decode step, out of
``policy_batch``); the stage's peak resident memory (sampled every 0.2 s) and the learner's
tokens per second (trained tokens, and every token run forward and back). ``--engine-peak``
adds each engine model's own throughput at the same batch and threads (``benchmarks/
generation.py``'s measurement, in a subprocess), so that in-loop generation is a ratio of it:
``share_of_engine_peak`` divides a stage's output tokens per second by the engine's decode rate
at full batch, and ``share_of_engine_work_rate`` divides the time the engine would take for the
stage's work at its own rates (prompt tokens computed at its prefill rate, tokens sampled at
its decode rate) by the time the stage's generation took.
``--set NAME=VALUE`` overrides the preset (``threads=2``, ``learner.head_chunk=0``).
``--save-batch FILE`` writes the samples each learner step was given (JSON lines, one sample a
line), which ``benchmarks/learner.py --batch FILE`` replays: the learner's settings compared on
the iteration's own work.

The mechanism preset (a 1.5B designer, a 0.5B agent trained with LoRA)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/iteration.py --preset cpu-qwen \
        --backend llamacpp --engine-peak

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/iteration.py
       [--preset cpu] [--backend hf,llamacpp] [--no-train] [--seed 0] [--engine-peak]
       [--set NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _memory import peak_rss_mib, rss_mib  # noqa: E402  (this folder is on sys.path as a script)
from _timing import timed_stream  # noqa: E402

from spadework.policy.llamacpp import LlamaCppPolicy  # noqa: E402

ENGINE_COUNTERS = LlamaCppPolicy.COUNTERS


class Clock:
    """The stage now running, and per stage the wall time, tokens and engine counters of chat
    calls and the peak resident memory (a thread samples it)."""

    def __init__(self) -> None:
        from collections import Counter

        self.stage = "setup"
        self.seconds: dict[str, float] = {}
        self.tokens: dict[str, int] = {}
        self.counts: dict[str, Counter] = {}
        self.peak_mib: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.peak_mib[self.stage] = max(self.peak_mib.get(self.stage, 0.0), rss_mib())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class TimedPolicy:
    """Delegates to a policy and adds its ``chat`` calls' wall time to ``clock``, by stage."""

    def __init__(self, inner, clock: Clock) -> None:
        self.inner = inner
        self.clock = clock

    def __getattr__(self, name):
        if name == "stream" and callable(getattr(self.inner, "stream", None)):
            return self._stream  # timed like chat, where the policy streams
        return getattr(self.inner, name)

    def _stream(self, requests, params, on_done, **kwargs):
        """The stream's wall time less the time inside ``on_done`` (environment steps and design
        checks, which chat calls leave outside), its replies counted as chat counts rows."""
        from collections import Counter

        c = self.clock
        before = {k: getattr(self.inner, k, 0) for k in ENGINE_COUNTERS}
        counts = c.counts.setdefault(c.stage, Counter())

        def seen(request, result):
            if hasattr(result, "output_ids"):
                c.tokens[c.stage] = c.tokens.get(c.stage, 0) + len(result.output_ids)
                counts.update(rows=1, prompt_tokens=len(result.prompt_ids))

        def record(seconds):
            c.seconds[c.stage] = c.seconds.get(c.stage, 0.0) + seconds
        try:
            timed_stream(self.inner, requests, params, on_done, record, seen, **kwargs)
        finally:
            counts.update(calls=1, **{k: getattr(self.inner, k, 0) - before[k] for k in ENGINE_COUNTERS})

    @property
    def context_length(self) -> int:
        return self.inner.context_length

    def chat(self, conversations, params):
        from collections import Counter

        c, t = self.clock, time.monotonic()
        before = {k: getattr(self.inner, k, 0) for k in ENGINE_COUNTERS}
        try:
            out = self.inner.chat(conversations, params)
        finally:
            c.seconds[c.stage] = c.seconds.get(c.stage, 0.0) + time.monotonic() - t
        c.tokens[c.stage] = c.tokens.get(c.stage, 0) + sum(len(x.output_ids) for x in out)
        counts = c.counts.setdefault(c.stage, Counter())
        counts.update(calls=1, rows=len(out), prompt_tokens=sum(len(x.prompt_ids) for x in out),
                      **{k: getattr(self.inner, k, 0) - before[k] for k in ENGINE_COUNTERS})
        return out


def engine_figures(counts) -> dict:
    """A stage's chat figures: calls, rows, prompt tokens and, from llama.cpp, what was computed."""
    out = {k: int(counts.get(k, 0)) for k in ("calls", "rows", "prompt_tokens", *ENGINE_COUNTERS)}
    if out["decode_steps"]:
        out["occupancy"] = round(out["sampled_rows"] / out["decode_steps"], 2)
    return out


def save_batches(models, path: str) -> None:
    """Write the samples of every learner step of ``models`` to ``path`` as JSON lines."""
    from spadework.train.batch import sample_to_dict

    for learner in {id(x): x for x in (models.learner, models.designer_learner) if x is not None}.values():
        step = learner.step

        def saving(samples, progress=None, _step=step):
            with open(path, "a") as f:
                for s in samples:
                    f.write(json.dumps(sample_to_dict(s)) + "\n")
            return _step(samples, progress=progress)

        learner.step = saving


def one_iteration(cfg, backend: str, train: bool, save_batch: str | None = None) -> dict:
    """Iteration 0 of ``cfg`` with ``backend`` in a fresh run directory: stage walls and shares."""
    import dataclasses

    from spadework.commands import load_roles
    from spadework.loop import run

    cfg = dataclasses.replace(cfg, backend=backend, train=train)
    t_load = time.monotonic()
    models, clock = load_roles(cfg), Clock()  # each role's model, and a learner per trained one
    models = dataclasses.replace(
        models, policy=TimedPolicy(models.policy, clock),
        designer=None if models.designer is None else TimedPolicy(models.designer, clock))
    load_s = time.monotonic() - t_load
    if save_batch:
        save_batches(models, save_batch)
    marks: list[tuple[str, float]] = []

    class Marks:  # a spadework.progress.Progress that notes when each stage starts
        def stage(self, name: str, note: str) -> None:
            if note.startswith("iteration"):
                marks.append((name, time.monotonic()))
                clock.stage = name

        def advance(self, name: str, done: int, total: int) -> None:
            pass

    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        try:
            (m,) = run(cfg, Path(d), models, progress=Marks())
        finally:
            clock.stop()
        end = time.monotonic()
    starts = marks + [("end", end)]
    stages = {}
    for (name, t), (_, t_next) in zip(starts, starts[1:]):
        gen = clock.seconds.get(name, 0.0)
        stages[name] = {"wall_s": round(t_next - t, 3), "generation_s": round(gen, 3),
                        "other_s": round(t_next - t - gen, 3), "output_tokens": clock.tokens.get(name, 0),
                        "peak_rss_mib": round(clock.peak_mib.get(name, 0.0), 1)}
        if name in clock.counts:
            stages[name]["engine"] = engine_figures(clock.counts[name])
            if gen:
                stages[name]["output_tokens_per_s"] = round(clock.tokens.get(name, 0) / gen, 2)
    iteration_s = end - marks[0][1]
    gen_total = sum(s["generation_s"] for s in stages.values())
    train = m.values.get("train", {})
    sync_s = float(train.get("sync_seconds", 0.0))
    learn_s = stages.get("train", {}).get("wall_s", 0.0) - sync_s
    tokens = sum(clock.tokens.values())
    return {
        "backend": backend, "load_s": round(load_s, 3), "setup_s": round(marks[0][1] - t0, 3),
        "iteration_s": round(iteration_s, 3), "generation_s": round(gen_total, 3),
        "learning_s": round(learn_s, 3), "sync_s": round(sync_s, 3),
        "share": {"generation": round(gen_total / iteration_s, 4),
                  "learning": round(learn_s / iteration_s, 4),
                  "sync": round(sync_s / iteration_s, 4),
                  "other": round(1 - (gen_total + learn_s + sync_s) / iteration_s, 4)},
        "output_tokens": tokens, "generation_tokens_per_s": round(tokens / max(gen_total, 1e-9), 1),
        "importance_ratio": train.get("importance_ratio"), "train_note": train.get("note"),
        "learner": {"trained_tokens": train.get("tokens"), "run_tokens": train.get("tokens_run"),
                    "seconds": train.get("seconds"),
                    "trained_tokens_per_s": _rate(train.get("tokens"), train.get("seconds")),
                    "run_tokens_per_s": _rate(train.get("tokens_run"), train.get("seconds"))},
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "stages": stages,
    }


def _rate(tokens, seconds):
    return round(tokens / seconds, 2) if tokens and seconds else None


def engine_peak(model: str, batch: int, threads: int, weights: str) -> dict:
    """``benchmarks/generation.py``'s cell for ``model`` on llama.cpp at this batch, threads and
    weights (a subprocess, started before the iteration: a child's peak RSS starts from its
    parent's)."""
    import subprocess

    script = Path(__file__).resolve().parent / "generation.py"
    cmd = [sys.executable, str(script), "--worker", f"gen|{model}|llamacpp|{batch}|{threads}|{weights}",
           "--max-tokens", "64", "--repeats", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        return {"error": done.stderr.strip()[-300:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--backend", default="hf,llamacpp",
                    help="comma-separated backends, each run in turn (the first is the baseline)")
    ap.add_argument("--no-train", action="store_true", help="skip the learner step and the sync")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine-peak", action="store_true",
                    help="also measure each llama.cpp model's own throughput at the same batch")
    ap.add_argument("--save-batch", metavar="FILE",
                    help="write the samples of each learner step here (JSON lines)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a preset setting (dotted for sections), e.g. threads=2")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from spadework.config import override, preset

    sets: dict = {}
    for item in args.set:
        name, _, value = item.partition("=")
        *section, key = name.split(".")
        (sets.setdefault(section[0], {}) if section else sets)[key] = json.loads(value)
    cfg = override(preset(args.preset), {**sets, "iterations": 1, "run_seed": args.seed})
    peaks = {}
    if args.engine_peak:
        from spadework.policy.llamacpp import default_threads

        threads = cfg.threads or default_threads()
        for role in ("agent", "designer"):
            model = cfg.role_model(role) or "smollm2-135m-instruct"
            weights = cfg.engine_weights(role)
            peaks.setdefault(role, {"model": model, "weights": weights,
                                    **engine_peak(model, cfg.policy_batch, threads, weights)})
    runs = [one_iteration(cfg, b, not args.no_train, args.save_batch) for b in args.backend.split(",")]
    base = runs[0]
    for r in runs[1:]:
        r["iteration_speedup_vs_" + base["backend"]] = round(base["iteration_s"] / r["iteration_s"], 3)
        r["generation_speedup_vs_" + base["backend"]] = round(
            base["generation_s"] / max(r["generation_s"], 1e-9), 3)
    if peaks:
        for r in runs:
            for stage, role in (("play", "agent"), ("design", "designer")):
                peak = peaks.get(role, {})
                st = r["stages"].get(stage, {})
                got = st.get("output_tokens_per_s")
                if got and peak.get("tokens_per_s"):
                    st["share_of_engine_peak"] = round(got / peak["tokens_per_s"], 3)
                # the stage's work (prompt tokens computed, tokens sampled) at the engine's own
                # prefill and decode rates, over the time the stage's generation took
                eng = st.get("engine", {})
                if st.get("generation_s") and peak.get("prefill_tokens_per_s") and "prefilled_tokens" in eng:
                    ideal = (eng["prefilled_tokens"] / peak["prefill_tokens_per_s"]
                             + st["output_tokens"] / peak["tokens_per_s"])
                    st["engine_work_s_at_peak"] = round(ideal, 1)
                    st["share_of_engine_work_rate"] = round(ideal / st["generation_s"], 3)
    print(json.dumps({"benchmark": "iteration", "preset": args.preset, "model": cfg.model or "default",
                      "set": sets, "engine_peak": peaks,
                      "train": not args.no_train, "runs": runs,
                      "target": "weight sync under 10% of an iteration",
                      "meets_target": all(r["share"]["sync"] < 0.10 for r in runs)}, indent=1))


if __name__ == "__main__":
    main()

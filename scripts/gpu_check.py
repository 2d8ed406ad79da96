"""The prepared GPU check: speed and correctness of the transformers backend (and vLLM, when
importable) on one device, within a time budget, printed as one JSON object.

Run it through ``scripts/gpu_check.sh`` (its header says how to stage the files and carry them to
a GPU machine). The model is the default model's architecture built from its small config files
with random weights (``AutoModelForCausalLM.from_config``, fixed torch seed): the weights do not
fit what a GPU machine can carry, and a speed and correctness check needs none. It is wrapped in
spadework's own ``HFPolicy``, trained by its ``Learner`` and synced by ``weight_sync_for``:

- ``generation``: batched ``HFPolicy.chat`` of ``conversations`` x ``new_tokens``, sampled at
  the play temperature; tokens/s of the second of two identical passes (the first, over shapes
  the GPU has not seen, is reported as ``cold_s``).
- ``learner``: ``Learner.step`` on those very completions (their sampler logprobs, advantages
  +1/-1), ``learner_steps`` times, each followed by the weight sync's ``push``; the first step's
  ``importance_ratio`` is the sampler-to-learner ratio on policy (1 for an exact sampler).
- ``smoke``: one iteration of ``spadework.loop.run`` on the ``smoke`` preset (training on, the
  ``hf`` backend) in a child process, so that the budget can stop it; a tiny built-in corpus
  stands in for the default one, which a GPU machine does not have. It needs the sandbox's
  required layers (seccomp needs ``pyseccomp``, staged into ``.gpu-check/site``); without them
  it is reported as skipped with the sandbox's reason. With random weights every group scores
  alike, so its train stage usually reports "no update" (the ``learner`` part measures steps).
- ``vllm``: only when ``import vllm`` works: ``vllm.LLM`` on the same random weights (saved to a
  temporary folder) in a child process, its tokens/s, and the ratio of the learner's logprobs
  (base weights) to vLLM's on vLLM's sampled tokens, at temperature 1 (where vLLM's raw
  logprobs follow spadework's convention); else ``{"skipped": "not importable: ..."}``.

Each part starts only when the budget leaves room for it and is reported as skipped, with the
reason, otherwise; a part still running when the budget runs out is stopped (a worker is killed,
an in-process part ends with the process) and the JSON holds what was measured. ``summary`` holds
the headline figures (generation and learner tokens/s, sync seconds, the sampler-to-learner ratio,
vLLM's tokens/s). Progress goes to stderr (a line every few seconds); the JSON goes to stdout and
to ``$OUT/gpu_check.json`` when ``$OUT`` is set; the exit status is 1 when a part failed (an
``error`` entry), else 0. Python warnings are collected into the JSON's ``warnings`` (a worker's
into its part's) instead of the terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STAGE_DIR = ROOT / ".gpu-check"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".msgpack", ".h5")
#: The quick (CPU test) architecture: the default model's vocabulary and tokenizer, 2 small layers.
TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
TOPICS = ("a lighthouse keeper", "prime numbers", "a chess endgame", "river deltas", "bread",
          "the Moon's phases", "sorting algorithms", "a desert fox")
CORPUS_TEXTS = (
    "Tic-tac-toe is a game for two players who take turns marking the spaces in a three-by-three "
    "grid with X or O. The player who places three marks in a row, column or diagonal wins.",
    "The Tower of Hanoi consists of three rods and disks of different sizes. Only one disk moves "
    "at a time, and no disk may be placed on top of a smaller one.",
    "Mastermind is a code-breaking game: one player picks a hidden code of coloured pegs and the "
    "other guesses, learning after each guess how many pegs are right and in place.",
)
#: Seconds a part needs at least to be started; the margin is kept for scoring and writing.
MIN_SECONDS = {"learner": 10.0, "smoke": 30.0, "vllm": 90.0}
MARGIN_S = 10.0
PARTS = ("generation", "learner", "smoke", "vllm")


@dataclass(frozen=True)
class Sizes:
    """How much each part does: conversations x new tokens sampled (and trained on)."""

    conversations: int = 32
    new_tokens: int = 128
    learner_steps: int = 3
    micro_batch: int = 8


QUICK = Sizes(conversations=4, new_tokens=16, learner_steps=2, micro_batch=4)


class Clock:
    """The budget and the result so far. A heartbeat thread prints the running part every few
    seconds and, when the budget runs out, marks that part stopped, stops its worker, prints
    what was measured and ends the process: an in-process part cannot be interrupted otherwise."""

    def __init__(self, budget_s: float, out: Any, caught: list, every_s: float = 5.0) -> None:
        self.t0, self.budget_s, self.part = time.monotonic(), budget_s, "setup"
        self.out, self.caught, self.every_s = out, caught, every_s
        self.result: dict[str, Any] = {}
        self.child: subprocess.Popen | None = None
        self.scratch: list[str] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def say(self, text: str) -> None:
        print(f"gpu_check {self.elapsed():6.1f}s  {text}", file=sys.stderr, flush=True)

    def record(self, part: str, value: Any) -> None:
        with self.lock:
            self.result[part] = value

    def start(self) -> None:
        threading.Thread(target=self._beat, daemon=True).start()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            if self.left() > 0:
                self.say(f"{self.part} running ({self.left():.0f} s of the budget left)")
                continue
            with self.lock:
                if self._stop.is_set():  # the main thread got there first and prints
                    return
                for part in PARTS[PARTS.index(self.part) if self.part in PARTS else 0:]:
                    when = "while it ran" if part == self.part else "before it started"
                    self.result.setdefault(part, {"skipped": f"stopped: the budget ({self.budget_s:.0f} "
                                                             f"s) ran out {when}; raise --budget-s"})
                if self.child is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self.child.pid, signal.SIGKILL)
                for path in self.scratch:
                    shutil.rmtree(path, ignore_errors=True)
                os._exit(self._emit())

    def finish(self) -> int:
        """Print the JSON once (the watchdog may have); 1 when a part failed, else 0."""
        with self.lock:
            return self._emit()

    def _emit(self) -> int:
        self._stop.set()
        out = {**self.result, "summary": summary(self.result), "seconds": round(self.elapsed(), 1),
               "warnings": _warnings(self.caught)}
        text = json.dumps(out, indent=1)
        print(text, file=self.out, flush=True)
        if os.environ.get("OUT"):
            Path(os.environ["OUT"], "gpu_check.json").write_text(text + "\n")
        return int(any(isinstance(v, dict) and "error" in v for v in out.values()))


# -- the model -------------------------------------------------------------------------------------

def default_model_dir() -> Path:
    """``.gpu-check/model`` when staged, else the pulled default model's folder (this machine)."""
    if (STAGE_DIR / "model" / "config.json").is_file():
        return STAGE_DIR / "model"
    from spadework.policy.registry import DEFAULT_MODEL, model_dir

    return model_dir(DEFAULT_MODEL) / "hf"


def build_policy(args: argparse.Namespace, batch: int) -> Any:
    """``HFPolicy`` over the architecture in ``args.model_dir`` with seeded random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from spadework.policy.hf import HFPolicy

    folder = Path(args.model_dir)
    if not (folder / "config.json").is_file():
        raise SystemExit(f"gpu_check: no config.json in {folder}: run `scripts/gpu_check.sh --stage` "
                         "where the default model is pulled and carry .gpu-check, or pass --model-dir")
    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    for key, value in (TINY.items() if args.quick else ()):
        setattr(config, key, value)
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, args.dtype))
    with contextlib.suppress(OSError):  # its eos ids join the stop tokens, as for the real model
        model.generation_config = GenerationConfig.from_pretrained(folder, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return HFPolicy(model.to(args.device).eval(), tok, max_batch_size=batch)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


# -- the parts -------------------------------------------------------------------------------------

def part_generation(policy: Any, sizes: Sizes, args: argparse.Namespace) -> tuple[dict, list]:
    """Tokens/s of one batched ``chat``; returns the figures and the completions."""
    from spadework.policy.base import SamplingParams

    convs = [[{"role": "system", "content": "You are a helpful assistant."},
              {"role": "user", "content": f"Tell me about {TOPICS[i % len(TOPICS)]} in "
                                          f"{i % 5 + 2} sentences."}]
             for i in range(sizes.conversations)]
    params = SamplingParams(temperature=0.7, max_tokens=sizes.new_tokens, seed=args.seed)
    # the first pass is timed too (``cold``): on a GPU each new key length is a new attention
    # shape (an H200's profile showed cuDNN's attention), and a first pass over a batch's
    # lengths took about 118 ms a step against 22 ms for a warm one there; the warm pass is the
    # figure a long run sees, where lengths repeat
    start = time.perf_counter()
    cold = policy.chat(convs, params)
    _sync(args.device)
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    done = policy.chat(convs, params)
    _sync(args.device)
    seconds = time.perf_counter() - start
    tokens = sum(len(c.output_ids) for c in done)
    return {"conversations": len(convs), "max_new_tokens": sizes.new_tokens,
            "temperature": params.temperature, "tokens": tokens,
            "prompt_tokens": sum(len(c.prompt_ids) for c in done), "seconds": round(seconds, 3),
            "tokens_per_s": round(tokens / seconds, 1),
            "cold_s": round(cold_s, 3), "cold_tokens": sum(len(c.output_ids) for c in cold)}, done


def part_learner(policy: Any, done: list, sizes: Sizes, clock: Clock,
                 args: argparse.Namespace) -> dict:
    """``Learner.step`` on the sampled completions, each step followed by the weight sync."""
    from spadework.config import preset
    from spadework.policy.load import learner_policy
    from spadework.train import Learner, Sample, weight_sync_for
    from spadework.types import Sampling

    drawn = Sampling(0.7)  # how part_generation sampled them
    samples = [Sample("agent", c.prompt_ids, c.output_ids, c.logprobs, 1.0 if i % 2 else -1.0,
                      drawn) for i, c in enumerate(done) if c.output_ids]
    cfg = dataclasses.replace(preset("smoke").learner, micro_batch_size=sizes.micro_batch)
    learner = Learner(learner_policy(policy), cfg)
    sync = weight_sync_for(policy, learner)
    steps: list[dict] = []
    for _ in range(sizes.learner_steps):
        last = steps[-1]["seconds"] if steps else 0.0
        if steps and clock.left() < MARGIN_S + 2 * last:
            break
        start = time.perf_counter()
        fig = learner.step(samples)
        _sync(args.device)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        sync.push(learner)
        steps.append({"seconds": round(seconds, 3), "sync_seconds": round(time.perf_counter() - start, 6),
                      "loss": fig["loss"], "grad_norm": fig["grad_norm"],
                      "step_skipped": bool(fig["step_skipped"]),
                      "importance_ratio": fig["importance_ratio"]["all"]})
    trained = sum(s.n_tokens for s in samples)
    run = sum(s.length for s in samples)
    timed = steps[1:] or steps  # the first step warms up (allocator, kernels) when there are more
    seconds = sum(s["seconds"] for s in timed)
    return {"samples": len(samples), "trained_tokens_per_step": trained, "tokens_per_step": run,
            "config": {"lora": cfg.lora, "lora_r": cfg.lora_r, "lr": cfg.lr,
                       "micro_batch_size": cfg.micro_batch_size},
            "sync": type(sync).__name__, "steps": steps,
            "tokens_per_s": round(trained * len(timed) / seconds, 1),
            "sequence_tokens_per_s": round(run * len(timed) / seconds, 1),
            "weights_moved": learner.steps > 0}


class StageLines:
    """The loop's progress as plain stderr lines: each stage, and each stage's count when done
    (plain, so that the check needs no terminal library)."""

    def __init__(self) -> None:
        self.finished: set[tuple[str, int]] = set()

    def stage(self, name: str, note: str) -> None:
        print(f"gpu_check smoke  {name}: {note}", file=sys.stderr, flush=True)

    def advance(self, name: str, done: int, total: int) -> None:
        if done >= total and (name, total) not in self.finished:
            self.finished.add((name, total))
            self.stage(name, f"{done}/{total} done")


def smoke_worker(args: argparse.Namespace) -> dict:
    """One smoke iteration of the loop (the ``--worker smoke`` child; see the module docstring)."""
    from spadework.config import preset
    from spadework.corpus import Corpus, Document
    from spadework.loop import Models, run
    from spadework.policy.load import learner_policy
    from spadework.sandbox import DEFAULT_REQUIRED, probe
    from spadework.train import Learner, weight_sync_for

    iso = probe()
    layers = {x.name: "active" if x.active else f"missing: {x.reason}" for x in iso.layers}
    missing = iso.missing(DEFAULT_REQUIRED)
    if missing:
        return {"skipped": f"the sandbox lacks required layer(s) {', '.join(missing)} "
                           f"({'; '.join(layers[m] for m in missing)}); for seccomp stage pyseccomp "
                           "(scripts/gpu_check.sh --stage) and make sure libseccomp.so.2 is installed",
                "sandbox": layers}
    cfg = dataclasses.replace(preset("smoke"), backend="hf", train=True, iterations=1)
    policy = build_policy(args, batch=cfg.policy_batch)
    learner = Learner(learner_policy(policy), cfg.learner)
    sync = weight_sync_for(policy, learner)
    corpus = Corpus(tuple(Document(f"gpu-check-{i}", t) for i, t in enumerate(CORPUS_TEXTS)),
                    "gpu-check")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-run-") as run_dir:
        (m,) = run(cfg, run_dir, Models(policy, learner, sync), corpus=lambda: corpus,
                   progress=StageLines())
    v = m.values
    keep = ("note", "loss", "importance_ratio", "sync_seconds", "grad_norm", "samples", "tokens",
            "agent_samples", "designer_samples", "step_skipped", "seconds")
    return {"seconds": round(time.perf_counter() - start, 3), "preset": "smoke", "iterations": 1,
            "episodes": v.get("episodes"), "statuses": v.get("statuses"),
            "tokens": v.get("tokens"), "stage_seconds": v.get("seconds"),
            "train": {k: v["train"][k] for k in keep if k in v.get("train", {})},
            "sync": type(sync).__name__, "sandbox": layers}


def part_vllm(args: argparse.Namespace, clock: Clock, policy: Any, done: list,
              folder: Path | None, timeout: float) -> dict:
    """vLLM on the saved random weights in a child (``--worker vllm``), scored by the learner."""
    if folder is None:
        return {"skipped": "not importable (no module named vllm)"}
    (folder / "prompts.json").write_text(json.dumps([list(c.prompt_ids) for c in done]))
    out = _child(args, clock, ["--worker", "vllm", "--vllm-dir", str(folder)], timeout,
                 log=folder / "vllm.log")
    if "sequences" not in out:
        return out
    return {**{k: v for k, v in out.items() if k != "sequences"},
            "ratio_to_learner": learner_vs(policy, out["sequences"])}


def learner_vs(policy: Any, sequences: list) -> dict:
    """``exp(lp_learner - lp_sampler)`` over the sampler's tokens, the learner on base weights."""
    import math

    from spadework.policy.hf import teacher_forced_logprobs

    diffs: list[float] = []
    policy.model.eval()
    with policy.base_weights():  # the learner's adapter off: the weights vLLM was given
        for prompt, output, lps in sequences:
            ours = teacher_forced_logprobs(policy.model, prompt, output, 1.0)
            diffs += [a - b for a, b in zip(ours, lps, strict=True)]
    ratios = [math.exp(d) for d in diffs]
    if not ratios:
        return {"tokens": 0}
    return {"tokens": len(ratios), "mean": sum(ratios) / len(ratios), "max": max(ratios),
            "min": min(ratios), "mean_abs_logprob_diff": sum(map(abs, diffs)) / len(diffs)}


def vllm_worker(args: argparse.Namespace) -> dict:
    """The child's side of :func:`part_vllm`: generate at temperature 1 with logprobs."""
    try:
        import vllm
        from vllm import LLM, SamplingParams
    except ImportError as e:
        return {"skipped": f"not importable: {e}"}
    prompts = json.loads(Path(args.vllm_dir, "prompts.json").read_text())
    sizes = QUICK if args.quick else Sizes()
    start = time.perf_counter()
    llm = LLM(model=args.vllm_dir, dtype=args.dtype, seed=args.seed, gpu_memory_utilization=0.3,
              max_model_len=max(map(len, prompts)) + sizes.new_tokens + 16)
    init = time.perf_counter() - start
    params = SamplingParams(temperature=1.0, max_tokens=sizes.new_tokens, logprobs=0,
                            seed=args.seed, ignore_eos=True)
    feed = [{"prompt_token_ids": p} for p in prompts]
    llm.generate(feed[:2], SamplingParams(max_tokens=4), use_tqdm=False)  # warm-up
    start = time.perf_counter()
    outs = llm.generate(feed, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    seqs = []
    for prompt, out in zip(prompts, outs, strict=True):
        c = out.outputs[0]
        ids = list(c.token_ids)
        seqs.append([prompt, ids, [c.logprobs[k][t].logprob for k, t in enumerate(ids)]])
    tokens = sum(len(s[1]) for s in seqs)
    return {"version": vllm.__version__, "init_s": round(init, 3), "conversations": len(seqs),
            "tokens": tokens, "seconds": round(seconds, 3),
            "tokens_per_s": round(tokens / seconds, 1), "temperature": 1.0, "sequences": seqs}


def _child(args: argparse.Namespace, clock: Clock, extra: list[str], timeout: float,
           log: Path | None) -> dict:
    """Run this script as a worker in its own process group; its JSON result, or why none."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), *extra, "--result", str(result),
               "--device", args.device, "--dtype", args.dtype, "--model-dir", str(args.model_dir),
               "--seed", str(args.seed), *(["--quick"] if args.quick else [])]
        with open(log or os.devnull, "wb") as sink:
            stream = sink if log else sys.stderr  # a worker's progress shows; vLLM's chatter is logged
            with clock.lock:
                clock.child = subprocess.Popen(cmd, stdout=stream, stderr=stream,
                                               start_new_session=True)
            try:
                rc = clock.child.wait(timeout=timeout)
            except BaseException as e:  # its time is up, or Ctrl-C: the worker must not outlive us
                os.killpg(clock.child.pid, signal.SIGKILL)
                clock.child.wait()
                if not isinstance(e, subprocess.TimeoutExpired):
                    raise
                return {"skipped": f"ran past its share of the budget ({timeout:.0f} s) and was "
                                   "stopped; raise --budget-s"}
            finally:
                with clock.lock:
                    clock.child = None
        if result.is_file():
            return json.loads(result.read_text())
        tail = log.read_text(errors="replace").splitlines()[-15:] if log else []
        return {"error": f"the worker exited with code {rc} and no result (its output is above)",
                **({"log_tail": tail} if tail else {})}


# -- staging, the report ---------------------------------------------------------------------------

def stage(name: str | None, into: Path) -> dict:
    """Copy the model's small files (no weights) and the ``pyseccomp`` module into ``into``."""
    from spadework.policy.registry import DEFAULT_MODEL, model_dir

    name = name or DEFAULT_MODEL
    src = model_dir(name) / "hf"
    if not (src / "config.json").is_file():
        raise SystemExit(f"gpu_check: {name} is not pulled here ({src} has no config.json): run "
                         f"`spadework models pull {name}` (or `make run`) first")
    dest, site = into / "model", into / "site"
    for d in (dest, site):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    files = sorted(f for f in src.iterdir() if f.is_file() and f.suffix not in WEIGHT_SUFFIXES)
    for f in files:
        shutil.copy2(f, dest / f.name)
    spec = importlib.util.find_spec("pyseccomp")
    if spec is not None and spec.origin and Path(spec.origin).name != "__init__.py":
        shutil.copy2(spec.origin, site / Path(spec.origin).name)
    note = {"model": name, "source": str(src), "files": [f.name for f in files],
            "bytes": sum(f.stat().st_size for f in files),
            "pyseccomp": "staged" if any(site.iterdir()) else "not importable here; the smoke "
                         "iteration will report the sandbox as unavailable on the GPU machine"}
    (into / "staged.json").write_text(json.dumps(note, indent=1) + "\n")
    return note


def environment(args: argparse.Namespace) -> dict:
    """What ran the check: versions, device, dtype."""
    import torch
    import transformers

    out = {"python": sys.version.split()[0], "torch": torch.__version__,
           "transformers": transformers.__version__, "device": args.device, "dtype": args.dtype}
    if args.device.startswith("cuda"):
        out |= {"gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda}
    return out


def summary(result: dict) -> dict:
    """The headline figures; ``sync_seconds`` is the smoke train stage's when it updated, else
    the learner part's (``InProcessSync``: the sampler is the trained module, nothing moves)."""
    gen, learn = result.get("generation", {}), result.get("learner", {})
    first = (learn.get("steps") or [{}])[0]
    smoke_sync = result.get("smoke", {}).get("train", {}).get("sync_seconds")
    return {"generation_tokens_per_s": gen.get("tokens_per_s"),
            "learner_tokens_per_s": learn.get("tokens_per_s"),
            "sync_seconds": smoke_sync if smoke_sync is not None else first.get("sync_seconds"),
            "sampler_to_learner_ratio": (first.get("importance_ratio") or {}).get("mean"),
            "vllm_tokens_per_s": result.get("vllm", {}).get("tokens_per_s")}


def check(args: argparse.Namespace, clock: Clock) -> None:
    """Parts (a) generation, (c) learner, (b) smoke, (d) vLLM into ``clock.result``, each
    started only when what is left of the budget leaves room for it."""
    sizes = QUICK if args.quick else Sizes()
    has_vllm = importlib.util.find_spec("vllm") is not None
    clock.record("environment", environment(args))
    clock.record("budget_s", args.budget_s)
    clock.record("quick", args.quick)
    clock.part = "model"
    policy = build_policy(args, batch=sizes.conversations)
    config = policy.model.config
    clock.record("model", {"dir": str(args.model_dir), "architecture": config.architectures,
                           "layers": config.num_hidden_layers,
                           "parameters": sum(p.numel() for p in policy.model.parameters()),
                           "weights": f"random (torch seed {args.seed})"})
    clock.part = "generation"
    gen, done = part_generation(policy, sizes, args)
    clock.record("generation", gen)
    clock.say(f"generation: {gen['tokens_per_s']} tokens/s")
    with tempfile.TemporaryDirectory(prefix="gpu-check-vllm-") as tmp:
        clock.scratch.append(tmp)
        folder = Path(tmp) if has_vllm else None
        if folder is not None:  # saved before the learner wraps the module in its adapter
            policy.model.save_pretrained(folder)
            policy.tokenizer.save_pretrained(folder)
        for part in ("learner", "smoke", "vllm"):
            share = clock.left() - MARGIN_S - (MIN_SECONDS["vllm"] if part == "smoke" and has_vllm else 0)
            clock.part = part
            if share < MIN_SECONDS[part] and (part != "vllm" or has_vllm):
                value = {"skipped": f"the budget was spent ({share:.0f} s left for it, "
                                    f"{MIN_SECONDS[part]:.0f} s needed); raise --budget-s"}
            elif part == "learner":
                value = guarded(part_learner, policy, done, sizes, clock, args)
            elif part == "smoke":
                value = _child(args, clock, ["--worker", "smoke"], share, log=None)
            else:
                value = guarded(part_vllm, args, clock, policy, done, folder, share)
            clock.record(part, value)
            why = value.get("skipped") or value.get("error")
            clock.say(f"{part}: {'done' if why is None else why}")


# -- the command line ------------------------------------------------------------------------------

def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", action="store_true", help="copy the small model files and "
                    "pyseccomp into .gpu-check/ (on a machine where the model is pulled), then exit")
    ap.add_argument("--model", help="registry model to stage (default: the default model)")
    ap.add_argument("--stage-dir", type=Path, default=STAGE_DIR, help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--dtype", choices=("bfloat16", "float16", "float32"),
                    help="default: bfloat16 on CUDA, float32 on the CPU")
    ap.add_argument("--model-dir", type=Path, help="config and tokenizer folder (default: "
                    ".gpu-check/model when staged, else the pulled default model's)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="wall-clock budget (seconds)")
    ap.add_argument("--quick", action="store_true", help="a 2-layer model and tiny sizes (tests)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker", choices=("smoke", "vllm"), help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--vllm-dir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.dtype = args.dtype or ("float32" if args.device == "cpu" else "bfloat16")
    args.model_dir = args.model_dir or default_model_dir()
    if args.budget_s <= 0:
        ap.error("--budget-s must be > 0")
    return args


def _quiet() -> None:
    """Library chatter off the terminal: transformers' logging and progress bars."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _checked_device(device: str) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"gpu_check: --device {device} but CUDA is not available here (torch "
                         f"{torch.__version__}, CUDA build {torch.version.cuda}); use --device cpu")


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.stage:
        print(json.dumps(stage(args.model, args.stage_dir), indent=1))
        return 0
    stdout = sys.stdout
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("always")
        if args.worker:
            return run_worker(args, caught)
        clock = Clock(args.budget_s, stdout, caught)
        clock.start()
        _checked_device(args.device)
        _quiet()
        check(args, clock)
        return clock.finish()


def guarded(part: Any, *args: Any) -> dict:
    """``part(*args)``, or its failure as ``{"error", "traceback"}`` so that the parts after it
    still run and the JSON still prints."""
    try:
        return part(*args)
    except Exception as e:  # noqa: BLE001 - the check's one boundary: reported in the JSON
        return {"error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc().splitlines()[-8:]}


def run_worker(args: argparse.Namespace, caught: list) -> int:
    """A worker's result, or its failure, as JSON in ``--result`` (the parent reads it)."""
    _quiet()
    out = guarded(smoke_worker if args.worker == "smoke" else vllm_worker, args)
    out["warnings"] = _warnings(caught)
    args.result.write_text(json.dumps(out))
    return 0


def _warnings(caught: list) -> list[str]:
    seen: dict[str, None] = {}
    for w in caught:
        seen.setdefault(f"{w.category.__name__}: {w.message} ({Path(w.filename).name}:{w.lineno})")
    return list(seen)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

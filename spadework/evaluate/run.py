"""Run one suite against one policy and write ``DIR/<suite>/{samples.jsonl,summary.json,summary.md}``.

:func:`evaluate` is the library entry point (any ``Policy``); :func:`load_policy` builds a policy
from a model name or a run's checkpoint with a named or given backend; :func:`run_eval` is the
one call behind ``spadework eval``.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from spadework.evaluate.catalog import make_suite
from spadework.evaluate.data import data_hashes
from spadework.evaluate.judge import HASH_SEED, EvalError, Judge
from spadework.evaluate.presets import SuiteSettings, preset_settings
from spadework.evaluate.suite import Progress, RunContext, no_progress
from spadework.evaluate.summary import (
    REPORT_FILE,
    SAMPLES_FILE,
    SUMMARY_FILE,
    report_markdown,
    summarize,
    write_samples,
)
from spadework.policy.registry import sha256_of

Backend = Callable[[str | None], Any]
PACKAGES = ("spadework", "torch", "transformers", "peft", "reasoning-gym", "math-verify",
            "latex2sympy2_extended", "sympy", "numpy")


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that decide an evaluation's numbers."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def evaluate(policy: Any, suite: str | Any, out_dir: str | Path, *, preset: str = "cpu",
             settings: SuiteSettings | None = None, seed: int = 0,
             progress: Progress | None = None, model_info: dict[str, Any] | None = None,
             judge: Judge | None = None, sandbox: Any = None) -> dict[str, Any]:
    """Play ``suite`` (a name or a suite object) with ``policy``; write the three files under
    ``out_dir/<suite>/`` and return the summary (``summary.json``'s content).

    ``settings`` overrides the preset's row for this suite. A ``judge`` may be shared between
    suites (one worker start); otherwise one is started and closed here. ``sandbox``: a started
    Sandbox for multi-turn suites to reuse (left open).
    """
    suite_obj = make_suite(suite) if isinstance(suite, str) else suite
    s = settings or preset_settings(preset, suite_obj.kind)
    out = Path(out_dir) / suite_obj.name
    own_judge = judge is None
    judge = judge or Judge()
    start, started = time.monotonic(), datetime.now(UTC).isoformat(timespec="seconds")
    try:
        ctx = RunContext(policy, s, judge, seed, progress or no_progress, sandbox)
        samples = suite_obj.run(ctx)
        layers = judge.layers
    finally:
        if own_judge:
            judge.close()
    from spadework.evaluate.rg import RGSuite
    from spadework.rg_tasks import disjoint_tasks

    disjoint = disjoint_tasks() if isinstance(suite_obj, RGSuite) and suite_obj.only is None else None
    summary = {
        "suite": suite_obj.name, "preset": preset, "seed": seed, "started_at": started,
        "wall_seconds": round(time.monotonic() - start, 1),
        "model": model_info or {"name": type(policy).__name__},
        "settings": asdict(s),
        "sampling": {k: getattr(s, k) for k in ("samples", "max_tokens", "temperature", "top_p",
                                                 "top_k")},
        "context_length": getattr(policy, "context_length", None),
        "packages": package_versions(),
        "data": {name: data_hashes(name) for name in suite_obj.data},
        "judge": {"layers": layers, "pythonhashseed": HASH_SEED, "restarts": judge.restarts},
        "metrics": summarize(samples, seed=seed, disjoint=disjoint),
    }
    write_samples(out / SAMPLES_FILE, samples)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / REPORT_FILE).write_text(report_markdown(summary), encoding="utf-8")
    return summary


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from ``RUN_DIR`` (its ``checkpoints/latest.json``), ``RUN_DIR/ITER``
    (``iter_0003`` or ``3``) or the folder itself."""
    p = Path(path)
    if (p / "learner.json").is_file():
        return p
    root = p / "checkpoints"
    if (root / "latest.json").is_file():
        try:
            return root / json.loads((root / "latest.json").read_text())["dir"]
        except (OSError, json.JSONDecodeError, KeyError) as e:
            raise EvalError(f"{root / 'latest.json'} is unreadable: {e}") from e
    run_dir, it = p.parent, p.name
    name = f"iter_{int(it):04d}" if it.isdigit() else it
    candidate = run_dir / "checkpoints" / name
    if (candidate / "learner.json").is_file():
        return candidate
    raise EvalError(f"no checkpoint at {path}: give RUN_DIR (its latest), RUN_DIR/ITER "
                    "(e.g. runs/x/3 or runs/x/iter_0003) or a checkpoint folder")


def _run_model(ckpt: Path) -> str | None:
    """The base model a run trained (its archive's saved config), or None if unknown."""
    from spadework.archive import Archive
    from spadework.errors import ArchiveError

    db = ckpt.parent.parent / "archive.sqlite"
    if not db.is_file():
        return None
    try:
        with Archive.open(db, create=False) as archive:
            cfg = archive.load_state("config") or {}
    except ArchiveError:
        return None
    return cfg.get("agent_model") or cfg.get("model")


def adapter_into_engine(engine: Any, ckpt: Path) -> None:
    """A run's LoRA checkpoint into a ``LlamaCppPolicy``: the adapter is loaded onto the
    engine's transformers twin and pushed across by the run's own weight sync."""
    from spadework.policy.load import learner_policy
    from spadework.train.sync import LlamaCppLoraSync

    if not (ckpt / "adapter").is_dir():
        raise EvalError(f"{ckpt} is a full fine-tune (no adapter/): evaluate it with --backend hf")
    twin = learner_policy(engine)
    apply_checkpoint(twin, ckpt, merge=False)
    LlamaCppLoraSync(engine).push_model(twin.model)


def apply_checkpoint(policy: Any, ckpt: Path, *, merge: bool = True) -> None:
    """Load a run's trainable weights into ``policy.model`` for inference: a LoRA adapter is
    merged into the base weights (sampling then costs what the base model costs; ``merge=False``
    keeps it a ``PeftModel``); a full fine-tune's weights are copied by name."""
    model = getattr(policy, "model", None)
    if model is None:
        raise EvalError("a checkpoint needs a backend that holds the model in process "
                        "(the transformers backend, `hf`)")
    if (ckpt / "adapter").is_dir():
        import warnings

        from peft import PeftModel

        with warnings.catch_warnings():  # transformers' deprecation notes, not the user's concern
            warnings.simplefilter("ignore")
            peft = PeftModel.from_pretrained(model, str(ckpt / "adapter"))
        policy.model = peft.merge_and_unload() if merge else peft
        return
    import torch
    from safetensors.torch import load_file

    tensors = load_file(str(ckpt / "trainable.safetensors"))
    params = dict(model.named_parameters())
    unknown = sorted(set(tensors) - set(params))
    if unknown:
        raise EvalError(f"checkpoint {ckpt} has weights the model lacks ({unknown[:3]}): was it "
                        "trained from another base model? pass --model")
    with torch.no_grad():
        for name, t in tensors.items():
            params[name].copy_(t.to(params[name].dtype))


def load_policy(model: str | None = None, checkpoint: str | Path | None = None,
                backend: str | Backend = "hf") -> tuple[Any, dict[str, Any]]:
    """A policy and what identifies it (name, registry sha256 or checkpoint hash) for summaries.

    ``backend``: ``"hf"`` (the transformers backend), ``"llamacpp"`` (the fast CPU engine; a
    LoRA checkpoint goes in as a GGUF adapter over the unchanged base, the way a run's sampler
    gets it) or a callable ``(model) -> Policy``.
    """
    from spadework.policy.registry import DEFAULT_MODEL, known_models

    ckpt = resolve_checkpoint(checkpoint) if checkpoint is not None else None
    name = model or (_run_model(ckpt) if ckpt else None) or DEFAULT_MODEL
    if callable(backend):
        load = backend
    elif backend == "hf":
        from spadework.policy.hf import load_hf_policy

        load = load_hf_policy
    elif backend == "llamacpp":
        from spadework.policy.llamacpp import load_llamacpp_policy

        load = load_llamacpp_policy
    else:
        raise EvalError(f"unknown backend {backend!r}; use 'hf', 'llamacpp' or pass a callable")
    _quiet_transformers()
    policy = load(name)
    info: dict[str, Any] = {"name": name, "backend": backend if isinstance(backend, str) else
                            getattr(backend, "__name__", "callable")}
    if name in known_models():
        info["sha256"] = known_models()[name].sha256
    if ckpt is not None:
        if backend == "llamacpp":
            adapter_into_engine(policy, ckpt)
        else:
            apply_checkpoint(policy, ckpt)
        info.update(checkpoint=str(ckpt),
                    checkpoint_sha256=sha256_of(ckpt / "trainable.safetensors"))
    return policy, info


def _quiet_transformers() -> None:
    """No progress bars or advisory warnings from transformers on the terminal."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def check_request(suite: str, preset: str, data: str | Path | None = None, *,
                  model: str | None = None, checkpoint: str | Path | None = None) -> None:
    """Fail fast, before any model loads: the suite, its data, the preset and the checkpoint."""
    suite_obj = make_suite(suite, Path(data) if data else None)
    preset_settings(preset, suite_obj.kind)
    for name in suite_obj.data:
        data_hashes(name)  # raises with the pull command when the data is missing
    if checkpoint is not None:
        resolve_checkpoint(checkpoint)


def run_eval(suite: str, *, model: str | None = None, checkpoint: str | None = None,
             preset: str = "cpu", out: str | Path = "eval", seed: int = 0,
             data: str | Path | None = None, backend: str | Backend = "hf",
             max_items: int | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """What ``spadework eval`` does: check the request, load the policy, evaluate, write files."""
    suite_obj = make_suite(suite, Path(data) if data else None)
    s = preset_settings(preset, suite_obj.kind)
    if max_items is not None:
        s = replace(s, items=max_items)
    policy, info = load_policy(model, checkpoint, backend)
    return evaluate(policy, suite_obj, out, preset=preset, settings=s, seed=seed,
                    progress=progress, model_info=info)

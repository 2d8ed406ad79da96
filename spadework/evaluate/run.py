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

from spadework.archive import Archive
from spadework.errors import ArchiveError
from spadework.evaluate.catalog import make_suite
from spadework.evaluate.data import data_hashes
from spadework.evaluate.judge import HASH_SEED, EvalError, Judge
from spadework.evaluate.presets import SuiteSettings, preset_settings
from spadework.evaluate.rg import RGSuite
from spadework.evaluate.suite import Progress, RunContext, no_progress
from spadework.evaluate.summary import (
    REPORT_FILE,
    SAMPLES_FILE,
    SUMMARY_FILE,
    report_markdown,
    summarize,
    write_samples,
)
from spadework.policy import backends
from spadework.policy.registry import DEFAULT_MODEL, known_models, sha256_of
from spadework.rg_tasks import disjoint_tasks
from spadework.settings.run import DEFAULT_BACKEND

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
    db = ckpt.parent.parent / "archive.sqlite"
    if not db.is_file():
        return None
    try:
        with Archive.open(db, create=False) as archive:
            cfg = archive.load_state("config") or {}
    except ArchiveError:
        return None
    return cfg.get("agent_model") or cfg.get("model")


def load_policy(model: str | None = None, checkpoint: str | Path | None = None,
                backend: str | Backend = DEFAULT_BACKEND) -> tuple[Any, dict[str, Any]]:
    """A policy and what identifies it (name, registry sha256 or checkpoint hash) for summaries.

    ``backend``: a name in the backend table (:mod:`spadework.policy.backends`; ``hf``, the
    transformers backend, or ``llamacpp``, the fast CPU engine, where a LoRA checkpoint goes in
    as a GGUF adapter over the unchanged base, the way a run's sampler gets it), or a callable
    ``(model) -> Policy``.
    """
    ckpt = resolve_checkpoint(checkpoint) if checkpoint is not None else None
    name = model or (_run_model(ckpt) if ckpt else None) or DEFAULT_MODEL
    entry = None if callable(backend) else backends.backend(backend)
    _quiet_transformers()
    policy = backend(name) if entry is None else backends.load(entry.name, name)
    info: dict[str, Any] = {"name": name, "backend": entry.name if entry else
                            getattr(backend, "__name__", "callable")}
    if name in known_models():
        info["sha256"] = known_models()[name].sha256
    if ckpt is not None:
        apply = entry.checkpoint if entry else backends.backend("hf").checkpoint
        if apply is None:
            raise EvalError(f"the {entry.name} backend cannot apply a run's checkpoint: "
                            "evaluate it with --backend hf")
        apply(policy, ckpt)
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
             data: str | Path | None = None, backend: str | Backend = DEFAULT_BACKEND,
             max_items: int | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """What ``spadework eval`` does: check the request, load the policy, evaluate, write files."""
    suite_obj = make_suite(suite, Path(data) if data else None)
    s = preset_settings(preset, suite_obj.kind)
    if max_items is not None:
        s = replace(s, items=max_items)
    policy, info = load_policy(model, checkpoint, backend)
    return evaluate(policy, suite_obj, out, preset=preset, settings=s, seed=seed,
                    progress=progress, model_info=info)

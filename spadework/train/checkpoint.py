"""Learner checkpoints: trainable weights, optimizer state and RNG streams, restored exactly.

A checkpoint is a folder::

    trainable.safetensors   every trainable parameter by name (the LoRA matrices, or all weights)
    optimizer.pt            AdamW state (moments, step counts, hyper-parameters)
    rng.pt                  python ``random``, numpy's global and torch's CPU (and CUDA) states
    adapter/                (LoRA only) the adapter in peft's format, for servers such as vLLM
    learner.json            step count and the config; written last, so its presence marks a
                            complete checkpoint

Load restores into a learner built with the same adapter shape (``lora``, ``lora_r``,
``lora_alpha``, ``target_modules``); other settings (lr, clip, ...) may change between runs.
Everything is read with ``weights_only=True``: a checkpoint is data, never code. The run loop owns
the rest of a run's state (curriculum, designer buffer live in the archive).

A run keeps its checkpoints under ``RUN_DIR/checkpoints/`` (:func:`save_rotating`)::

    iter_XXXX/        one checkpoint per kept iteration (plus run.json: iteration, keep flag)
    latest.json       {"iteration": N, "dir": "iter_XXXX"}: what a resumed run restores

Each is written to a temporary folder and renamed, then ``latest.json`` is replaced atomically,
so a kill at any moment leaves the previous latest intact. The latest two are kept, and every one
marked to keep; older ones are deleted. :func:`restore_latest` loads the latest, or, when its
files are damaged (cut short, unreadable), the newest earlier one that loads.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spadework.errors import ArchiveError, ConfigError, PolicyError
from spadework.paths import room_to_write

MARKER = "learner.json"
LATEST = "latest.json"
#: Config fields that fix the shape of the trainable parameters.
SHAPE_FIELDS = ("lora", "lora_r", "lora_alpha", "target_modules")


def rng_state() -> dict[str, Any]:
    """The global RNG states as tensors and plain values (loadable with ``weights_only``)."""
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`rng_state`."""
    import numpy as np
    import torch

    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_learner(learner: Any, directory: Path) -> Path:
    """Write ``learner``'s checkpoint into ``directory`` (created; files replaced atomically)."""
    import torch
    from safetensors.torch import save_file

    writes = getattr(learner, "writes", True)  # sharded replicas all gather; rank 0 writes
    tensors = {n: t.to("cpu").contiguous() for n, t in learner.trainable_state().items()}
    optimizer = learner.optimizer_state() if hasattr(learner, "optimizer_state") else learner.optimizer.state_dict()
    if writes:
        directory.mkdir(parents=True, exist_ok=True)
        marker = directory / MARKER
        if marker.exists():
            marker.unlink()  # the folder is incomplete until the new marker is written
        _atomic(directory / "trainable.safetensors", lambda p: save_file(tensors, str(p)))
        _atomic(directory / "optimizer.pt", lambda p: torch.save(optimizer, p))
        _atomic(directory / "rng.pt", lambda p: torch.save(rng_state(), p))
    if learner.cfg.lora:
        learner.save_adapter(directory / "adapter")
    if writes:
        meta = {"steps": learner.steps, "config": asdict(learner.cfg),
                "optimizer": "by_name" if getattr(learner, "sharded", False) else "torch"}
        _atomic(marker, lambda p: p.write_text(json.dumps(meta, indent=1)))
    return directory


def load_learner(learner: Any, directory: Path) -> None:
    """Restore a checkpoint into ``learner``; raises ``ArchiveError`` / ``ConfigError`` with why."""
    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    marker = directory / MARKER
    if not marker.is_file():
        raise ArchiveError(f"{directory} holds no complete learner checkpoint ({MARKER} missing)")
    meta = json.loads(marker.read_text())
    saved, now = meta["config"], asdict(learner.cfg)
    for name in SHAPE_FIELDS:
        if _norm(saved.get(name)) != _norm(now[name]):
            raise ConfigError(f"checkpoint has {name}={saved.get(name)!r} but this learner has "
                              f"{now[name]!r}; build the learner with the checkpoint's value")
    name = "trainable.safetensors"
    try:
        tensors = load_file(str(directory / name))
        name = "optimizer.pt"
        opt_state = torch.load(directory / name, weights_only=True)
        name = "rng.pt"
        rng = torch.load(directory / name, weights_only=True)
    except (OSError, SafetensorError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise ArchiveError(
            f"the checkpoint {directory} is damaged: {name} cannot be read ({first}). Restore "
            f"that folder from a copy and resume again, or move {directory.parent} aside to "
            "resume with a fresh learner (the archive keeps every episode)") from e
    params = dict((n, p) for n, p in learner.model.named_parameters() if p.requires_grad)
    if set(params) != set(tensors):
        missing, extra = sorted(set(params) - set(tensors)), sorted(set(tensors) - set(params))
        raise ArchiveError(f"checkpoint parameters differ from the model's: missing {missing[:3]}, "
                           f"unexpected {extra[:3]}")
    sharded = getattr(learner, "sharded", False)
    if meta.get("optimizer", "torch") != ("by_name" if sharded else "torch"):
        raise ConfigError(f"{directory} was written by {'one' if sharded else 'sharded'} learner "
                          f"(fsdp = {str(not sharded).lower()}); resume it with the same [ray] fsdp")
    with torch.no_grad():
        for name, p in params.items():
            _copy_into(p, tensors[name])
    if sharded:
        learner.load_optimizer_state(opt_state)
    else:
        learner.optimizer.load_state_dict(opt_state)
    for group in learner.optimizer.param_groups:  # this run's settings win over the saved ones
        group.update(lr=learner.cfg.lr, betas=learner.cfg.betas,
                     weight_decay=learner.cfg.weight_decay, eps=learner.cfg.adam_eps)
    set_rng_state(rng)
    learner.steps = int(meta["steps"])


def _copy_into(param: Any, whole: Any) -> None:
    """Copy a whole saved tensor into a parameter, or into this replica's shard of it."""
    if hasattr(param, "device_mesh"):  # a DTensor: keep the slice this replica holds
        from torch.distributed.tensor import distribute_tensor

        local = distribute_tensor(whole.to(dtype=param.dtype, device=param.to_local().device),
                                  param.device_mesh, param.placements)
        param.to_local().copy_(local.to_local())
    else:
        param.copy_(whole.to(device=param.device, dtype=param.dtype))


def _norm(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _atomic(path: Path, write: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def save_rotating(learner: Any, root: Path, iteration: int, *, keep: bool,
                  extra: dict[str, Any] | None = None) -> Path:
    """Save ``learner`` (``learner.save(folder)``) as ``root/iter_XXXX`` and make it the latest
    (see the module docstring); ``extra`` goes into its ``run.json``. Returns the folder."""
    final = root / f"iter_{iteration:04d}"
    tmp = root / f".tmp-iter_{iteration:04d}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with room_to_write(final, f"the checkpoint of iteration {iteration}"):
            learner.save(tmp)
            (tmp / "run.json").write_text(json.dumps({"iteration": iteration, "keep": keep,
                                                      **(extra or {})}))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # the half-written copy; the latest is untouched
        raise
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    old = latest_checkpoint(root)
    _point_to(root, iteration, final)
    for _, folder in checkpoint_folders(root):  # the latest two stay: one to fall back on
        meta = folder / "run.json"
        if folder not in (final, old and old[1]) and meta.exists() and \
                not json.loads(meta.read_text()).get("keep"):
            shutil.rmtree(folder, ignore_errors=True)
    return final


def _point_to(root: Path, iteration: int, folder: Path) -> None:
    with room_to_write(root / LATEST, "the pointer to the latest checkpoint"):
        _atomic(root / LATEST, lambda p: p.write_text(json.dumps({"iteration": iteration,
                                                                   "dir": folder.name})))


def checkpoint_folders(root: Path) -> list[tuple[int, Path]]:
    """(iteration, folder) of every ``iter_XXXX`` folder under ``root``, newest first."""
    found = [(int(m.group(1)), p) for p in root.glob("iter_*")
             if (m := re.fullmatch(r"iter_(\d+)", p.name)) and p.is_dir()]
    return sorted(found, reverse=True)


def restore_latest(learner: Any, root: Path) -> tuple[int, Path, list[str]] | None:
    """Load the latest rotating checkpoint under ``root`` into ``learner``; when it is damaged
    (a file cut short or unreadable, its marker missing, or ``latest.json`` corrupt), the newest
    earlier folder that loads. Returns (iteration, folder, why each newer one was passed over),
    None when there is no checkpoint. A folder passed over is renamed ``iter_XXXX.damaged`` (kept
    for inspection) and ``latest.json`` names the one loaded, so the run goes on from it. Raises
    the latest's ``ArchiveError`` when none loads, and a ``ConfigError`` (another adapter shape)
    at once: that is the command's fault, not the files'."""
    passed: list[str] = []
    try:
        latest = latest_checkpoint(root)
    except ArchiveError as e:
        latest = None
        passed.append(str(e))
    if latest is None and not passed:
        return None
    below = latest[0] if latest else float("inf")
    candidates = ([latest] if latest else []) + [c for c in checkpoint_folders(root) if c[0] < below]
    bad: list[Path] = []
    for iteration, folder in candidates:
        try:
            learner.load(folder)
        except ArchiveError as e:
            passed.append(str(e))
            bad.append(folder)
            continue
        if passed:
            for folder_ in bad:
                if folder_.exists():
                    folder_.rename(_free_name(folder_.with_name(folder_.name + ".damaged")))
            _point_to(root, iteration, folder)
        return iteration, folder, passed
    more = f" ({len(passed) - 1} earlier checkpoint(s) fail to load too)" if len(passed) > 1 else ""
    raise ArchiveError((passed[0] if passed else f"{root} holds no checkpoint folder") + more)


def restore_trainers(trainers: Any, archive: Any, progress: Any) -> dict[str, int]:
    """Restore each of a resumed run's trainers (``RoleTrainer``: name, learner, sync, root)
    from its latest checkpoint (:func:`restore_latest`) and push the weights to its sampler;
    says so on ``progress``, and when a damaged latest was passed over, which updates are lost
    (recorded in the archive's ``checkpoint_fallbacks``). Returns, per trainer name, the
    iteration its restored checkpoint includes."""
    through: dict[str, int] = {}
    for t in trainers:
        restored = restore_latest(t.learner, t.root)
        if restored is None:
            continue
        iteration, folder, passed = restored
        through[t.name] = iteration
        if t.sync is not None:
            t.sync.push(t.learner)
        who = "learner" if t.name == "policy" else f"{t.name} model's learner"
        if not passed:
            progress.stage("setup", f"{who} restored from {folder.name}")
            continue
        progress.stage("setup", f"{passed[0].split('. Restore ')[0]}; {who} restored from "
                       f"{folder.name} instead (the damaged folder is kept as *.damaged): the "
                       f"updates after iteration {iteration} are lost, their episodes stay in "
                       "the archive")
        events = (archive.load_state("checkpoint_fallbacks") or {}).get("events", [])
        archive.save_state("checkpoint_fallbacks", {"events": [
            *events, {"trainer": t.name, "restored": folder.name, "passed_over": passed}]})
    return through


def _free_name(path: Path) -> Path:
    n, out = 1, path
    while out.exists():
        n += 1
        out = path.with_name(f"{path.name}-{n}")
    return out


def latest_checkpoint(root: Path) -> tuple[int, Path] | None:
    """(iteration, folder) of the latest rotating checkpoint under ``root``, or None."""
    pointer = root / LATEST
    if not pointer.exists():
        return None
    try:
        latest = json.loads(pointer.read_text())
        return int(latest["iteration"]), root / str(latest["dir"])
    except (ValueError, KeyError, TypeError) as e:
        raise ArchiveError(f"{pointer} is corrupt ({e}); remove it to start training afresh") from e


def checkpoint_meta(root: Path) -> dict[str, Any]:
    """The ``run.json`` of the latest rotating checkpoint under ``root`` (empty when none)."""
    found = latest_checkpoint(root)
    if found is None or not (found[1] / "run.json").is_file():
        return {}
    return json.loads((found[1] / "run.json").read_text())


# -- a run's checkpoint applied to a sampler, for evaluation -----------------------------------


def apply_checkpoint(policy: Any, ckpt: Path, *, merge: bool = True) -> None:
    """Load a run's trainable weights into ``policy.model`` for inference: a LoRA adapter is
    merged into the base weights (sampling then costs what the base model costs; ``merge=False``
    keeps it a ``PeftModel``); a full fine-tune's weights are copied by name."""
    model = getattr(policy, "model", None)
    if model is None:
        raise PolicyError("a checkpoint needs a backend that holds the model in process "
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
        raise PolicyError(f"checkpoint {ckpt} has weights the model lacks ({unknown[:3]}): was it "
                        "trained from another base model? pass --model")
    with torch.no_grad():
        for name, t in tensors.items():
            params[name].copy_(t.to(params[name].dtype))

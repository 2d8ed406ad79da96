"""The sampling backends as one table: each entry says how to load a model on it, how a
learner's weights reach it, how a run's checkpoint is applied to it for evaluation, and where it
runs. Every caller (``spadework run``, ``design``, ``generate``, ``serve``, ``eval``, the loop's
weight sync) goes through :func:`backend`; adding a backend is a module with its ``Policy`` and
one :func:`register` call::

    from spadework.policy.backends import Backend, register

    register(Backend("mine", load=load_mine, sync=lambda policy, learner: MySync(policy)))

The built-in entries import their backend inside the functions below, so that naming or
validating a backend loads neither torch nor llama.cpp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadework.errors import ConfigError, PolicyError
from spadework.policy.hf import load_hf_policy
from spadework.policy.llamacpp_load import load_llamacpp_policy
from spadework.policy.sync import InProcessSync, LlamaCppLoraSync
from spadework.settings.run import BACKENDS


@dataclass(frozen=True)
class LoadOptions:
    """What a command may ask of a backend when it loads a model; a backend reads the fields
    it has a use for. ``device``: cpu or cuda[:N] (a CPU-only backend refuses another);
    ``threads``, ``kv_type``, ``weights``, ``flash_attn``: the llama.cpp engine's (see
    :func:`~spadework.policy.llamacpp_load.load_llamacpp_policy`)."""

    max_batch_size: int = 16
    context_length: int | None = None
    device: str = "cpu"
    threads: int | None = None
    kv_type: str = "f16"
    weights: str = "bf16"
    cache_dir: Path | None = None
    flash_attn: bool = True


@dataclass(frozen=True)
class Backend:
    """One sampling backend.

    ``load(model, options)``: a ``Policy`` for a registry name, folder or hub id (None: the
    default model). ``sync(policy, learner)``: the ``WeightSync`` that moves the learner's weights
    into a policy it loaded (None: a policy of this backend cannot be trained into).
    ``checkpoint(policy, ckpt)``: a run's checkpoint folder applied to a policy it loaded, for
    evaluation (None: evaluate checkpoints with another backend). ``cpu_only``: it refuses a
    ``device`` other than cpu. ``about``: one line for ``--help`` and errors."""

    name: str
    load: Callable[[str | Path | None, LoadOptions], Any]
    sync: Callable[[Any, Any], Any] | None = None
    checkpoint: Callable[[Any, Path], None] | None = None
    cpu_only: bool = False
    about: str = ""


_TABLE: dict[str, Backend] = {}


def register(entry: Backend) -> Backend:
    """Add (or replace) a backend in the table; its name becomes valid wherever a backend is
    named (``--backend``, ``backend = ...`` in a config file)."""
    if not entry.name or not entry.name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"a backend needs a name of letters, digits, - and _, got {entry.name!r}")
    _TABLE[entry.name] = entry
    if entry.name not in BACKENDS:
        BACKENDS.append(entry.name)
    return entry


def backend(name: str) -> Backend:
    """The table's entry for ``name``; a ConfigError naming the choices otherwise.

    >>> backend("llamacpp").cpu_only, backend("hf").cpu_only
    (True, False)
    >>> backend("vllm-please")
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: unknown backend 'vllm-please'; choose one of hf, llamacpp
    """
    if name not in _TABLE:
        raise ConfigError(f"unknown backend {name!r}; choose one of {', '.join(_TABLE)}")
    return _TABLE[name]


def load(name: str, model: str | Path | None = None, options: LoadOptions | None = None) -> Any:
    """A policy of backend ``name`` for ``model`` (see :class:`Backend`)."""
    entry, options = backend(name), options or LoadOptions()
    if entry.cpu_only and options.device != "cpu":
        raise ConfigError(f"the {name} backend runs on the CPU; got device {options.device!r} "
                          "(use backend 'hf' on a GPU)")
    return entry.load(model, options)


def owner(policy: Any) -> Backend | None:
    """The entry whose backend loaded ``policy`` (its ``backend`` attribute), or None."""
    return _TABLE.get(getattr(policy, "backend", None) or "")


def weight_sync_for(policy: Any, learner: Any) -> Any:
    """The ``WeightSync`` that moves ``learner``'s weights into ``policy`` (the sampler): the
    one its backend's entry in :mod:`spadework.policy.backends` makes (``hf``:
    :class:`InProcessSync`; ``llamacpp``: :class:`LlamaCppLoraSync`). A policy outside the table
    that samples from the module the learner trains (its ``model`` is the learner's) gets
    :class:`InProcessSync`. An ``OpenAIPolicy`` needs a server-side setup (see
    :class:`VLLMLoraSync`), so it is refused here with that advice.
    """
    entry = owner(policy)
    if entry is not None and entry.sync is not None:
        return entry.sync(policy, learner)
    if type(policy).__name__ == "OpenAIPolicy":
        raise ConfigError("an OpenAI-compatible sampler needs a server-side sync: build "
                          "VLLMLoraSync(base_url, adapter_dir, policy=...) yourself")
    return _sync_in_process(policy, learner)


# -- the built-in backends ---------------------------------------------------------------------

def _load_hf(model: str | Path | None, o: LoadOptions) -> Any:
    return load_hf_policy(model, device=o.device, max_batch_size=o.max_batch_size,
                          context_length=o.context_length, cache_dir=o.cache_dir)


def _sync_in_process(policy: Any, learner: Any) -> Any:
    """:class:`~spadework.policy.sync.InProcessSync` for a policy that samples from the module
    the learner trains; a ConfigError for any other."""
    if getattr(policy, "model", None) is not learner.model:
        raise ConfigError(f"no weight sync for a {type(policy).__name__} whose module is not the "
                          "learner's; build the Learner on learner_policy(policy) "
                          "(spadework.policy.load)")
    return InProcessSync(policy)


def _checkpoint_hf(policy: Any, ckpt: Path) -> None:
    # here: train.checkpoint imports this table
    from spadework.train.checkpoint import apply_checkpoint

    apply_checkpoint(policy, ckpt)


def _load_llamacpp(model: str | Path | None, o: LoadOptions) -> Any:
    return load_llamacpp_policy(model, max_batch_size=o.max_batch_size,
                                context_length=o.context_length, threads=o.threads,
                                kv_type=o.kv_type, weights=o.weights, cache_dir=o.cache_dir,
                                flash_attn=o.flash_attn)


def _sync_llamacpp(policy: Any, learner: Any) -> Any:
    return LlamaCppLoraSync(policy)


def _checkpoint_llamacpp(policy: Any, ckpt: Path) -> None:
    """A run's LoRA checkpoint into a ``LlamaCppPolicy``: the adapter is loaded onto the
    engine's transformers twin and pushed across by the run's own weight sync."""
    # here: train.checkpoint imports this table
    from spadework.train.checkpoint import apply_checkpoint

    if not (ckpt / "adapter").is_dir():
        raise PolicyError(f"{ckpt} is a full fine-tune (no adapter/): evaluate it with --backend hf")
    twin = load_hf_policy(policy.hf_dir, context_length=policy.context_length)
    apply_checkpoint(twin, ckpt, merge=False)
    LlamaCppLoraSync(policy).push_model(twin.model)


register(Backend("hf", _load_hf, _sync_in_process, _checkpoint_hf,
                 about="transformers: any model, on a CPU or a GPU, trains in place"))
register(Backend("llamacpp", _load_llamacpp, _sync_llamacpp, _checkpoint_llamacpp, cpu_only=True,
                 about="llama.cpp: fast CPU sampling of registry models, LoRA synced in"))


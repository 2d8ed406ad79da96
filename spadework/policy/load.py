"""One factory for every local sampling backend, and the learner's trainable twin of it.

The run loop picks a backend by name and gets three things that fit together::

    from spadework.policy.load import load_policy, learner_policy
    from spadework.train import Learner, weight_sync_for

    policy = load_policy(cfg.backend, cfg.model, max_batch_size=16, context_length=2048)
    learner = Learner(learner_policy(policy), train_cfg)   # trains LoRA on an HF model
    sync = weight_sync_for(policy, learner)                # InProcessSync or LlamaCppLoraSync
    ...                                                    # after every learner.step(...)
    sync.push(learner)                                     # and once after learner.load(...)

``hf``: the transformers backend; it is its own trainable model (``learner_policy`` returns it,
and the sync only checks that). ``llamacpp``: samples from the registry model's quantised GGUF in
llama.cpp (:mod:`spadework.policy.llamacpp`); ``learner_policy`` loads the converted fp32 folder
of the same GGUF with transformers, and each push moves the LoRA adapter across.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spadework.errors import ConfigError
from spadework.policy import backends
from spadework.policy.hf import load_hf_policy
from spadework.policy.openai import OpenAIPolicy
from spadework.settings.run import DEFAULT_BACKEND, split_endpoint


def load_policy(
    backend: str = DEFAULT_BACKEND, model: str | Path | None = None, *, max_batch_size: int = 16,
    context_length: int | None = None, device: str = "cpu", threads: int | None = None,
    kv_type: str = "f16", weights: str = "bf16", cache_dir: Path | None = None,
    flash_attn: bool = True,
) -> Any:
    """A ``Policy`` of ``backend`` (a name in :mod:`spadework.policy.backends`' table) for
    ``model`` (registry name, folder; ``None``: the default).

    ``device`` is for ``hf`` (``llamacpp`` runs on the CPU); ``threads``, ``kv_type``,
    ``weights`` and ``flash_attn`` are for ``llamacpp`` (see ``load_llamacpp_policy``). Raises
    ``ConfigError`` for an unknown backend, ``PolicyError`` when the model cannot be loaded.
    """
    return backends.load(backend, model, backends.LoadOptions(
        max_batch_size=max_batch_size, context_length=context_length, device=device,
        threads=threads, kv_type=kv_type, weights=weights, cache_dir=cache_dir,
        flash_attn=flash_attn))


def learner_policy(policy: Any, *, device: str = "cpu") -> Any:
    """The policy a ``Learner`` trains for ``policy``: ``policy`` itself when it holds its own
    trainable module (``HFPolicy``, or any policy with a ``model`` and a ``pad_token_id``), else
    the transformers copy of the sampler's model (loaded from its converted folder)."""
    if hasattr(policy, "model") and hasattr(policy, "pad_token_id"):
        return policy
    hf_dir = getattr(policy, "hf_dir", None)
    if hf_dir is None:
        raise ConfigError(f"a {type(policy).__name__} has no trainable twin; train with "
                          "backend 'hf' or 'llamacpp'")
    return load_hf_policy(hf_dir, device=device, context_length=policy.context_length)


def load_endpoint(spec: str, *, api_key: str | None = None) -> Any:
    """An ``OpenAIPolicy`` for ``http(s)://HOST:PORT/v1#MODEL`` (see :func:`split_endpoint`)."""
    return OpenAIPolicy(*split_endpoint(spec), api_key=api_key)

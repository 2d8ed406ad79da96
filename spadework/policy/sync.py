"""Moving the learner's weights to the sampler.

``WeightSync.push(learner)`` is called by the loop after each learner step and before the next
sampling. Three implementations:

- :class:`InProcessSync`: the sampler *is* the learner's module (``HFPolicy.model`` was wrapped
  in place), so nothing moves; ``push`` only checks that this is still true.
- :class:`VLLMLoraSync`: a vLLM server with runtime LoRA loading (start it with
  ``--enable-lora --max-lora-rank R`` and the environment variable
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``). ``push`` saves the adapter to
  ``<adapter_dir>/<prefix>-<step>`` (a folder the *server* must be able to read: same machine or
  a shared file system), POSTs ``/v1/load_lora_adapter``, points the given ``OpenAIPolicy`` at the
  new adapter name, then unloads the previous adapter. Full fine-tuning has no adapter; a server
  then needs a restart on the saved model, which this module does not do.
- :class:`LlamaCppLoraSync`: a ``LlamaCppPolicy`` in this process. ``push`` writes the learner's
  LoRA matrices as a GGUF adapter (F32, scaling folded in; :mod:`spadework.policy.gguf_lora`)
  and swaps it in on top of the unchanged quantised base. Never a merge into the quantised
  weights: re-quantising every update would round small updates away and drift the base.

:func:`spadework.policy.backends.weight_sync_for` picks the one that fits a sampler (the
backend table says which).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from spadework.errors import ConfigError, PolicyError
from spadework.policy.gguf_lora import BaseShape, lora_pairs, write_adapter
from spadework.policy.http import HTTPFailure, exchange


@runtime_checkable
class WeightSync(Protocol):
    """Makes the sampler use the learner's current weights. ``push`` returns only when the next
    sampling call will see them, and raises ``PolicyError`` when it cannot."""

    def push(self, learner: Any) -> None: ...


class InProcessSync:
    """For a learner that trains the sampler's own module (``HFPolicy``)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def push(self, learner: Any) -> None:
        if self.policy.model is not learner.model:
            raise PolicyError("the policy samples from a different module than the learner trains; "
                              "build the Learner on this policy (it wraps policy.model in place)")


class VLLMLoraSync:
    """Loads each new LoRA adapter into a running vLLM server; see the module docstring.

    ``policy``: an ``OpenAIPolicy`` (or anything with a ``model`` attribute) whose model name is
    switched to the newly loaded adapter after each push.
    """

    def __init__(self, base_url: str, adapter_dir: str | Path, *, prefix: str = "spadework",
                 policy: Any = None, api_key: str | None = None, timeout_s: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[: -len("/v1")]
        self.adapter_dir = Path(adapter_dir)
        self.prefix = prefix
        self.policy = policy
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.loaded: str | None = None

    def push(self, learner: Any) -> None:
        if not learner.cfg.lora:
            raise ConfigError("VLLMLoraSync needs a LoRA learner (lora=True); a full fine-tune has "
                              "no adapter to load")
        name = f"{self.prefix}-{learner.steps}"
        folder = learner.save_adapter(self.adapter_dir / name).resolve()
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
        previous, self.loaded = self.loaded, name
        if self.policy is not None:
            self.policy.model = name
        if previous is not None and previous != name:
            self._post("/v1/unload_lora_adapter", {"lora_name": previous})

    def _post(self, path: str, body: dict[str, Any]) -> str:
        try:
            raw = exchange("POST", self.base_url + path, body, api_key=self.api_key,
                           timeout_s=self.timeout_s)
        except HTTPFailure as e:
            hint = (" (is the server started with --enable-lora and "
                    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True?)" if e.status in (400, 404) else "")
            raise PolicyError(f"{e}{hint}") from e
        return raw.decode("utf-8", "replace")


class LlamaCppLoraSync:
    """Pushes the learner's LoRA adapter into a ``LlamaCppPolicy``; see the module docstring.

    ``adapter_dir`` holds the adapter files (a private temporary folder when not given; the
    policy reads each file once, when it loads it). ``last_seconds`` is the cost of the last
    push (extract, write, load), for the loop's metrics.
    """

    def __init__(self, policy: Any, adapter_dir: str | Path | None = None) -> None:
        self.policy = policy
        self.base = BaseShape.from_gguf(policy.gguf)
        self._tmp = None if adapter_dir else tempfile.TemporaryDirectory(prefix="spadework-lora-")
        self.adapter_dir = Path(adapter_dir or self._tmp.name)
        self.adapter_dir.mkdir(parents=True, exist_ok=True)
        self.last_seconds = 0.0

    def push(self, learner: Any) -> None:
        if not learner.cfg.lora:
            raise ConfigError("LlamaCppLoraSync needs a LoRA learner (lora=True): a full "
                              "fine-tune would have to re-quantise the base at every update")
        self.push_model(learner.model)

    def push_model(self, model: Any) -> None:
        """Push the LoRA matrices of ``model`` (a peft ``PeftModel``), learner or not: how a
        saved run checkpoint reaches the engine for evaluation."""
        start = time.perf_counter()
        path = self.adapter_dir / "adapter.gguf"
        write_adapter(path, lora_pairs(model), self.base)
        self.policy.set_lora(path)
        self.last_seconds = time.perf_counter() - start



"""Generation servers on Ray: OpenAI-compatible engines started and placed by spadework, and the
weight sync that loads each learner update into all of them.

Three engines, one contract (``url()``, ``client_model()``, ``load_weights(path, kind)``,
``close()``), each a Ray actor on its bundle:

- :class:`ServeEngine`: transformers behind ``spadework serve`` (``PolicyServer``) in the
  actor's own process, on the CPU or one GPU. Loads an update in place (under the server's lock,
  between requests): a LoRA adapter's tensors into the served peft model, or the whole model's
  state. It returns token ids and logprobs at the sampling temperature before top-k/top-p
  truncation, the convention the learner scores with (``spadework.policy.base``).
- :class:`ProcessEngine` with ``vllm``: ``vllm serve`` as a child process with
  ``VLLM_SERVER_DEV_MODE=1`` (the weight routes) and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=1``. A LoRA
  update is ``POST /v1/load_lora_adapter`` with ``load_inplace`` under one adapter name (a new
  folder per update, so the prefix cache is not reused across weights); full weights are
  ``POST /collective_rpc`` with vLLM's built-in ``reload_weights(weights_path=...)`` followed by
  ``POST /reset_prefix_cache`` (the reload does not clear it). Logprobs: vLLM's default
  (``--logprobs-mode raw_logprobs``) reports the model's distribution *before* temperature,
  which would bias every importance ratio at T != 1; spadework starts it with
  ``processed_logprobs``: after temperature, and after top-k/top-p (renormalised over the kept
  tokens), which leaves a per-token bias of -log(kept mass) in the ratio, small at top-p 0.95
  and shown by the learner's ``importance_ratio`` figures. (vLLM 0.33's source, checked
  2026-12; the routes have changed between releases: pin the version.)
- :class:`ProcessEngine` with ``sglang``: ``python -m sglang.launch_server``. Full weights:
  ``POST /update_weights_from_disk`` (flushes the cache); LoRA: ``/unload_lora_adapter`` then
  ``/load_lora_adapter`` (no ``/v1`` prefix; clients name ``base:adapter``). SGLang's logprobs
  are after temperature, before truncation: the learner's convention. Token ids through its
  OpenAI API need ``return_token_ids`` (releases from mid-2026).

Weight transfer is through files (the learner's rank 0 writes, every engine reads), so on a
multi-node cluster ``[ray] weights_dir`` must be a shared file system; an NCCL broadcast from
the learner into the engines (vLLM's ``/init_weight_transfer_engine``, SGLang's
``/update_weights_from_distributed``) is not built.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from spadework.errors import ConfigError, PolicyError
from spadework.policy.hf import load_hf_policy
from spadework.policy.http import HTTPFailure, exchange
from spadework.policy.serve import PolicyServer

#: The name clients send: the LoRA adapter's name, or the served model's for full weights.
SERVED_NAME = "spadework"


def _node_ip() -> str:
    import ray

    return ray.util.get_node_ip_address()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class ServeEngine:
    """transformers behind ``PolicyServer`` in a Ray actor; see the module docstring.

    ``adapter``: the learner's initial LoRA adapter folder, served from the start (its B
    matrices are zero, so it samples as the base model), so that every update is a load of
    tensors into the same modules. ``max_batch``: rows the server decodes together (requests
    join and leave its batch step by step; 1: one at a time)."""

    def __init__(self, model: str, *, device: str = "cpu", dtype: str | None = None,
                 context_length: int | None = None, adapter: str | None = None,
                 max_batch_size: int = 16, max_batch: int = 1) -> None:
        if device == "cuda":
            import torch

            torch.cuda.set_device(0)
        policy = load_hf_policy(model, device=device, dtype=dtype, context_length=context_length,
                                max_batch_size=max_batch_size)
        if adapter:
            from peft import PeftModel

            policy.model = PeftModel.from_pretrained(policy.model, adapter).eval()
        self.policy = policy
        self.server = PolicyServer(policy, SERVED_NAME, host=_node_ip(), port=0, max_batch=max_batch)
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                        daemon=True)
        self._thread.start()
        self.loads = 0

    def url(self) -> str:
        return self.server.url

    def client_model(self) -> str:
        return SERVED_NAME

    def load_weights(self, path: str, kind: str) -> dict[str, Any]:
        """Load an update written by the learner (``kind``: ``lora`` or ``full``)."""
        from safetensors.torch import load_file

        start = time.monotonic()
        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise PolicyError(f"no .safetensors file in {path}: nothing to load")
        state = {k: v for f in files for k, v in load_file(str(f)).items()}
        with self.server.between_requests():  # never during a request
            if kind == "lora":
                from peft import PeftModel, set_peft_model_state_dict

                if not isinstance(self.policy.model, PeftModel):
                    raise ConfigError("this engine serves no adapter; start it with adapter= (the "
                                      "learner's initial adapter) to load LoRA updates")
                result = set_peft_model_state_dict(self.policy.model, state)
                unexpected = getattr(result, "unexpected_keys", [])
                if unexpected:
                    raise PolicyError(f"the adapter in {path} does not fit the served model "
                                      f"({len(unexpected)} unknown tensors, e.g. {unexpected[0]})")
            elif kind == "full":
                result = self.policy.model.load_state_dict(state, strict=False)
                tied = {"lm_head.weight"} if getattr(self.policy.model.config, "tie_word_embeddings", False) else set()
                missing = [k for k in result.missing_keys if k not in tied]
                if missing or result.unexpected_keys:
                    raise PolicyError(f"the weights in {path} do not fit the served model (missing "
                                      f"{missing[:3]}, unknown {result.unexpected_keys[:3]})")
            else:
                raise ConfigError(f"load_weights kind is lora or full, got {kind!r}")
        self.loads += 1
        return {"seconds": round(time.monotonic() - start, 3), "loads": self.loads}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ProcessEngine:
    """``vllm serve`` or SGLang's server as a child process of a Ray actor that holds the
    bundle's GPUs; see the module docstring. Raises PolicyError with the log's tail when the
    server does not come up within ``start_timeout_s``."""

    def __init__(self, engine: str, model: str, *, gpus: int, dtype: str, context_length: int,
                 adapter: str | None = None, lora_rank: int = 16, log_dir: str | None = None,
                 start_timeout_s: float = 1200.0) -> None:
        if engine not in ("vllm", "sglang"):
            raise ConfigError(f"ProcessEngine runs vllm or sglang, got {engine!r}")
        self.engine, self.adapter = engine, adapter
        self.host, self.port = _node_ip(), _free_port()
        env = dict(os.environ)
        if engine == "vllm":
            env.update(VLLM_SERVER_DEV_MODE="1", VLLM_ALLOW_RUNTIME_LORA_UPDATING="1")
            cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
                   "--host", self.host, "--port", str(self.port), "--dtype", dtype,
                   "--max-model-len", str(context_length), "--tensor-parallel-size", str(gpus),
                   "--logprobs-mode", "processed_logprobs",
                   "--served-model-name", "base" if adapter else SERVED_NAME]
            if adapter:
                cmd += ["--enable-lora", "--max-lora-rank", str(lora_rank), "--max-loras", "1",
                        "--lora-modules", f"{SERVED_NAME}={adapter}"]
        else:
            cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", model,
                   "--host", self.host, "--port", str(self.port), "--dtype", dtype,
                   "--context-length", str(context_length), "--tp-size", str(gpus),
                   "--served-model-name", "base" if adapter else SERVED_NAME]
            if adapter:
                cmd += ["--enable-lora", "--max-lora-rank", str(lora_rank),
                        "--lora-target-modules", "all", "--lora-paths", f"{SERVED_NAME}={adapter}"]
        self.log = Path(log_dir or "/tmp") / f"spadework-{engine}-{self.port}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PolicyError(f"{engine} exited with {self.proc.returncode} while starting: "
                                  f"{self._tail()}")
            try:
                exchange("GET", f"http://{self.host}:{self.port}/health", timeout_s=5)
                return
            except HTTPFailure:
                pass
            time.sleep(2.0)
        self.close()
        raise PolicyError(f"{engine} did not answer /health within {start_timeout_s:g} s: {self._tail()}")

    def _tail(self, n: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return f"(no log at {self.log})"

    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def client_model(self) -> str:
        if self.adapter and self.engine == "sglang":
            return f"base:{SERVED_NAME}"
        return SERVED_NAME

    def _post(self, path: str, body: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
        try:
            raw = exchange("POST", f"http://{self.host}:{self.port}{path}", body,
                           timeout_s=timeout_s)
        except HTTPFailure as e:
            raise PolicyError(f"{self.engine} {path}: {e}") from e
        text = raw.decode("utf-8", "replace")
        try:
            return json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            return {"text": text}

    def load_weights(self, path: str, kind: str) -> dict[str, Any]:
        start = time.monotonic()
        if self.engine == "vllm" and kind == "lora":
            self._post("/v1/load_lora_adapter", {"lora_name": SERVED_NAME, "lora_path": path,
                                                 "load_inplace": True})
        elif self.engine == "vllm":
            self._post("/collective_rpc", {"method": "reload_weights",
                                           "kwargs": {"weights_path": path}})
            for _ in range(30):  # refused while cache blocks are still in use
                if self._post("/reset_prefix_cache", {}).get("success", True):
                    break
                time.sleep(1.0)
        elif kind == "lora":
            self._post("/unload_lora_adapter", {"lora_name": SERVED_NAME})
            self._post("/load_lora_adapter", {"lora_name": SERVED_NAME, "lora_path": path})
        else:
            reply = self._post("/update_weights_from_disk", {"model_path": path})
            if reply.get("success") is False:
                raise PolicyError(f"sglang refused the weights in {path}: {reply.get('message')}")
        return {"seconds": round(time.monotonic() - start, 3)}

    def close(self) -> None:
        import signal

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


class EngineSync:
    """``WeightSync`` for a Ray learner and its engines: rank 0 writes the update into
    ``weights_dir/step-N`` and every engine loads it; the ``keep`` newest folders stay (a
    server may read a folder lazily), older ones are removed."""

    def __init__(self, engines: list[Any], weights_dir: str | Path, *, keep: int = 2) -> None:
        self.engines, self.weights_dir, self.keep = engines, Path(weights_dir), keep
        self.last_seconds = 0.0

    def push(self, learner: Any) -> None:
        import ray

        start = time.monotonic()
        folder = self.weights_dir / f"step-{learner.steps:06d}"
        path, kind = learner.export(folder)
        ray.get([e.load_weights.remote(path, kind) for e in self.engines])
        old = sorted(self.weights_dir.glob("step-*"))[: -self.keep]
        for f in old:
            shutil.rmtree(f, ignore_errors=True)
        self.last_seconds = time.monotonic() - start

"""``[ray]``: how a run spreads over a Ray cluster (``spadework run --ray``).

A frozen dataclass like every other section; importing it needs no Ray. The cluster shape
(``nodes``, ``gpus_per_node``, ``cpus_per_node``) is what ``--dry-run`` plans against; a real
run places the same bundles on the cluster it joins and prints where they landed.
"""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError

ENGINES = ("serve", "vllm", "sglang")


@dataclass(frozen=True)
class RayConfig:
    """Ray settings; see docs/cluster.md.

    ``enabled``: run on Ray (``--ray``). ``address``: the cluster to join (``auto``, ``HOST:PORT``
    or ``ray://HOST:PORT``); None starts a local one on 127.0.0.1 for the run's lifetime.
    ``rollout_workers``: actors that play the iteration's episodes, each with its own sandbox
    fork server, against the generation servers. ``engine``: the generation server, ``serve``
    (transformers behind ``spadework serve``, CPU or one GPU), ``vllm`` or ``sglang`` (GPU, each
    started as its own OpenAI-compatible server process); ``generation_servers`` of them,
    ``gpus_per_server`` GPUs each (tensor parallel; 0: CPU). ``learner_workers``: data-parallel
    replicas of the learner (gloo on CPU, NCCL with ``gpus_per_learner = 1``); ``fsdp``: they
    split the weights, gradients and optimizer state (FSDP) instead of each holding them all, for
    a model whose full fine-tune does not fit one device. ``weights_dir``:
    where the learner writes the weights each engine loads after an update (a folder every node
    can read: a shared file system on a multi-node cluster; default ``RUN_DIR/weights``).
    ``dtype``: of the learner's and the engines' weights (``auto``: float32 on CPU, bfloat16 on
    GPUs).
    """

    enabled: bool = False
    address: str | None = None
    rollout_workers: int = 2
    engine: str = "serve"
    generation_servers: int = 1
    gpus_per_server: int = 0
    learner_workers: int = 1
    gpus_per_learner: int = 0
    fsdp: bool = False
    cpus_per_rollout_worker: float = 1.0
    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_node: int | None = None
    weights_dir: str | None = None
    dtype: str = "auto"

    def __post_init__(self) -> None:
        for name in ("rollout_workers", "generation_servers", "learner_workers", "nodes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"[ray] {name} must be an integer >= 1, got {value!r}")
        for name in ("gpus_per_server", "gpus_per_learner", "gpus_per_node"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"[ray] {name} must be an integer >= 0, got {value!r}")
        if self.engine not in ENGINES:
            raise ConfigError(f"[ray] engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.engine != "serve" and self.gpus_per_server < 1:
            raise ConfigError(f"[ray] engine = {self.engine!r} runs on GPUs: set gpus_per_server >= 1 "
                              "(or engine = \"serve\" for a CPU generation server)")
        if self.engine == "serve" and self.gpus_per_server > 1:
            raise ConfigError("[ray] engine = \"serve\" runs one model on one device: gpus_per_server "
                              "must be 0 or 1 (tensor parallel needs engine = \"vllm\" or \"sglang\")")
        if self.gpus_per_learner > 1:
            raise ConfigError("[ray] gpus_per_learner must be 0 (CPU) or 1: each data-parallel "
                              "replica holds the whole model on one device")
        if not self.cpus_per_rollout_worker > 0:
            raise ConfigError(f"[ray] cpus_per_rollout_worker must be > 0, got {self.cpus_per_rollout_worker!r}")
        if self.cpus_per_node is not None and self.cpus_per_node < 1:
            raise ConfigError(f"[ray] cpus_per_node must be >= 1 or unset, got {self.cpus_per_node!r}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ConfigError(f"[ray] dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")

    def torch_dtype(self, on_gpu: bool) -> str:
        """The weights' dtype name on a CPU or GPU process."""
        return self.dtype if self.dtype != "auto" else ("bfloat16" if on_gpu else "float32")

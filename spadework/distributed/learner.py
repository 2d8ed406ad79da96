"""The learner on Ray: data-parallel replicas of ``spadework.train.Learner`` on actors.

Each :class:`LearnerWorker` builds its trainable policy in its own process (on its GPU when it
has one), joins a ``torch.distributed`` process group with the others (gloo on CPU, NCCL on
GPUs; rank 0's node address and a free port there are the rendezvous) and wraps it in a
``Learner`` with ``DataParallel(rank, world)``: every replica gets the whole batch, runs its
share of the micro-batches and the gradients are summed in one all-reduce, so all replicas take
the same step (``spadework.train.parallel.DataParallel``). With ``shard`` (``[ray] fsdp``) the
replicas split the weights, gradients and AdamW moments (FSDP) instead of each holding them all:
how a model too large for one GPU's memory trains. :class:`RayLearner` is the driver's
handle and meets the loop's ``Trainer`` contract (``step``, ``save``, ``load``): checkpoints are
written by rank 0 into the run directory (on a multi-node cluster a file system every node
sees) and restored into every replica, so resume works as in one process.

Why actors and not Ray Train's ``TorchTrainer``: a ``TorchTrainer.fit()`` runs one training
function to its end and owns the loop, while here the loop owns the iteration (design, play,
reward, then one update) and the model must stay loaded between updates; verl and OpenRLHF
hold their learners on long-lived Ray actors for the same reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from spadework.distributed.cluster import stop_actors
from spadework.errors import ConfigError
from spadework.train.grpo import Learner
from spadework.train.parallel import DataParallel


class LearnerWorker:
    """One data-parallel replica (wrapped with ``ray.remote`` by :class:`RayLearner`)."""

    def __init__(self, build: Callable[[], Any], cfg: Any, rank: int, world: int,
                 shard: bool = False) -> None:
        self.build, self.cfg, self.rank, self.world, self.shard = build, cfg, rank, world, shard
        self.learner: Any = None

    def address(self) -> tuple[str, int]:
        """This node's address and a free port on it (rank 0's are the rendezvous)."""
        import socket

        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def setup(self, master: str, port: int, backend: str) -> dict[str, Any]:
        import torch
        import torch.distributed as dist

        if backend == "nccl":
            torch.cuda.set_device(0)  # Ray gives each replica its own GPU as device 0
        if self.world > 1:
            dist.init_process_group(backend, init_method=f"tcp://{master}:{port}", rank=self.rank,
                                    world_size=self.world, timeout=timedelta(minutes=30))
        self.learner = Learner(self.build(), self.cfg,
                               dp=DataParallel(self.rank, self.world, shard=self.shard))
        return {"rank": self.rank, "pid": os.getpid(),
                "device": str(next(self.learner.model.parameters()).device)}

    def step(self, samples: Sequence[Any]) -> dict[str, Any]:
        return self.learner.step(samples)  # progress stays on the worker: the driver sees the end

    def steps(self) -> int:
        return self.learner.steps

    def save(self, directory: str) -> str:
        return str(self.learner.save(directory))

    def load(self, directory: str) -> None:
        self.learner.load(directory)

    def export(self, directory: str) -> tuple[str, str]:
        """The current weights in the format an engine loads: a peft adapter folder for a LoRA
        learner (``"lora"``), else the whole model's safetensors folder (``"full"``)."""
        if self.learner.cfg.lora:
            return str(self.learner.save_adapter(directory)), "lora"
        self.learner.save_model(directory)
        tok = getattr(self.learner.policy, "tokenizer", None)
        if self.learner.writes and hasattr(tok, "save_pretrained"):
            tok.save_pretrained(directory)
        return str(directory), "full"

    def trainable_state(self) -> dict[str, Any]:
        return {n: t.detach().to("cpu").clone() for n, t in self.learner.trainable_state().items()}

    def score(self, prompt_ids: Sequence[int], output_ids: Sequence[int], temperature: float) -> list[float]:
        """Teacher-forced logprobs of ``output_ids`` under this replica's weights (the sync
        probe: what an engine that holds the same weights reports when it samples them)."""
        return self.learner.score(prompt_ids, output_ids, temperature)

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


class RayLearner:
    """The driver's handle on ``workers`` :class:`LearnerWorker` replicas; see the module
    docstring. ``options(k)`` gives replica ``k``'s actor options (resources, bundle)."""

    def __init__(self, build: Callable[[], Any], cfg: Any, workers: int, *,
                 options: Callable[[int], dict[str, Any]] = lambda k: {"num_cpus": 1},
                 backend: str = "gloo", shard: bool = False) -> None:
        import ray

        if backend not in ("gloo", "nccl"):
            raise ConfigError(f"the learner's process group backend is gloo or nccl, got {backend!r}")
        self.cfg, self.shard = cfg, shard and workers > 1
        cls = ray.remote(LearnerWorker)
        self.workers = [cls.options(**options(k)).remote(build, cfg, k, workers, self.shard)
                        for k in range(workers)]
        master, port = ray.get(self.workers[0].address.remote())
        self.replicas = ray.get([w.setup.remote(master, port, backend) for w in self.workers])

    def _all(self, method: str, *args: Any) -> list[Any]:
        import ray

        return ray.get([getattr(w, method).remote(*args) for w in self.workers])

    @property
    def steps(self) -> int:
        import ray

        return ray.get(self.workers[0].steps.remote())

    def step(self, samples: Sequence[Any], progress: Any = None) -> dict[str, Any]:
        """One step on every replica; the figures are the whole batch's (rank 0's).
        ``progress`` is not reported across processes (the step's end is)."""
        return self._all("step", list(samples))[0]

    def _rank0(self, method: str, *args: Any) -> Any:
        """Rank 0's answer; every replica takes part when the weights are sharded (gathering
        them, or a forward pass, is collective)."""
        import ray

        if self.shard:
            return self._all(method, *args)[0]
        return ray.get(getattr(self.workers[0], method).remote(*args))

    def save(self, directory: str | Path) -> Path:
        return Path(self._rank0("save", str(directory)))

    def load(self, directory: str | Path) -> None:
        self._all("load", str(directory))

    def export(self, directory: str | Path) -> tuple[str, str]:
        return tuple(self._rank0("export", str(directory)))

    def score(self, prompt_ids: Sequence[int], output_ids: Sequence[int], temperature: float) -> list[float]:
        return self._rank0("score", list(prompt_ids), list(output_ids), temperature)

    def trainable_state(self, rank: int = 0) -> dict[str, Any]:
        import ray

        if self.shard:
            return self._all("trainable_state")[rank]
        return ray.get(self.workers[rank].trainable_state.remote())

    def close(self) -> None:
        stop_actors(self.workers)
        self.workers = []

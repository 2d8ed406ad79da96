"""A run on Ray: the parts ``loop.run`` takes, built on a cluster, and torn down after.

The loop is the same code path as on one machine; only its parts differ. The driver (this
process) runs the loop, the archive and the checker's sandbox; the agent's and designer's
sampling goes to the generation servers through ``OpenAIPolicy`` (token ids in, token ids and
logprobs out); the play stage hands its episodes to the rollout workers (``player``); the learner
is a group of data-parallel replicas (``RayLearner``) and its sync loads every update into every
engine (``EngineSync``). With one rollout worker, one engine and one replica it is the CPU run
spread over four processes.

Order of start: the learner first (when the run trains LoRA, its initial adapter, which samples
as the base model, is what every engine serves from the start, so that each update only swaps
tensors), then the engines, then the rollout workers, each client pointed at one engine (worker
``k`` at engine ``k mod n``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from spadework.archive import Archive, archive_path
from spadework.distributed.cluster import PlacementGroup, connect, stop_actors
from spadework.distributed.engines import EngineSync, ProcessEngine, ServeEngine
from spadework.distributed.learner import RayLearner
from spadework.distributed.plan import format_plan, placement_plan
from spadework.distributed.rollout import RayPlayer
from spadework.errors import ConfigError
from spadework.loop import uses_math_verify
from spadework.policy.hf import load_hf_policy
from spadework.policy.openai import OpenAIPolicy
from spadework.policy.registry import resolve_model
from spadework.progress import Progress, Silent
from spadework.stage import Models


def openai_client(url: str, model: str, tokenizer_dir: str, context_length: int,
                  concurrency: int = 16) -> Any:
    """The policy a rollout worker or the driver samples with: token-in, token-out completions
    against one engine, the prompt rendered by the model's own chat template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=Path(tokenizer_dir).is_dir())
    return OpenAIPolicy(url, model, mode="completions", tokenizer=tok, context_length=context_length,
                        concurrency=concurrency, timeout_s=600.0)


def needs_math_verify(run_dir: Path) -> bool:
    """Whether the run's archive (if any) makes the sandbox preload math_verify."""
    db = archive_path(run_dir)
    if not db.exists():
        return False
    with Archive.open(db, create=False) as a:
        return uses_math_verify(a)


def plan_text(cfg: Any) -> str:
    """The placement plan ``--dry-run`` prints for ``cfg``."""
    return format_plan(cfg.ray, placement_plan(cfg.ray, learner=cfg.train), model=cfg.model, preset=cfg.preset,
                       full_fine_tune=cfg.train and not cfg.learner.lora)


@contextlib.contextmanager
def ray_parts(cfg: Any, run_dir: Path, *, policy_factory: Callable[[], Any] | None = None,
              progress: Progress | None = None) -> Iterator[Models]:
    """Start (or join) the cluster and yield the models ``loop.run`` takes (``policy``,
    ``learner``, ``sync``, ``player``); everything started is stopped on the way out.

    ``policy_factory`` (a picklable zero-argument callable; tests pass a scripted policy) builds
    the policy of the driver and of every rollout worker instead of engines and clients; such a
    run cannot train."""
    rc, progress = cfg.ray, progress or Silent()
    if not cfg.shared:
        raise ConfigError("--ray runs one model for both roles (the paper's setting); a separate "
                          "designer model is not placed on the cluster yet: drop designer_model / "
                          "agent_model, or run without --ray")
    if policy_factory is not None and cfg.train:
        raise ConfigError("--policy (a scripted policy) has no weights to train: add --no-train")
    progress.stage("setup", f"Ray: {'joining ' + rc.address if rc.address else 'starting a local cluster'}")
    started = connect(rc)
    group = learner = player = None
    engines: list[Any] = []
    try:
        group = PlacementGroup(rc, learner=cfg.train, engines=policy_factory is None)
        for p, node in group.placed():
            progress.stage("setup", f"{p.role} {p.index} on {node}"
                           + (f" (GPUs {','.join(map(str, p.gpus))} of the plan)" if p.gpus else ""))
        sync = None
        if policy_factory is not None:
            builds: list[Callable[[], Any]] = [policy_factory]
        else:
            builds, learner, engines = _engines_and_learner(cfg, run_dir, group, progress)
            if learner is not None:
                weights = Path(rc.weights_dir) if rc.weights_dir else run_dir / "weights"
                sync = EngineSync(engines, weights)
        limits = {"episode_seconds": cfg.episode_seconds, "math_verify": needs_math_verify(run_dir)}
        progress.stage("setup", f"starting {rc.rollout_workers} rollout workers")
        player = RayPlayer(builds, limits, rc.rollout_workers,
                           options=lambda k: group.options("rollout", k))
        yield Models(builds[0](), learner, sync, player=player)
    finally:
        for part in (player, learner):
            if part is not None:
                part.close()
        stop_actors(engines)
        if group is not None:
            group.remove()
        if started:
            import ray

            ray.shutdown()


def _engines_and_learner(cfg: Any, run_dir: Path, group: Any,
                         progress: Progress) -> tuple[list[Callable[[], Any]], Any, list[Any]]:
    """The learner (when the run trains), the engines, and one client builder per engine."""
    import ray

    rc = cfg.ray
    model = str(resolve_model(cfg.model)[0])
    context = cfg.play.context_tokens
    learner, adapter = None, None
    if cfg.train:
        on_gpu = rc.gpus_per_learner > 0
        progress.stage("setup", f"starting {rc.learner_workers} learner replica(s) "
                       f"({'NCCL' if on_gpu else 'gloo'}{', FSDP' if rc.fsdp else ''})")
        build = functools.partial(load_hf_policy, model, device="cuda" if on_gpu else "cpu",
                                  dtype=rc.torch_dtype(on_gpu), context_length=context)
        learner = RayLearner(build, cfg.learner, rc.learner_workers,
                             options=lambda k: group.options("learner", k),
                             backend="nccl" if on_gpu else "gloo", shard=rc.fsdp)
        if cfg.learner.lora:
            weights = Path(rc.weights_dir) if rc.weights_dir else run_dir / "weights"
            adapter, _ = learner.export(weights / f"step-{learner.steps:06d}")
    progress.stage("setup", f"starting {rc.generation_servers} {rc.engine} generation server(s)")
    engines = []
    for k in range(rc.generation_servers):
        opts = group.options("generation", k)
        if rc.engine == "serve":
            on_gpu = rc.gpus_per_server > 0
            engines.append(ray.remote(ServeEngine).options(**opts).remote(
                model, device="cuda" if on_gpu else "cpu", dtype=rc.torch_dtype(on_gpu),
                context_length=context, adapter=adapter, max_batch_size=cfg.policy_batch,
                max_batch=cfg.policy_batch))
        else:
            engines.append(ray.remote(ProcessEngine).options(**opts).remote(
                rc.engine, model, gpus=rc.gpus_per_server, dtype=rc.torch_dtype(True),
                context_length=context, adapter=adapter, lora_rank=cfg.learner.lora_r,
                log_dir=str(run_dir / "logs")))
    urls = ray.get([e.url.remote() for e in engines])
    names = ray.get([e.client_model.remote() for e in engines])
    builds = [functools.partial(openai_client, u, n, model, context) for u, n in zip(urls, names)]
    return builds, learner, engines

"""What the command line runs that needs a model: load it, open the run's archive and sandbox,
call one library function. Kept beside ``spadework.cli`` so that the library below never loads a
model on its own initiative, and every check that needs no model runs before one is loaded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import spadework.policy.load as policy_load  # by attribute: tests replace load_policy
from spadework.archive import Archive, archive_path, views
from spadework.config import RunConfig, is_endpoint
from spadework.default_corpus import load_default_corpus
from spadework.designer.run import DesignConfig, DesignSummary, design_environments, summarize
from spadework.distributed.run import ray_parts
from spadework.env.checker import CheckConfig
from spadework.errors import ConfigError
from spadework.loggers import check_available
from spadework.loop import run
from spadework.policy.backends import weight_sync_for
from spadework.policy.registry import check_model
from spadework.progress import Progress
from spadework.sandbox import Limits, Sandbox
from spadework.settings.run import DEFAULT_BACKEND
from spadework.skills import skills_for
from spadework.stage import Models
from spadework.train.grpo import Learner

if TYPE_CHECKING:
    from spadework.loop import IterationMetrics
    from spadework.policy.base import Policy


def design_into_run_dir(run_dir: str | Path, *, n: int, cfg: DesignConfig, max_turns: int,
                        model: str | None = None, seed: int = 0, device: str = "cpu",
                        backend: str = DEFAULT_BACKEND,
                        progress: Callable[[int, int], None] | None = None) -> DesignSummary:
    """``spadework design``: load the model, the default corpus and a sandbox, design ``n``
    slots into ``run_dir/archive.sqlite`` as the iteration after the last one designed there,
    checked under the turn limit ``max_turns`` they are meant to be played with, and summarise."""
    corpus = load_default_corpus()
    policy = policy_load.load_policy(backend, model, device=device)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    with Archive.open(archive_path(run_dir)) as archive, Sandbox(Limits()) as sandbox:
        last = views.last_attempt_iteration(archive)
        iteration = 0 if last is None else last + 1
        start = time.monotonic()
        results = design_environments(policy, sandbox, archive, corpus, n=n, iteration=iteration,
                                      run_seed=seed, skills=skills_for(cfg.setting), cfg=cfg,
                                      check_config=CheckConfig(max_turns=max_turns),
                                      progress=progress)
        return summarize(results, time.monotonic() - start, iteration)


def run_command(cfg: RunConfig, run_dir: Path, *, resume: bool,
                policy_factory: Callable[[], Policy] | None = None,
                progress: Progress | None = None) -> list[IterationMetrics]:
    """``spadework run``: the checks that need no model first (the run directory's state, the
    models' names), then load each role's model on the sampling backend (``policy_factory``
    replaces it; tests pass a scripted one) and, for each model that trains, the learner on its
    trainable twin and the weight sync between them (:func:`load_roles`), then run the loop.
    With ``[ray] enabled`` the loop's parts are built on a Ray cluster instead (engines, rollout
    workers, learner replicas) and stopped when the run ends."""
    check_run_dir(run_dir, resume=resume)
    check_available(cfg.log)  # a logger asked for but not installed fails before a model loads
    if policy_factory is None:
        for role in ("agent", "designer"):
            if not is_endpoint(cfg.role_model(role)):
                check_model(cfg.role_model(role))
    if cfg.ray.enabled:  # the same loop; its parts on a Ray cluster (spadework.distributed.run)

        with ray_parts(cfg, run_dir, policy_factory=policy_factory, progress=progress) as models:
            return run(cfg, run_dir, models, resume=resume, progress=progress)
    return run(cfg, run_dir, load_roles(cfg, policy_factory), resume=resume, progress=progress)


def load_roles(cfg: RunConfig, policy_factory: Callable[[], Policy] | None = None) -> Models:
    """The models of ``cfg``'s roles as ``loop.run`` takes them: ``policy`` (the agent's, and the
    designer's when shared) and, for a designer of its own, ``designer``; a learner and weight
    sync for each model that trains (``policy_factory`` replaces loading a model)."""
    def load(role: str) -> Policy:
        if policy_factory is not None:
            return policy_factory()
        if is_endpoint(cfg.role_model(role)):
            return policy_load.load_endpoint(cfg.role_model(role))
        return policy_load.load_policy(cfg.backend, cfg.role_model(role),
                                       max_batch_size=cfg.policy_batch, threads=cfg.engine_threads,
                                       weights=cfg.engine_weights(role),
                                       flash_attn=role in cfg.flash_attn)

    def trained(policy: Policy) -> tuple[Learner, Any]:
        learner = Learner(policy_load.learner_policy(policy), cfg.learner)
        return learner, weight_sync_for(policy, learner)

    policy = load("agent")
    learner, sync = trained(policy) if cfg.roles_trained_on_policy(shared=cfg.shared) else (None, None)
    if cfg.shared:
        return Models(policy, learner, sync)
    designer = load("designer")
    designer_learner, designer_sync = (trained(designer) if "designer" in cfg.trained_roles
                                       else (None, None))
    return Models(policy, learner, sync, designer, designer_learner, designer_sync)


def check_run_dir(run_dir: Path, *, resume: bool) -> None:
    """Refuse, before anything is loaded, a run directory that is a file, a ``--resume`` of a
    directory holding no run, and a fresh run in a directory that holds one. A ``--resume`` of a
    run stopped before it finished a stage (killed while it checked the starters or loaded the
    model) starts it from the beginning: nothing of it is lost, and the command that resumes
    any other run resumes this one too."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--run-dir {run_dir} is a file; give a directory for the run")
    db = archive_path(run_dir)
    if not db.exists():
        if resume:
            raise ConfigError(f"--resume: {run_dir} holds no run (no {db.name}); start one without "
                              "--resume or give the folder of the run to continue")
        return
    with Archive.open(db, create=False) as archive:
        prog = archive.load_state("progress")
    if prog is not None and not resume:
        raise ConfigError(f"{run_dir} already holds a run (iteration {prog['iteration']}); pass "
                          "--resume to continue it or choose another --run-dir")

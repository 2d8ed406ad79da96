"""The records the loop's stages pass each other, and the protocols of the live parts it drives.

``Models`` holds the roles' loaded policies, learners and syncs, and ``RunContext`` the run's
live parts (archive, sandbox, those models); a stage returns a ``StageResult`` (figures, the
``Plan`` after it, its archive writes); an iteration ends as one ``IterationMetrics`` line (the
figures' records are in :mod:`spadework.figures`). Kept apart from ``loop.py`` so that the loop
reads as the stages and their order only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from spadework.archive import Archive
from spadework.config import RunConfig
from spadework.corpus import Corpus
from spadework.default_corpus import load_default_corpus
from spadework.figures import IterationMetrics, StageFigures  # noqa: F401 (re-exported)
from spadework.policy.base import BaseWeights, Policy
from spadework.policy.sync import WeightSync
from spadework.progress import Progress, Silent
from spadework.train.batch import Sample


class EnvSandbox(Protocol):
    """Where environment code runs (:class:`spadework.sandbox.Sandbox`)."""

    def load(self, code: str, *, max_turns: int, class_name: str | None = None) -> Any: ...


class Trainer(Protocol):
    """What the loop needs of a learner (:class:`spadework.train.Learner`)."""

    def step(self, samples: Sequence[Sample], progress: Callable[[int, int], None] | None = None
             ) -> dict[str, Any]: ...

    def save(self, directory: str | Path) -> Path: ...

    def load(self, directory: str | Path) -> None: ...


@dataclass(frozen=True)
class RoleTrainer:
    """One trained model of a run: its ``learner``, the roles whose samples it trains on, the
    ``sync`` that moves its weights to the sampler, and ``root``, where its checkpoints go."""

    name: str  # "policy" (the shared model), "agent" or "designer" (a role's own model)
    roles: tuple[str, ...]
    learner: Trainer
    sync: WeightSync | None
    root: Path


@dataclass(frozen=True)
class Models:
    """The loaded models of a run, as ``loop.run`` takes them (``commands.load_roles`` builds
    them on one machine, ``distributed.run.ray_parts`` on a Ray cluster).

    ``policy`` plays the agent, and designs too unless ``designer`` (a separate designer model)
    is given. ``learner`` trains ``policy``'s weights (``spadework.train.Learner(
    learner_policy(policy), cfg.learner)``) on the samples of every role the run trains that it
    plays; ``designer_learner`` trains a separate designer's. ``sync`` / ``designer_sync``
    (``spadework.policy.backends.weight_sync_for(policy, learner)``) move a learner's weights to
    its sampler after each update and after a restore; None when the policy samples from the
    learner's own module. ``player`` plays the agent's episodes instead of ``rollout.play`` in
    this process (``spadework.distributed.rollout.RayPlayer``: ``player(jobs, cfg, seed=,
    progress=)``).
    """

    policy: Policy
    learner: Trainer | None = None
    sync: WeightSync | None = None
    designer: Policy | None = None
    designer_learner: Trainer | None = None
    designer_sync: WeightSync | None = None
    player: Callable[..., list[Any]] | None = None

    def without_training(self) -> Models:
        """The same models with no learner and no sync (a run with ``train = false``)."""
        return replace(self, learner=None, sync=None, designer_learner=None, designer_sync=None)


@dataclass
class RunContext:
    """The live parts of a run (not a record: it holds the archive, sandbox and models).

    ``models`` are the run's policies, learners and syncs (:class:`Models`); ``corpus()`` loads
    the grounding corpus on first use; ``trained_through`` is, per trainer name, the last
    iteration its loaded checkpoint includes.
    """

    cfg: RunConfig
    run_dir: Path
    archive: Archive
    models: Models
    sandbox: EnvSandbox
    corpus: Callable[[], Corpus] = field(default=lambda: default_corpus())
    progress: Progress = field(default_factory=Silent)
    trained_through: dict[str, int] = field(default_factory=dict)

    def role_policy(self, role: str) -> Policy:
        """What plays ``role``: the separate designer model, else the shared ``policy``, with
        its adapter switched off for a frozen role while the other role trains it."""
        m = self.models
        if role == "designer" and m.designer is not None:
            return m.designer
        if role in self.cfg.frozen and m.learner is not None and m.designer is None:
            return BaseWeights(m.policy)
        return m.policy

    def trainers(self) -> list[RoleTrainer]:
        """The models this run trains, each with the roles it learns from (none without
        training, or when no learner was given)."""
        m = self.models
        shared, out = m.designer is None, []
        roles = self.cfg.roles_trained_on_policy(shared=shared)
        if m.learner is not None and roles:
            out.append(RoleTrainer("policy" if shared else "agent", roles, m.learner, m.sync,
                                   self.run_dir / "checkpoints"))
        if not shared and m.designer_learner is not None and "designer" in self.cfg.trained_roles:
            out.append(RoleTrainer("designer", ("designer",), m.designer_learner,
                                   m.designer_sync, self.run_dir / "checkpoints" / "designer"))
        return out


@dataclass(frozen=True)
class Plan:
    """What one iteration's stages hand each other: whether the designer ran and what it
    accepted (``fresh``), the environments to play (``pool``), the level each plays at
    (``levels``: env id -> level, 1 when absent) and their hints (env id -> hint, None for an
    env's own per-instance hint() or none)."""

    iteration: int
    regenerated: bool = False
    fresh: tuple[str, ...] = ()
    pool: tuple[str, ...] = ()
    hints: tuple[tuple[str, str | None], ...] = ()
    levels: tuple[tuple[str, int], ...] = ()

    def level(self, env_id: str) -> int:
        return dict(self.levels).get(env_id, 1)

    def to_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "regenerated": self.regenerated,
                "fresh": list(self.fresh), "pool": list(self.pool), "hints": dict(self.hints),
                "levels": dict(self.levels)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        return cls(int(d["iteration"]), bool(d.get("regenerated", False)),
                   tuple(d.get("fresh", ())), tuple(d.get("pool", ())),
                   tuple((k, v) for k, v in (d.get("hints") or {}).items()),
                   tuple((k, int(v)) for k, v in (d.get("levels") or {}).items()))


@dataclass(frozen=True)
class StageResult:
    """What a stage returns: its figures (stored with its completion record, summarised into the
    iteration's metrics), the plan after it, and its archive writes (run in the stage's
    transaction)."""

    figures: StageFigures
    plan: Plan
    write: Callable[[Archive], None] = lambda archive: None


def default_corpus() -> Corpus:
    return load_default_corpus()

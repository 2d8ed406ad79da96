"""The self-play loop: the one place that composes the stages, top to bottom like the diagram.

``run_iteration(ctx, i)`` runs the stages of :data:`STAGES` in order: design (on regeneration
iterations; validation happens inside) -> pool (curriculum; held-out starters never) -> hints
(for the pool) -> play both arms on the same seeds (after replaying each environment's
solution() on exactly those instances, dropping any it loses) -> reward (agent returns,
per-environment win rate and regret, designer credit) -> train (unless disabled; the sampler
gets the new weights) -> eval (held-out suites, when ``[eval] every`` says so) -> store (the
iteration's metrics). Each stage is a function
``(ctx, it) -> StageResult``: the figures it reports, the :class:`Plan` the later stages read,
and what it writes. ``run(...)`` opens the archive and sandbox, checks the starter library under
the run's turn limit, restores the learner when resuming, and runs the iterations.

Resume contract: each stage runs inside one archive transaction together with the record that it
completed (``progress`` state: iteration, stage, per-stage figures, plan). A kill at any moment
leaves every stage wholly stored or not at all; ``--resume`` skips the committed stages of the
interrupted iteration and redoes the rest. Redone work replays deterministically (seeds from
(run seed, iteration, ...)) and is stored under natural keys (episodes by (iteration, env, arm,
play index), attempts by (iteration, slot, attempt)), so nothing is lost or counted twice. With
training, the learner's checkpoint (with the step's figures) is written before the train stage
commits and names the iteration it includes, so a kill between the two neither trains twice nor
loses the step's figures.

Decisions: instance seeds mix the iteration into the run seed, so a replayed environment meets
new instances each iteration while both arms of one iteration share theirs. Hints are written for
the pool (after it is chosen), not for every design, because only played environments need one.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from spadework import curriculum as cur
from spadework import metrics as M
from spadework import rss
from spadework.archive import Archive, archive_path, views
from spadework.config import RunConfig
from spadework.cores import free_cores
from spadework.corpus import Corpus
from spadework.designer import design_environments
from spadework.designer.credit import (
    credit_attempts,
    designer_assembly,
    env_credit,
    reference_designer_scale,
    skill_trackers,
)
from spadework.env.solvable import solution_losses
from spadework.errors import ConfigError, PolicyError
from spadework.evaluate.inrun import eval_due, evaluate_policy
from spadework.figures import (
    STAGES,
    DesignFigures,
    EvalFigures,
    HintFigures,
    IterationFigures,
    IterationMetrics,
    PlayFigures,
    PoolFigures,
    StageFigures,
    TrainFigures,
)
from spadework.hints import write_hints
from spadework.levels import next_level
from spadework.library import checked_starters, is_held_out
from spadework.loggers import open_loggers
from spadework.paths import room_to_write
from spadework.policy.base import Policy
from spadework.progress import Progress, Silent
from spadework.reward import LearningPotential
from spadework.rollout import level_kwarg, play, regret_jobs
from spadework.sandbox import Limits, Sandbox
from spadework.seeding import derive_rng, derive_seed
from spadework.skills import skills_for
from spadework.stage import (  # noqa: F401 (RunContext, Models: the loop's API, re-exported)
    Models,
    Plan,
    RoleTrainer,
    RunContext,
    StageResult,
    Trainer,
    default_corpus,
)
from spadework.train import checkpoint  # by attribute: tests replace save_rotating
from spadework.train.batch import ROLES, agent_assembly
from spadework.types import EnvSource, Episode

METRICS_FILE = "metrics.jsonl"
#: The archive state of each skill's learning-potential tracker (skill -> its dict; "" for
#: environments without a skill). Runs from before the trackers were per skill stored theirs
#: per environment under "learning_potential", which is left as it is and not read.
LP_STATE = "learning_potential_skills"


@dataclass
class _Iteration:
    """What one ``run_iteration`` call knows so far (local to the call)."""

    i: int
    plan: Plan
    state: cur.CurriculumState
    figures: IterationFigures
    archive: Archive
    _episodes: list[Episode] | None = None
    _envs: tuple[tuple[str, ...], list[EnvSource]] | None = None

    def episodes(self) -> list[Episode]:
        if self._episodes is None:
            self._episodes = self.archive.episodes(iteration=self.i)
        return self._episodes

    def envs(self) -> list[EnvSource]:
        """The pool's environments (read once per pool)."""
        if self._envs is None or self._envs[0] != self.plan.pool:
            out = []
            for env_id in self.plan.pool:
                rec = self.archive.get_env(env_id)
                if rec is None:
                    raise ConfigError(f"pool names environment {env_id[:12]} which is not in the archive")
                out.append(rec.source)
            self._envs = (self.plan.pool, out)
        return self._envs[1]


# -- stages --------------------------------------------------------------------------------------

def _design(ctx: RunContext, it: _Iteration) -> StageResult:
    cc, plan = ctx.cfg.curriculum, it.plan
    if not cur.is_regeneration(it.i, cc.regen_interval) or cc.designs_per_regen == 0:
        return StageResult(DesignFigures(), plan)
    skills = cur.active_skills(skills_for(ctx.cfg.setting), it.state.regenerations, cc.skills_per_regen)
    ctx.progress.stage("design", f"{cc.designs_per_regen} slots, skills: {', '.join(s.name for s in skills)}")
    designer = ctx.role_policy("designer")
    threads = _fit_threads(ctx, designer)
    before = _engine_counts(designer)
    try:
        results = design_environments(
            designer, ctx.sandbox, ctx.archive, ctx.corpus(), n=cc.designs_per_regen,
            iteration=it.i, run_seed=ctx.cfg.run_seed, skills=skills, cfg=ctx.cfg.design,
            check_config=ctx.cfg.check, band=(ctx.cfg.reward.lo, ctx.cfg.reward.hi),
            progress=lambda done, total: ctx.progress.advance("design", done, total))
    except PolicyError as e:  # the designer failed as a whole: an iteration without fresh envs
        return StageResult(DesignFigures(regenerated=True, funnel={"policy_error": 1}, error=e.reason),
                           replace(plan, regenerated=True))
    finally:  # the next design stage asks about new documents: nothing cached is of use to it
        engine = _engine_since(designer, before)
        _release(designer)
    attempts = [a for r in results for a in r.attempts]
    fresh = tuple(r.env.env_id for r in results if r.env is not None)
    return StageResult(DesignFigures(regenerated=True, funnel=M.funnel(a.outcome for a in attempts),
                                     tokens=sum(len(a.output_ids) for a in attempts),
                                     engine=_with_threads(engine, threads)),
                       replace(plan, regenerated=True, fresh=fresh))


def _pool(ctx: RunContext, it: _Iteration) -> StageResult:
    cc, a, limit = ctx.cfg.curriculum, ctx.archive, ctx.cfg.play.max_turns
    fresh = it.plan.fresh if it.plan.regenerated else it.state.fresh
    current = a.current_levels() if cc.adapt_levels else {}
    candidates = []
    for rec in a.list_envs(status="accepted", setting=ctx.cfg.setting):
        if rec.report is None or rec.report.max_turns != limit:
            continue  # only what passed the checker under the turn limit it is played with
        if rec.origin == "starter" and is_held_out(rec.name, cc.held_out):
            continue  # held out for evaluation (the library-heldout suite), never trained on
        s = a.env_stats(rec.env_id)
        # the pair to be played is scored: after a level change, by the plays at the new level
        # (if any), not by the win rate that moved it (too easy or out of reach at the old one)
        at = a.env_stats_at(rec.env_id, current.get(rec.env_id, 1)) if cc.adapt_levels else s
        score = cur.candidate_score(at, cc, ctx.cfg.reward)
        candidates.append(cur.Candidate(rec.env_id, score, None if s is None else s.last_played_iteration))
    pool = cur.choose_pool(fresh, candidates, it.i, cc, derive_rng(ctx.cfg.run_seed, it.i, "pool"))
    state = cur.next_state(it.state, regenerated=it.plan.regenerated, fresh=fresh, pool=pool)
    levels = tuple((e, current.get(e, 1)) for e in pool)  # each environment at its own level
    return StageResult(PoolFigures(size=len(pool), fresh=len(set(fresh) & set(pool)),
                                   levels={e[:12]: lv for e, lv in levels}),
                       replace(it.plan, pool=tuple(pool), levels=levels),
                       lambda arch: arch.save_state("curriculum", state.to_dict()))


def _hints(ctx: RunContext, it: _Iteration) -> StageResult:
    """Policy-written hints for envs without their own ``hint()``, leak-checked against the
    instances this iteration plays (the same run seed and play count as :func:`_play`)."""
    report = write_hints(ctx.role_policy("designer"), it.envs(), sandbox=ctx.sandbox, archive=ctx.archive,
                         run_seed=derive_seed(ctx.cfg.run_seed, it.i), iteration=it.i,
                         plays=ctx.cfg.plays, max_turns=ctx.cfg.play.max_turns,
                         levels=dict(it.plan.levels))
    figures = HintFigures(written=sum(1 for o in report.outcomes if o.hint), sources=report.sources,
                          leaked=report.leaked)
    return StageResult(figures, replace(it.plan, hints=tuple(report.hints.items())))


def _play(ctx: RunContext, it: _Iteration) -> StageResult:
    """Both arms of every pool environment on the same instances, each instance first replayed
    with the environment's own solution(): one it loses is dropped from both arms and counted
    (about 1.5 ms per instance; the checker saw other seeds than these)."""
    envs, hints = it.envs(), dict(it.plan.hints)
    seed, check = derive_seed(ctx.cfg.run_seed, it.i), ctx.cfg.check
    jobs, unwinnable = [], {}
    for e in envs:
        level = min(it.plan.level(e.env_id), e.levels)
        mine = regret_jobs(e, hints.get(e.env_id), run_seed=seed, plays=ctx.cfg.plays, level=level)
        opener = functools.partial(ctx.sandbox.load, e.code, max_turns=check.max_turns,
                                   class_name=e.class_name, level=level_kwarg(e, level))
        lost = {x.seed for x in solution_losses(opener, sorted({j.seed for j in mine}), check)}
        if lost:
            unwinnable[e.env_id[:12]] = len(lost)
        jobs += [j for j in mine if j.seed not in lost]
    ctx.progress.stage("play", f"{len(jobs)} episodes: {len(envs)} envs x 2 arms x {ctx.cfg.plays} seeds, "
                       f"up to {ctx.cfg.play.max_turns} turns each (progress in turns)"
                       + (f" ({sum(unwinnable.values())} instances dropped: solution() loses them)"
                          if unwinnable else ""))
    engine = None if ctx.models.player else ctx.role_policy("agent")
    threads = _fit_threads(ctx, engine)
    before = _engine_counts(engine)
    player = ctx.models.player or functools.partial(play, engine, ctx.sandbox)
    eps = player(jobs, ctx.cfg.play, seed=derive_seed(ctx.cfg.run_seed, it.i, "play"),
                 progress=lambda done, total: ctx.progress.advance("play", done, total))
    workers = getattr(ctx.models.player, "last", None)
    figures = PlayFigures(
        episodes=len(eps), statuses=M.statuses(eps), tokens=M.output_tokens(eps),
        unwinnable_instances=unwinnable,
        engine=_with_threads(_engine_since(engine, before), threads),
        rollout_workers=dict(workers) if workers else None)
    return StageResult(figures, it.plan, lambda arch: arch.add_episodes(it.i, eps))


def _fit_threads(ctx: RunContext, policy: Any) -> int | None:
    """Set ``policy``'s threads for a stage to the cores free at its start
    (:func:`spadework.cores.free_cores`) when the run's ``threads`` is ``"auto"`` and the engine
    takes a count (llama.cpp's); the count set, or None."""
    if ctx.cfg.threads != "auto" or not callable(getattr(policy, "set_threads", None)):
        return None
    threads = free_cores()
    policy.set_threads(threads)
    return threads


def _with_threads(engine: dict[str, int] | None, threads: int | None) -> dict[str, int] | None:
    """A stage's engine counters with the threads it ran on, where :func:`_fit_threads` set them."""
    return engine if engine is None or threads is None else {**engine, "threads": threads}


def _engine_counts(policy: Any) -> dict[str, int]:
    """The work counters of an engine that keeps them (``COUNTERS``: llama.cpp's) now; {} for
    one that keeps none."""
    return {k: int(getattr(policy, k)) for k in getattr(policy, "COUNTERS", ())}


def _engine_since(policy: Any, before: dict[str, int]) -> dict[str, int] | None:
    """How far each of ``policy``'s work counters moved since ``before`` (its
    :func:`_engine_counts` then); None for an engine that keeps none."""
    return {k: v - before[k] for k, v in _engine_counts(policy).items()} if before else None


def _reward(ctx: RunContext, it: _Iteration) -> StageResult:
    """Score every played env; credit the designer samples waiting for these envs."""
    rc, cc, a = ctx.cfg.reward, ctx.cfg.curriculum, ctx.archive
    levels = {e.env_id: (min(it.plan.level(e.env_id), e.levels), e.levels) for e in it.envs()}
    skills = {e.env_id: e.skill or "" for e in it.envs()}
    scored = [o for o in (M.score_env(e.env_id, it.episodes()) for e in it.envs()) if o]
    rates: dict[str, list[float]] = {}
    for o in scored:
        if o.plays:  # an outcome of no plays (every one failed) has no win rate to observe
            rates.setdefault(skills[o.env_id], []).append(o.win_rate)
    before = {k: LearningPotential.from_dict(v)
              for k, v in (a.load_state(LP_STATE) or {}).items()}
    trackers = skill_trackers(rates, before, rc)
    outcomes, rewards, moves = [], {}, {}
    for o in scored:
        outcomes.append(o)
        rewards[o.env_id] = env_credit(o, rc, trackers.get(skills[o.env_id]))
        level, top = levels[o.env_id]
        if cc.adapt_levels and o.plays:
            moves[o.env_id] = (level, next_level(level, top, o.win_rate, up_at=cc.level_up_at,
                                                 down_at=cc.level_down_at))
    credits = credit_attempts(a.pending_attempts(), rewards, rc, ctx.cfg.design.rejected_first_attempts)

    def write(arch: Archive) -> None:
        for o in outcomes:
            if o.plays:  # every play failed (a hung step): credited, but nothing to record
                arch.record_env_stats(o.env_id, it.i, plays=o.plays, wins=o.wins, regret=o.regret,
                                      level=levels[o.env_id][0])
        for o in outcomes:
            before, after = moves.get(o.env_id, (None, None))
            if after is not None and after != before:
                arch.record_level(o.env_id, it.i, from_level=before, to_level=after,
                                  plays=o.plays, wins=o.wins)
        for key, r in credits:
            arch.set_attempt_reward(key, r)
        arch.save_state(LP_STATE, {k: t.to_dict() for k, t in trackers.items()})

    figures = M.reward_figures(outcomes, rewards, [r for _, r in credits], lo=rc.lo, hi=rc.hi,
                               levels={k: v[0] for k, v in levels.items()},
                               moves={k: v[1] for k, v in moves.items() if v[1] != v[0]})
    return StageResult(figures, it.plan, write)


def _train(ctx: RunContext, it: _Iteration) -> StageResult:
    """One GRPO step per trained model on the samples of the roles it trains (a frozen role's
    designs are credited and consumed, not trained on), its weights synced to its sampler, and
    a checkpoint per trained model."""
    trainers = ctx.trainers()
    if not trainers:
        return StageResult(TrainFigures(note="training is off (--no-train)"), it.plan)
    cfg, a = ctx.cfg, ctx.archive
    _release_samplers(ctx)
    trained = {r for t in trainers for r in t.roles}
    ready = a.ready_attempts()
    keys = [att.key for att in ready]
    agent = agent_assembly(it.episodes(), format_weight=cfg.reward.format_weight,
                           format_shaping=cfg.reward.format_shaping, pack=cfg.learner.pack_turns)
    # the reference's scale counts agent trajectories (192 = 24 envs x 8 plays): episodes, not
    # samples, whose number changes with packing (pack_turns) and with the turns per episode
    scale = cfg.reward.designer_scale or reference_designer_scale(
        agent.episodes, len(ready), cfg.curriculum.regen_interval)
    designer = designer_assembly(ready if "designer" in trained else [],
                                 scheme=cfg.reward.designer_scheme, scale=scale)
    samples = [*designer.samples, *(agent.samples if "agent" in trained else [])]
    step: dict[str, Any] = {}
    learners: dict[str, dict[str, Any]] = {}
    for t in trainers:
        mine = _train_one(ctx, it, t, [s for s in samples if s.role in t.roles])
        learners[t.name] = mine
        _merge_step(step, mine)
    figures = TrainFigures(
        agent_samples=sum(s.role == "agent" for s in samples), agent_episodes=agent.episodes,
        designer_samples=len(designer.samples), designer_scale=scale,
        dropped={**agent.dropped, **designer.dropped}, packed_turns=agent.packed_turns,
        frozen=tuple(cfg.frozen) or None, learners=learners if len(trainers) > 1 else None,
        note=step.pop("note", None), step=step)
    return StageResult(figures, it.plan, lambda arch: arch.mark_trained(keys, it.i))


def _release_samplers(ctx: RunContext) -> None:
    """Free the samplers' KV caches before the learner's step: the cached conversations would
    not survive the weight sync after it (the designer's is freed after each design stage)."""
    for p in {id(p): p for p in (ctx.models.policy, ctx.models.designer) if p is not None}.values():
        _release(p)


def _release(policy: Policy) -> None:
    """Free ``policy``'s KV cache where it has one (``LlamaCppPolicy.release``), also inside a
    ``BaseWeights``. Measured on cpu-qwen (a run's resident memory sampled every second): the
    agent's cache was 1 GiB, and the designer's, kept from a design stage into the play stage
    after it, set the run's peak (8.2 GiB, against 7.2 in the play stages without it)."""
    release = getattr(policy, "release", None)
    if callable(release):
        release()


def _train_one(ctx: RunContext, it: _Iteration, t: RoleTrainer, samples: list[Any]) -> dict[str, Any]:
    """``t``'s step on ``samples`` (or why none), its sync, and its checkpoint for iteration
    ``it.i``; the step's figures."""
    if ctx.trained_through.get(t.name, -1) >= it.i:  # killed after the checkpoint, before the commit
        return checkpoint.checkpoint_meta(t.root).get("figures", {})
    figures: dict[str, Any] = {}
    if not samples:
        figures["note"] = "no update: nothing to train on"
    elif ctx.cfg.learner.kl_coef == 0 and all(s.advantage == 0 for s in samples):
        figures["note"] = "no update: every advantage is 0 (each group scored alike), no gradient"
    else:
        who = "" if t.name == "policy" else f"{t.name} model: "
        ctx.progress.stage("train", f"{who}{len(samples)} samples "
                           f"({sum(s.role == 'designer' for s in samples)} designer)")
        figures.update(t.learner.step(
            samples, progress=lambda done, total: ctx.progress.advance("train", done, total)))
        ctx.progress.stage("train", who + "loss " + ", ".join(
            f"{role} {figures[f'loss_{role}']:+.4f}" for role in ROLES if figures.get(f"loss_{role}") is not None))
        if t.sync is not None:
            start = time.monotonic()
            t.sync.push(t.learner)  # the sampler plays the next iteration with these weights
            figures["sync_seconds"] = round(time.monotonic() - start, 3)
    # a checkpoint per trained iteration, update or not, so that resume always finds this one
    keep = (it.i + 1) % ctx.cfg.checkpoint_every == 0 or it.i == ctx.cfg.iterations - 1
    checkpoint.save_rotating(t.learner, t.root, it.i, keep=keep, extra={"figures": figures})
    ctx.trained_through[t.name] = it.i
    return figures


def _merge_step(figures: dict[str, Any], step: Mapping[str, Any]) -> None:
    """Fold one model's step figures into the stage's: a role's figures come from the model
    that trains it (the others report None for it), the first model's scalars win."""
    for key, value in step.items():
        if key == "importance_ratio" and isinstance(figures.get(key), dict):
            figures[key] = {r: figures[key].get(r) if figures[key].get(r) is not None else v
                            for r, v in {**figures[key], **value}.items()}
        elif figures.get(key) is None:
            figures[key] = value


def _eval(ctx: RunContext, it: _Iteration) -> StageResult:
    """The ``[eval]`` suites with the current weights, when due; results under
    ``RUN_DIR/eval/iter_XXXX`` and in this iteration's metrics."""
    if not eval_due(ctx.cfg.eval, it.i):
        return StageResult(EvalFigures(), it.plan)
    ctx.progress.stage("eval", f"{', '.join(ctx.cfg.eval.suites)} ({ctx.cfg.eval.preset} preset)")
    figures = evaluate_policy(ctx.role_policy("agent"), ctx.cfg.eval, ctx.run_dir / "eval" / f"iter_{it.i:04d}",
                              sandbox=ctx.sandbox, held_out=ctx.cfg.curriculum.held_out)
    return StageResult(EvalFigures.from_dict({**figures, "due": True}), it.plan)


def _store(ctx: RunContext, it: _Iteration) -> StageResult:
    line = M.summarize(it.i, it.figures, it.episodes(), preset=ctx.cfg.preset)
    return StageResult(StageFigures(), it.plan, lambda arch: arch.record_iteration(it.i, line.values))


_STAGE_FUNCTIONS: dict[str, Callable[[RunContext, _Iteration], StageResult]] = {
    "design": _design, "pool": _pool, "hints": _hints, "play": _play, "reward": _reward,
    "train": _train, "eval": _eval, "store": _store,
}


# -- one iteration -------------------------------------------------------------------------------

def run_iteration(ctx: RunContext, i: int) -> IterationMetrics:
    """Run (or finish, after a kill) iteration ``i``; see the module docstring."""
    a = ctx.archive
    prog = a.load_state("progress") or {"iteration": -1, "stage": "store"}
    resumed = prog["iteration"] == i
    done = STAGES.index(prog["stage"]) if resumed else -1
    it = _Iteration(i, _plan(a, prog) if resumed else Plan(i),
                    cur.CurriculumState.from_dict(a.load_state("curriculum")),
                    IterationFigures.from_dict(prog.get("figures", {})) if resumed
                    else IterationFigures(), a)
    for index, name in enumerate(STAGES):
        if index <= done:
            ctx.progress.stage(name, f"iteration {i}: committed before a restart")
            continue
        ctx.progress.stage(name, f"iteration {i}")
        start = time.monotonic()
        with a.transaction():  # the stage's writes and its completion record, or nothing
            with rss.PeakMeter() as meter:
                result = _STAGE_FUNCTIONS[name](ctx, it)
                result.write(a)
            setattr(it.figures, name, replace(result.figures,
                                              seconds=round(time.monotonic() - start, 3),
                                              peak_rss_mib=meter.peak_mib))
            it.plan = result.plan
            a.save_state("progress", {"iteration": i, "stage": name, "figures": it.figures.to_dict(),
                                      "plan": it.plan.to_dict()})
    write_metrics_file(a, ctx.run_dir)
    return next(r for r in a.iterations() if r.iteration == i).line()


def _plan(archive: Archive, prog: Mapping[str, Any]) -> Plan:
    """The plan stored with the progress record (archives before it was kept there held it as
    its own ``plan`` state)."""
    stored = prog.get("plan") or archive.load_state("plan") or {}
    return Plan.from_dict({"iteration": prog["iteration"], **stored})


def uses_math_verify(archive: Archive) -> bool:
    """Whether accepted environments import math_verify (imported reference games may): the
    sandbox preloads it only then."""
    return views.accepted_code_mentions(archive, "math_verify")


def write_metrics_file(archive: Archive, run_dir: Path) -> Path:
    """Rewrite ``metrics.jsonl`` from the archive: one line per finished iteration, always."""
    path = run_dir / METRICS_FILE
    lines = [json.dumps({"iteration": r.iteration, **r.metrics}) for r in archive.iterations()]
    tmp = path.with_name(path.name + ".tmp")
    with room_to_write(path, "metrics.jsonl"):
        try:
            tmp.write_text("".join(line + "\n" for line in lines))
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
    os.replace(tmp, path)
    return path


# -- a whole run ---------------------------------------------------------------------------------

def run(cfg: RunConfig, run_dir: str | Path, models: Models, *, resume: bool = False,
        progress: Progress | None = None,
        corpus: Callable[[], Corpus] | None = None) -> list[IterationMetrics]:
    """Run ``cfg.iterations`` iterations in ``run_dir`` (archive, ``metrics.jsonl``,
    checkpoints) with ``models`` (:class:`~spadework.stage.Models`: the roles' policies and,
    for each model the run trains, its learner and weight sync); with ``resume``, continue a
    killed or finished run there. Each trained model's learner is needed when ``cfg.train`` and
    is restored from its latest checkpoint when resuming; without ``cfg.train`` the learners
    and syncs given are not used. ``corpus`` loads the grounding corpus (default: the pulled
    default corpus). Raises ConfigError when a trained model has no learner, or when
    ``run_dir`` holds a run and ``resume`` is false, or the other way round.
    """
    trains = cfg.roles_trained_on_policy(shared=models.designer is None)
    if trains and models.learner is None:
        raise ConfigError(f"cfg.train trains the {' and '.join(sorted(trains))} role on this model "
                          "and needs a learner: give Models(policy, learner=spadework.train.Learner("
                          "policy, cfg.learner)), or set train = false")
    if (models.designer is not None and "designer" in cfg.trained_roles
            and models.designer_learner is None):
        raise ConfigError("the separate designer model trains and needs designer_learner= (or "
                          "freeze it: frozen = [\"designer\"])")
    run_dir, progress = Path(run_dir), progress or Silent()
    with Archive.open(archive_path(run_dir)) as archive:
        prog = archive.load_state("progress")
        if prog is not None and not resume:
            raise ConfigError(f"{run_dir} already holds a run (iteration {prog['iteration']}); pass "
                              "--resume to continue it or choose another --run-dir")
        start = 0 if prog is None else prog["iteration"] + (prog["stage"] == "store")
        with Sandbox(Limits(episode_seconds=cfg.episode_seconds, math_verify=uses_math_verify(archive))) as sb:
            with archive.transaction():
                if not archive.starters_checked_at(cfg.play.max_turns):
                    progress.stage("setup", f"checking the starter library at max_turns={cfg.play.max_turns}")
                    archive.import_starter(checked_starters(sb, cfg.check))
                archive.save_state("config", {
                    "preset": cfg.preset, "model": cfg.model, "run_seed": cfg.run_seed,
                    "train": cfg.train, "designer_model": cfg.role_model("designer"),
                    "agent_model": cfg.role_model("agent"), "frozen": list(cfg.frozen)})
            ctx = RunContext(cfg, run_dir, archive,
                             models if cfg.train else models.without_training(), sb,
                             corpus or functools.cache(default_corpus), progress)
            if resume:
                restored = checkpoint.restore_trainers(ctx.trainers(), archive, progress)
                ctx.trained_through.update(restored)
            loggers = open_loggers(cfg.log, run_dir, dataclasses.asdict(cfg))
            try:
                out = []
                for i in range(start, cfg.iterations):
                    out.append(run_iteration(ctx, i))
                    for lg in loggers:  # TensorBoard / W&B when [log] asks
                        lg.log(i, out[-1].to_dict())
            finally:
                for lg in loggers:
                    lg.close()
    return out

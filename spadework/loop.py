"""The self-play loop: the one place that composes the stages, top to bottom like the diagram.

``run_iteration(ctx, i)`` runs, in order: design (on regeneration iterations; validation happens
inside) -> pool (curriculum) -> hints (for the pool) -> play both arms on the same seeds ->
rewards (agent returns, per-environment win rate and regret, designer rewards with delayed
credit) -> train (unless disabled) -> store (iteration metrics). ``run(cfg, ...)`` sets up the
archive, sandbox, policy and learner, and runs iterations, resuming where a killed run stopped.

Resume contract: each stage's writes, together with the record that the stage completed
(``progress`` state: iteration, stage, per-stage figures), are one archive transaction. A kill at
any moment leaves every stage wholly stored or not at all; ``--resume`` skips the committed stages
of the interrupted iteration and redoes the rest. Redone work replays deterministically (seeds
from (run seed, iteration, ...)) and is stored under natural keys (episodes by (iteration, env,
arm, play index), attempts by (iteration, slot, attempt)), so nothing is lost or counted twice.
With training, the learner's checkpoint at ``checkpoints/latest`` is written before the train
stage commits and names the iteration it includes, so a kill between the two does not train twice.

Decisions: instance seeds mix the iteration into the run seed, so a replayed environment meets
new instances each iteration while both arms of one iteration share theirs. Hints are written for
the pool (after it is chosen), not for every design, because only played environments need one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spadework import curriculum as cur
from spadework import metrics as M
from spadework.archive import Archive, archive_path
from spadework.errors import ConfigError, PolicyError
from spadework.reward import LearningPotential
from spadework.rollout import play, regret_jobs
from spadework.seeding import derive_rng, derive_seed
from spadework.types import Episode, EnvSource

STAGES = ("design", "pool", "hints", "play", "reward", "train", "store")
METRICS_FILE = "metrics.jsonl"


@dataclass
class RunContext:
    """The live parts of a run (not a record: it holds the archive, sandbox, policy and learner).

    ``show(stage, text)`` reports progress; ``corpus()`` loads the grounding corpus on first use.
    """

    cfg: Any  # spadework.config.RunConfig
    run_dir: Path
    archive: Archive
    policy: Any
    sandbox: Any
    learner: Any = None
    corpus: Callable[[], Any] = lambda: None
    show: Callable[[str, str], None] = lambda stage, text: None
    trained_through: int = -1  # the last iteration the loaded checkpoint includes


@dataclass(frozen=True)
class IterationMetrics:
    """One line of ``metrics.jsonl``: what an iteration did, by stage."""

    iteration: int
    values: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, **self.values}


# -- progress bookkeeping ------------------------------------------------------------------------

def _progress(archive: Archive) -> dict[str, Any]:
    return archive.load_state("progress") or {"iteration": -1, "stage": "store", "figures": {}}


def _commit(ctx: RunContext, iteration: int, stage: str, figures: dict[str, Any],
            write: Callable[[Archive], None] = lambda a: None) -> None:
    """Write a stage's results and its completion record in one transaction."""
    with ctx.archive.transaction() as a:
        write(a)
        prog = _progress(a)
        done = prog["figures"] if prog["iteration"] == iteration else {}
        a.save_state("progress", {"iteration": iteration, "stage": stage,
                                  "figures": {**done, stage: figures}})


def _plan(archive: Archive, iteration: int) -> dict[str, Any]:
    plan = archive.load_state("plan")
    return plan if plan and plan.get("iteration") == iteration else {"iteration": iteration}


# -- stages --------------------------------------------------------------------------------------

def _design(ctx: RunContext, i: int, state: cur.CurriculumState) -> dict[str, Any]:
    from spadework.designer import design_environments
    from spadework.skills import skills_for

    cc = ctx.cfg.curriculum
    if not cur.is_regeneration(i, cc.regen_interval) or cc.designs_per_regen == 0:
        return {"regenerated": False, "fresh": [], "funnel": {}, "tokens": 0}
    skills = cur.active_skills(skills_for(ctx.cfg.setting), state.regenerations, cc.skills_per_regen)
    ctx.show("design", f"{cc.designs_per_regen} slots, skills: {', '.join(s.name for s in skills)}")
    try:
        results = design_environments(
            ctx.policy, ctx.sandbox, ctx.archive, ctx.corpus(), n=cc.designs_per_regen,
            iteration=i, run_seed=ctx.cfg.run_seed, skills=skills, cfg=ctx.cfg.design,
            check_config=ctx.cfg.check, progress=lambda text: ctx.show("design", text))
    except PolicyError as e:  # the designer failed as a whole: an iteration without fresh envs
        return {"regenerated": True, "fresh": [], "funnel": {"policy_error": 1}, "error": e.reason,
                "tokens": 0}
    attempts = [a for r in results for a in r.attempts]
    return {"regenerated": True, "fresh": [r.env.env_id for r in results if r.env is not None],
            "funnel": M.funnel(a.outcome for a in attempts),
            "tokens": sum(len(a.output_ids) for a in attempts)}


def _pool(ctx: RunContext, i: int, state: cur.CurriculumState, design: dict) -> cur.CurriculumState:
    cc, a = ctx.cfg.curriculum, ctx.archive
    fresh = design["fresh"] if design["regenerated"] else list(state.fresh)
    candidates = []
    for rec in a.list_envs(status="accepted", setting=ctx.cfg.setting):
        if rec.report is None or rec.report.max_turns != ctx.cfg.play.max_turns:
            continue  # only what passed the checker under the turn limit it is played with
        s = a.env_stats(rec.env_id)
        score = None if s is None else cur.env_score(cc.score, s.win_rate, s.regret)
        candidates.append(cur.Candidate(rec.env_id, score, None if s is None else s.last_played_iteration))
    pool = cur.choose_pool(fresh, candidates, i, cc, derive_rng(ctx.cfg.run_seed, i, "pool"))
    return cur.next_state(state, regenerated=design["regenerated"], fresh=fresh, pool=pool)


def _hints(ctx: RunContext, i: int, envs: list[EnvSource]) -> dict[str, str | None]:
    """Policy-written hints for envs without their own ``hint()``, leak-checked against the
    instances this iteration plays (the same run seed and play count as :func:`_play`)."""
    from spadework.hints import hints_for

    return dict(hints_for(ctx.policy, envs, sandbox=ctx.sandbox, archive=ctx.archive,
                          run_seed=derive_seed(ctx.cfg.run_seed, i), iteration=i,
                          plays=ctx.cfg.plays, max_turns=ctx.cfg.play.max_turns))


def _sources(archive: Archive, pool: list[str]) -> list[EnvSource]:
    out = []
    for env_id in pool:
        rec = archive.get_env(env_id)
        if rec is None:
            raise ConfigError(f"pool names environment {env_id[:12]} which is not in the archive")
        out.append(EnvSource(rec.code, rec.class_name, rec.setting, rec.skill, rec.name))
    return out


def _play(ctx: RunContext, i: int, envs: list[EnvSource], hints: dict) -> list[Episode]:
    seed = derive_seed(ctx.cfg.run_seed, i)
    jobs = [j for e in envs for j in regret_jobs(e, hints.get(e.env_id), run_seed=seed,
                                                 plays=ctx.cfg.plays)]
    ctx.show("play", f"{len(jobs)} episodes: {len(envs)} envs x 2 arms x {ctx.cfg.plays} seeds")
    return play(ctx.policy, ctx.sandbox, jobs, ctx.cfg.play, seed=derive_seed(ctx.cfg.run_seed, i, "play"),
                progress=lambda done, total: ctx.show("play", f"{done}/{total} episodes"))


def _rewards(ctx: RunContext, i: int, envs: list[EnvSource], episodes: list[Episode]):
    """Score every played env; credit the designer samples waiting for these envs."""
    from spadework.designer.credit import credit_attempts, env_credit

    rc, a = ctx.cfg.reward, ctx.archive
    lps = a.load_state("learning_potential") or {}
    outcomes, rewards = [], {}
    for e in envs:
        o = M.score_env(e.env_id, episodes)
        if o is not None:
            prev = LearningPotential.from_dict(lps[e.env_id]) if e.env_id in lps else None
            c = env_credit(o, rc, prev)
            outcomes.append(o)
            rewards[o.env_id] = c.reward
            lps[e.env_id] = c.lp.to_dict()
    credits = credit_attempts(a.pending_attempts(), rewards, rc, ctx.cfg.design.rejected_first_attempts)

    def write(arch: Archive) -> None:
        for o in outcomes:
            arch.record_env_stats(o.env_id, i, plays=o.plays, wins=o.wins, regret=o.regret)
        for key, r in credits:
            arch.set_attempt_reward(key, r)
        arch.save_state("learning_potential", lps)

    rates = [o.win_rate for o in outcomes]
    figures = {
        "envs": len(outcomes), "win_rate_histogram": M.histogram(rates),
        "band_share": M.band_share(rates, rc.lo, rc.hi),
        "mean_regret": M.stats([o.regret for o in outcomes])["mean"],
        "designer_reward": M.stats([r for _, r in credits]),
        "designer_credited": len(credits),
        "step_timeouts": sum(o.step_timeout for o in outcomes),
        "per_env": {o.env_id[:12]: {"win_rate": o.win_rate, "regret": o.regret,
                                    "reward": rewards[o.env_id]} for o in outcomes},
    }
    return write, figures


def _train(ctx: RunContext, i: int, episodes: list[Episode]):
    from spadework.designer.credit import designer_assembly, reference_designer_scale
    from spadework.train import batch

    a = ctx.archive
    ready = a.ready_attempts()
    keys = [att.key for att in ready]
    agent = batch.agent_assembly(episodes, format_weight=ctx.cfg.reward.format_weight,
                                 setting=ctx.cfg.setting)
    scale = ctx.cfg.reward.designer_scale or reference_designer_scale(
        len(agent.samples), len(ready), ctx.cfg.curriculum.regen_interval)
    designer = designer_assembly(ready, scheme=ctx.cfg.reward.designer_scheme, scale=scale)
    samples = list(designer.samples) + list(agent.samples)
    figures: dict[str, Any] = {"agent_samples": len(agent.samples),
                               "designer_samples": len(designer.samples),
                               "dropped": {**agent.dropped, **designer.dropped}}
    if ctx.trained_through >= i:
        figures["note"] = "step already in the checkpoint (resumed)"
    elif samples and ctx.cfg.learner.kl_coef == 0 and all(s.advantage == 0 for s in samples):
        figures["note"] = "no update: every advantage is 0 (each group scored alike), no gradient"
    elif samples:
        ctx.show("train", f"{len(samples)} samples ({len(designer.samples)} designer)")
        figures.update(ctx.learner.step(samples))
        ctx.show("train", "loss " + ", ".join(
            f"{role} {figures[f'loss_{role}']:+.4f}" for role in batch.ROLES
            if figures.get(f"loss_{role}") is not None))
        _save_checkpoint(ctx, i, keep=(i + 1) % ctx.cfg.checkpoint_every == 0)
        ctx.trained_through = i
    return (lambda arch: arch.mark_trained(keys, i)), figures


# -- checkpoints and metrics files ---------------------------------------------------------------

def _save_checkpoint(ctx: RunContext, i: int, *, keep: bool) -> Path:
    """``learner.save`` into ``checkpoints/iter_XXXX`` via a temporary folder and a rename, then
    point ``checkpoints/latest.json`` at it; the previous latest goes unless it is a kept one."""
    root = ctx.run_dir / "checkpoints"
    final = root / f"iter_{i:04d}"
    tmp = root / f".tmp-iter_{i:04d}"
    shutil.rmtree(tmp, ignore_errors=True)
    ctx.learner.save(tmp)
    (tmp / "run.json").write_text(json.dumps({"iteration": i, "keep": keep,
                                              "curriculum": ctx.archive.load_state("curriculum")}))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    pointer = root / "latest.json"
    old = json.loads(pointer.read_text()) if pointer.exists() else None
    _atomic_write(pointer, json.dumps({"iteration": i, "dir": final.name}))
    if old and old["dir"] != final.name:
        prev = root / old["dir"]
        meta = prev / "run.json"
        if meta.exists() and not json.loads(meta.read_text()).get("keep"):
            shutil.rmtree(prev, ignore_errors=True)
    return final


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_metrics_file(archive: Archive, run_dir: Path) -> Path:
    """Rewrite ``metrics.jsonl`` from the archive: one line per finished iteration, always."""
    path = run_dir / METRICS_FILE
    lines = [json.dumps({"iteration": r.iteration, **r.metrics}) for r in archive.iterations()]
    _atomic_write(path, "".join(line + "\n" for line in lines))
    return path


# -- one iteration -------------------------------------------------------------------------------

def run_iteration(ctx: RunContext, i: int) -> IterationMetrics:
    """Run (or finish, after a kill) iteration ``i``; see the module docstring."""
    a = ctx.archive
    prog = _progress(a)
    done = STAGES.index(prog["stage"]) if prog["iteration"] == i else -1
    started = {"t": time.monotonic()}

    def todo(name: str) -> bool:
        started["t"] = time.monotonic()
        run = STAGES.index(name) > done
        ctx.show(name, f"iteration {i}" if run else f"iteration {i}: committed before a restart")
        return run

    def commit(name: str, figures: dict | None, write=lambda arch: None) -> None:
        if figures is not None:
            figures = {**figures, "seconds": round(time.monotonic() - started["t"], 3)}
        _commit(ctx, i, name, figures, write)

    state = cur.CurriculumState.from_dict(a.load_state("curriculum"))
    if todo("design"):
        with a.transaction():  # the designer archives as it goes: a kill must undo all of it,
            d = _design(ctx, i, state)  # or a redo would find its own designs as duplicates
            commit("design", d, lambda arch: arch.save_state("plan", {"iteration": i, **d}))
    design = _plan(a, i)
    if todo("pool"):
        new = _pool(ctx, i, state, design)
        commit("pool", {"size": len(new.pool), "fresh": len(set(new.fresh) & set(new.pool))},
               lambda arch: (arch.save_state("curriculum", new.to_dict()),
                             arch.save_state("plan", {**design, "pool": list(new.pool)})))
    plan = _plan(a, i)
    envs = _sources(a, plan["pool"])
    if todo("hints"):
        with a.transaction():  # hints_for may store hints; they commit with the stage
            hints = _hints(ctx, i, envs)
            commit("hints", {"written": sum(1 for h in hints.values() if h)},
                   lambda arch: arch.save_state("plan", {**plan, "hints": hints}))
    hints = _plan(a, i).get("hints", {})
    if todo("play"):
        eps = _play(ctx, i, envs, hints)
        commit("play", {"episodes": len(eps), "statuses": M.statuses(eps),
                        "tokens": M.output_tokens(eps)}, lambda arch: arch.add_episodes(i, eps))
    episodes = a.episodes(iteration=i)
    if todo("reward"):
        write, fig = _rewards(ctx, i, envs, episodes)
        commit("reward", fig, write)
    if todo("train"):
        write, fig = _train(ctx, i, episodes) if ctx.learner is not None else (lambda arch: None, None)
        commit("train", fig, write)
    if todo("store"):
        values = _summary(ctx, _progress(a)["figures"], episodes)
        _commit(ctx, i, "store", {}, lambda arch: arch.record_iteration(i, values))
        write_metrics_file(a, ctx.run_dir)
    rec = next(r for r in a.iterations() if r.iteration == i)
    return IterationMetrics(i, rec.metrics)


def _summary(ctx: RunContext, figures: dict, episodes: list[Episode]) -> dict:
    """The iteration's metrics line from the per-stage figures stored as the stages committed."""
    from spadework.reward import episode_return
    from spadework.train.batch import ROLES

    def ret(arm: str) -> float | None:
        return M.stats([episode_return(e.rewards, e.terminated) for e in episodes if e.arm == arm])["mean"]

    def fmt(arm: str) -> float | None:
        return M.stats([M.format_share(e, ctx.cfg.setting) for e in episodes if e.arm == arm])["mean"]

    design, play_f, rew = figures.get("design", {}), figures.get("play", {}), figures.get("reward", {})
    train = figures.get("train") or {}
    return {
        "losses": {role: train.get(f"loss_{role}") for role in ROLES},
        "rewards": {"agent": ret("no_hint"), "designer": (rew.get("designer_reward") or {}).get("mean")},
        "agent_format_share": {"no_hint": fmt("no_hint"), "hint": fmt("hint")},
        "preset": ctx.cfg.preset, "regenerated": design.get("regenerated", False),
        "validity_funnel": design.get("funnel", {}), "pool": figures.get("pool", {}),
        "episodes": play_f.get("episodes"), "statuses": play_f.get("statuses"),
        "agent_return": {"no_hint": ret("no_hint"), "hint": ret("hint")},
        "win_rate_histogram": rew.get("win_rate_histogram"), "band_share": rew.get("band_share"),
        "mean_regret": rew.get("mean_regret"), "designer_reward": rew.get("designer_reward"),
        "per_env": rew.get("per_env"), "train": figures.get("train"),
        "tokens": {"design": design.get("tokens", 0), "play": play_f.get("tokens", 0)},
        "seconds": {n: (figures.get(n) or {}).get("seconds") for n in STAGES[:-1]},
    }


# -- a whole run ---------------------------------------------------------------------------------

def run(cfg: Any, run_dir: str | Path, *, resume: bool = False, policy: Any = None,
        show: Callable[[str, str], None] | None = None) -> list[IterationMetrics]:
    """Run ``cfg.iterations`` iterations in ``run_dir`` (archive, ``metrics.jsonl``,
    checkpoints); with ``resume``, continue a killed or finished run there. ``policy`` replaces
    the configured model (tests pass a scripted one). Raises ConfigError when ``run_dir`` holds
    a run and ``resume`` is false."""
    from spadework.library import checked_starters
    from spadework.sandbox import Limits, Sandbox

    run_dir = Path(run_dir)
    show = show or (lambda stage, text: None)
    with Archive.open(archive_path(run_dir)) as archive:
        prog = archive.load_state("progress")
        if prog is not None and not resume:
            raise ConfigError(f"{run_dir} already holds a run (iteration {prog['iteration']}); pass "
                              "--resume to continue it or choose another --run-dir")
        start = 0 if prog is None else prog["iteration"] + (prog["stage"] == "store")
        with Sandbox(Limits(episode_seconds=cfg.episode_seconds)) as sb:
            with archive.transaction():
                if not archive.starters_checked_at(cfg.play.max_turns):
                    show("setup", f"checking the starter library at max_turns={cfg.play.max_turns}")
                    archive.import_starter(checked_starters(sb, cfg.check))
                archive.save_state("config", {"preset": cfg.preset, "model": cfg.model,
                                              "run_seed": cfg.run_seed, "train": cfg.train})
            show("setup", f"sandbox up; loading model {cfg.model or '(default)'}")
            ctx = _context(cfg, run_dir, archive, sb, policy, resume, show)
            out = [run_iteration(ctx, i) for i in range(start, cfg.iterations)]
            if ctx.learner is not None and out:
                _save_checkpoint(ctx, out[-1].iteration, keep=True)
    return out


def _context(cfg, run_dir: Path, archive: Archive, sb, policy, resume: bool, show) -> RunContext:
    cache: dict[str, Any] = {}

    def corpus() -> Any:
        if "c" not in cache:
            from spadework.default_corpus import load_default_corpus
            cache["c"] = load_default_corpus()
        return cache["c"]

    if policy is None:
        from spadework.policy.hf import load_hf_policy
        policy = load_hf_policy(cfg.model, max_batch_size=cfg.policy_batch)
    ctx = RunContext(cfg, run_dir, archive, policy, sb, corpus=corpus, show=show)
    if cfg.train:
        from spadework.train.grpo import Learner
        ctx.learner = Learner(policy, cfg.learner)
        pointer = run_dir / "checkpoints" / "latest.json"
        if resume and pointer.exists():
            latest = json.loads(pointer.read_text())
            ctx.learner.load(run_dir / "checkpoints" / latest["dir"])
            ctx.trained_through = int(latest["iteration"])
            show("setup", f"learner restored from {latest['dir']}")
    return ctx

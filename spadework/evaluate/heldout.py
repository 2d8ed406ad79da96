"""Held-out starter environments: the one list, the one rule, and the ``library-heldout`` suite.

:data:`~spadework.library.HELD_OUT` (with the library it names) lists starter environments (file stems of :mod:`spadework.library`) that a run
never puts in its pool, so that playing them measures transfer to unseen games rather than
memory. One per skill family at most, none of them a family reasoning-gym also has (so the
``rg-hard`` overlap report is not needed for them): ``mastermind`` (logical deduction),
``knapsack`` (optimization), ``light_switches`` (causal inference), ``tool_ledger`` (data
retrieval). The other 14 still cover every game skill (each has two starter games); the tool-use
starters have one environment per skill, so "data retrieval" keeps no starter example in a
run's pool (the designer still writes environments for it).

The suite plays each held-out environment at fixed levels, its first and its last (one level
when it declares none), on seeds in ``[2**31, 2**32 - 1)``. A tool-use environment is played as
the tool-use preset plays it (:func:`tool_play`): each reply sees the opening rebuilt around the
latest result (``history_turns = 0``) and an episode has at least that preset's turns, so a
tool-use run is measured under the prompts it trained on (with the whole conversation the base
0.5B agent wrote its previous call again, turn after turn: ``docs/results.md``). Training's episode
seeds are ``episode_seed(...) < 2**31 - 1`` (:func:`spadework.seeding.episode_seed`), so the two
sets are disjoint by construction, not by luck, and the seeds still fit numpy's 32-bit seeding.
A play is won when its return (final reward of a terminated episode) is positive, the rule of
:func:`spadework.reward.win_rate`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from spadework.config import preset
from spadework.evaluate.items import Sample
from spadework.evaluate.suite import RunContext
from spadework.library import HELD_OUT, starter_env
from spadework.reward import episode_return
from spadework.rollout import PlayConfig, PlayJob, play
from spadework.sandbox import Limits, Sandbox
from spadework.seeding import derive_seed

_STATUS = {"completed": "ok", "truncated": "ok", "timeout": "env_error",
           "env_error": "env_error", "policy_error": "policy_error"}


def heldout_seed(seed: int, env_name: str, k: int) -> int:
    """The instance seed of play ``k`` of a held-out environment: in ``[2**31, 2**32 - 1)``.

    >>> s = heldout_seed(0, "mastermind", 0)
    >>> 2**31 <= s < 2**32 - 1
    True
    """
    return 2**31 + derive_seed("library-heldout", seed, env_name, k) % (2**31 - 1)


def tool_play(cfg):
    """``cfg`` (a :class:`~spadework.rollout.PlayConfig`) as the ``cpu-qwen-tools`` preset plays
    tool use: its ``history_turns`` and at least its ``max_turns``; the rest (tokens, sampling)
    stays the suite's.

    >>> from spadework.rollout import PlayConfig
    >>> c = tool_play(PlayConfig(max_turns=4))
    >>> c.max_turns, c.history_turns
    (8, 0)
    """
    tools = preset("cpu-qwen-tools").play
    return replace(cfg, max_turns=max(cfg.max_turns, tools.max_turns),
                   history_turns=tools.history_turns)


@dataclass(frozen=True)
class LibrarySuite:
    """``library-heldout``: the held-out starter environments, multi-turn, through the rollout."""

    name: str = "library-heldout"
    held_out: tuple[str, ...] = HELD_OUT
    kind: str = "library"
    data: tuple[str, ...] = ()

    def run(self, ctx: RunContext) -> list[Sample]:
        s = ctx.settings
        envs = [starter_env(name) for name in self.held_out]
        plays = s.items or 8
        jobs = [PlayJob(env, heldout_seed(ctx.seed, f"{env.name}@{level}" if level > 1 else env.name or "", k),
                        "no_hint", k, level=level)
                for env in envs for level in sorted({1, env.levels}) for k in range(plays)]
        cfg = PlayConfig(max_turns=s.max_turns, max_tokens=s.max_tokens,
                         temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                         batch_size=max(1, s.batch_items))
        seed = derive_seed(ctx.seed, self.name)
        groups = {"games": cfg, "tool-use": tool_play(cfg)}
        group = ["tool-use" if j.env.setting == "tool-use" else "games" for j in jobs]

        def go(sb: Sandbox) -> list:  # play() counts turns, not episodes: its own total
            episodes: list = [None] * len(jobs)
            for k, kcfg in groups.items():
                idx = [i for i, g in enumerate(group) if g == k]
                if not idx:
                    continue
                played = play(ctx.policy, sb, [jobs[i] for i in idx], kcfg, seed=seed,
                              progress=lambda done, n, k=k: ctx.progress(
                                  done, n, f"playing {k} (in turns)"))
                for i, ep in zip(idx, played):
                    episodes[i] = ep
            return episodes

        if ctx.sandbox is not None:
            episodes = go(ctx.sandbox)
        else:
            with Sandbox(Limits()) as sb:
                episodes = go(sb)
        return [self._row(job, ep, groups[g]) for job, ep, g in zip(jobs, episodes, group)]

    def _row(self, job, ep, cfg) -> Sample:
        ret = episode_return(ep.rewards, ep.terminated)
        last = ep.turns[-1] if ep.turns else None
        task = job.env.name or job.env.class_name
        if job.env.levels > 1:
            task = f"{task} level {job.level}"
        return Sample(
            self.name, task, job.env.skill or "",
            f"{job.env.name}/{job.level}/{job.seed}", 0, job.seed, job.env.env_id,
            response=last.text if last else "", extracted=last.action if last else None,
            reward=ret, correct=ret > 0, status=_STATUS.get(ep.status, "env_error"),
            finish_reason=last.finish_reason if last else "",
            prompt_tokens=len(last.prompt_ids) if last else 0,
            output_tokens=sum(len(t.output_ids) for t in ep.turns),
            latency_s=round(ep.seconds, 3), error=ep.error,
            extra={"turns": len(ep.turns), "episode_status": ep.status,
                   "max_turns": cfg.max_turns, "history_turns": cfg.history_turns})

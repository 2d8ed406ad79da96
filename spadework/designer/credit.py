"""Every rule that decides what a designer sample earns, and when: the one home of designer credit.

A design attempt is one sample (its prompt, its reply's token ids and logprobs). What it earns:

- **accepted** (its environment passed every check): after the environment's plays, the reward
  of :func:`env_credit` over how it played (``RewardConfig.variant``; default ``blend``, the paper
  recipe: ``0.6 * plateau(win_rate) + 0.4 * clip(regret / 0.15, 0, 1)``), or
  ``RewardConfig.timeout_reward`` when a step of it hung. Credit is delayed: the sample waits in
  the archive (``Archive.pending_attempts``) until its environment has been played.
- **rejected**, first attempt (``DesignConfig.rejected_first_attempts == "reward"``):
  ``rejection_reward + rejection_progress * progress``, where :func:`rejection_progress` grades
  how far the design got through :data:`VALIDATION_ORDER` (0 by default; the ``cpu`` preset's
  shaping). With ``"none"`` it has no gradient: the reference trains on valid designs only.
- **repair turns** (a follow-up carrying the checker's reason) are inference only: the reply was
  conditioned on feedback the designer will not have when sampling, as in the reference, which
  trains on turn 1 only. So are replies without logprobs (a backend that reports none).

Which attempts never train is decided when they are archived (:func:`trained_at_birth`), which
get credited when (:func:`credit_attempts`), and the advantages of credited samples by
:func:`designer_assembly`: each skill's rewards centred and multiplied by the reference's scale
(:func:`reference_designer_scale`), or z-scored per skill.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spadework.archive.records import ACCEPTED, DesignAttempt
from spadework.designer.judge import VALIDATION_ORDER
from spadework.designer.plan import PLAN_ASK
from spadework.designer.prompts import REPAIR_MARK
from spadework.metrics import EnvOutcome
from spadework.reward import (
    LearningPotential,
    RewardConfig,
    Variant,
    blend,
    center_by_group,
    check_finite,
    check_rate,
    check_values,
    group_zscore,
    plateau,
    variance_reward,
)
from spadework.settings.reward import VARIANTS
from spadework.train.batch import Assembly, Sample, trainable_reason

SCHEMES = ("center_scale", "zscore")

#: What an environment module holds, as looked for in a reply that never became one (see
#: :func:`reply_structure`): a code block, a class, the contract's methods, a returned value.
_MODULE_PARTS = tuple(re.compile(p, re.MULTILINE) for p in (
    r"```\s*py(?:thon)?\b", r"^\s*class\s+\w+", r"^\s*def\s+(?:__init__|task)\s*\(",
    r"^\s*def\s+(?:reset|setup)\s*\(", r"^\s*def\s+(?:step|judge)\s*\(",
    r"^\s*def\s+solution\s*\(", r"^\s*return\s+\S",
))


# -- what a valid environment's design earns ----------------------------------------------------

def _blend(w: float, regret: float, rets: list[float], lp: LearningPotential | None,
           c: RewardConfig) -> float:
    return blend(w, regret, regret_scale=c.regret_scale, lo=c.lo, hi=c.hi, ramp=c.ramp,
                 plateau_weight=c.plateau_weight, regret_weight=c.regret_weight, floor=c.floor)


def _regret(w: float, regret: float, rets: list[float], lp: LearningPotential | None,
            c: RewardConfig) -> float:
    return max(0.0, check_finite(regret, "regret")) + _bonus(rets, c)


def _learning_potential(w: float, regret: float, rets: list[float],
                        lp: LearningPotential | None, c: RewardConfig) -> float:
    if lp is None:
        raise ValueError("variant 'learning_potential' needs lp (a LearningPotential state)")
    return lp.potential + _bonus(rets, c)


def _bonus(rets: list[float], c: RewardConfig) -> float:
    return variance_reward(rets) if c.variance_bonus else 0.0


#: Each designer reward variant as a pure function of (win rate, regret, unhinted returns,
#: learning-potential tracker, RewardConfig): a new variant is one function and one entry here
#: (and its name in :data:`spadework.settings.reward.Variant`, which validates `[reward] variant`
#: without importing the designer); its settings are RewardConfig fields.
VARIANT_REWARDS: dict[str, Callable[[float, float, list[float], LearningPotential | None,
                                     RewardConfig], float]] = {
    "blend": _blend,
    "regret": _regret,
    "solve_rate": lambda w, regret, rets, lp, c: plateau(w, c.lo, c.hi, c.ramp),
    "learning_potential": _learning_potential,
    "variance": lambda w, regret, rets, lp, c: variance_reward(rets),
}


def designer_reward(
    variant: Variant,
    *,
    win_rate: float,
    regret: float,
    returns: Sequence[float],
    lp: LearningPotential | None = None,
    step_timeout: bool = False,
    cfg: RewardConfig | None = None,
    **settings: Any,
) -> float:
    """The raw (uncentred) reward of one valid environment's design sample, under ``cfg`` (the
    defaults: ``RewardConfig()``) with any of its fields given as ``settings``.

    ``step_timeout`` (a step of the environment passed its deadline) gives ``timeout_reward`` for
    every variant. Otherwise (:data:`VARIANT_REWARDS`):

    - ``blend``: ``blend(win_rate, regret, ...)`` with the weights and band given.
    - ``regret``: ``max(0, regret)`` (the reference's regret_based variant floors it).
    - ``solve_rate``: ``plateau(win_rate, lo, hi, ramp)`` (blend with weights 1 and 0).
    - ``learning_potential``: ``lp.potential``; ``lp`` is the caller's tracker *after* it has
      observed this environment's plays (this function does not update it).
    - ``variance``: ``variance_reward(returns)``.

    ``variance_bonus`` adds ``variance_reward(returns)`` to the regret or learning_potential
    variants (the reference's optional term). ``returns`` are the unhinted plays' returns.

    >>> round(designer_reward("blend", win_rate=0.3, regret=0.3, returns=[1, 0, 0]), 6)
    0.76
    >>> designer_reward("regret", win_rate=0.5, regret=-0.2, returns=[0, 1])
    0.0
    >>> designer_reward("blend", win_rate=0.5, regret=0.3, returns=[0, 1], step_timeout=True)
    -0.5
    """
    if variant not in VARIANT_REWARDS:
        raise ValueError(f"unknown designer reward variant {variant!r}; choose one of {VARIANTS}")
    c = cfg or RewardConfig()
    if settings:
        c = dataclasses.replace(c, **settings)
    if step_timeout:
        return check_finite(c.timeout_reward, "timeout_reward")
    w = check_rate(win_rate)
    rets = check_values(returns, "returns")
    return VARIANT_REWARDS[variant](w, regret, rets, lp, c)


def skill_trackers(win_rates: Mapping[str, Sequence[float]],
                   before: Mapping[str, LearningPotential], cfg: RewardConfig
                   ) -> dict[str, LearningPotential]:
    """Each skill's learning-potential tracker after this iteration: the one in ``before`` (a
    fresh one for a new skill) updated once with the mean unhinted win rate of the skill's
    environments played this iteration (``win_rates``: skill -> their win rates; a skill with
    none keeps its tracker). Skills the iteration did not play are carried over.

    The tracker is the skill's, as in the reference, not the environment's: a design is
    credited once, at its environment's first plays, and a tracker of that environment alone
    would then have seen one win rate and hold a potential of 0 for every design.

    >>> cfg = RewardConfig(lp_gamma_fast=0.8, lp_gamma_slow=0.2)
    >>> t = skill_trackers({"logic": [0.0, 0.5]}, {}, cfg)
    >>> t = skill_trackers({"logic": [0.5, 1.0], "math": []}, t, cfg)
    >>> sorted(t), round(t["logic"].potential, 6)
    (['logic'], 0.3)
    """
    out = dict(before)
    for skill, rates in win_rates.items():
        if rates:
            tracker = out.get(skill) or LearningPotential(cfg.lp_gamma_fast, cfg.lp_gamma_slow)
            out[skill] = tracker.update(sum(rates) / len(rates))
    return out


def env_credit(outcome: EnvOutcome, cfg: RewardConfig, lp: LearningPotential | None) -> float:
    """The design reward of one environment from how it played (``outcome``), under ``cfg``.

    ``lp``: the tracker of the environment's skill after this iteration's plays
    (:func:`skill_trackers`), which the ``learning_potential`` variant pays; None: a fresh
    tracker that observes this environment's win rate alone (its potential is then 0).

    >>> o = EnvOutcome("e", plays=2, wins=1, win_rate=0.5, regret=0.5, step_timeout=False,
    ...                returns=(1.0, 0.0))
    >>> env_credit(o, RewardConfig(), None)   # 0.6 * plateau(0.5) + 0.4 * clip(0.5 / 0.15)
    1.0
    """
    tracker = lp
    if tracker is None:
        tracker = LearningPotential(cfg.lp_gamma_fast, cfg.lp_gamma_slow)
        if outcome.plays:  # an outcome of no plays (every one failed) has no win rate to observe
            tracker = tracker.update(outcome.win_rate)
    return designer_reward(
        cfg.variant, win_rate=outcome.win_rate, regret=outcome.regret, returns=outcome.returns,
        lp=tracker, step_timeout=outcome.step_timeout, cfg=cfg)


# -- what a rejected design earns ---------------------------------------------------------------

def design_progress(failed_stage: int, n_stages: int, structure: float = 0.0) -> float:
    """How far a rejected design got, in [0, 1): ``(failed_stage + structure) / n_stages``.

    ``failed_stage`` is the index of the stage that rejected it in the validation order (0 for
    the reply itself: truncated or empty), ``n_stages`` the number of stages, and ``structure``
    in [0, 1] the share of an environment module's parts present in the reply (only used below
    the first stage: a reply that failed later was already a module). Any stage passed is worth
    more than any amount of structure below it.

    >>> round(design_progress(0, 9, 0.5), 6), round(design_progress(3, 9), 6)
    (0.055556, 0.333333)
    >>> design_progress(9, 9)
    Traceback (most recent call last):
    ...
    ValueError: failed_stage must lie in [0, n_stages), got 9 with n_stages=9
    """
    if not isinstance(n_stages, int) or n_stages < 1:
        raise ValueError(f"n_stages must be an integer >= 1, got {n_stages!r}")
    if not isinstance(failed_stage, int) or not 0 <= failed_stage < n_stages:
        raise ValueError(f"failed_stage must lie in [0, n_stages), got {failed_stage!r} "
                         f"with n_stages={n_stages}")
    s = check_rate(structure, "structure")
    return (failed_stage + min(s, 1.0 - 1e-9)) / n_stages


def reply_structure(reply: str) -> float:
    """The share of an environment module's parts present in a reply, in [0, 1].

    The parts: a python code block, a class, ``__init__``, ``reset``, ``step``, ``solution``,
    and a ``return`` of a value (for a ``GameEnv`` subclass, ``task``, ``setup`` and ``judge``
    stand for the three it does not write). Only a shaping signal for replies that were never extracted
    (truncated, say): it tells prose from the beginnings of a module.

    >>> reply_structure("I will design a game about tides.")
    0.0
    >>> round(reply_structure("```python\\nclass Tides:\\n    def reset(self, seed=None):\\n"), 6)
    0.428571
    """
    return sum(1 for p in _MODULE_PARTS if p.search(reply)) / len(_MODULE_PARTS)


def rejection_progress(attempt: DesignAttempt) -> float:
    """How far a rejected attempt got, in [0, 1) (:func:`design_progress` over
    :data:`VALIDATION_ORDER`, with :func:`reply_structure` below the first stage). An outcome
    outside the order (an older archive's) counts as the reply stage.

    >>> from dataclasses import replace
    >>> a = DesignAttempt(0, 0, 0, None, "games", None, (), "```python\\nclass A:", (), (), (), "reply")
    >>> round(rejection_progress(a), 6), round(rejection_progress(replace(a, outcome="load")), 6)
    (0.025974, 0.272727)
    """
    stage = VALIDATION_ORDER.index(attempt.outcome) if attempt.outcome in VALIDATION_ORDER else 0
    structure = reply_structure(attempt.reply) if stage == 0 else 0.0
    return design_progress(stage, len(VALIDATION_ORDER), structure)


# -- which samples train, and when --------------------------------------------------------------

def is_repair(attempt: DesignAttempt) -> bool:
    """Whether a designer sample is a repair turn: its prompt carries an earlier reply (a chat
    repair) or the verdict on one (a fresh repair, :data:`~spadework.designer.prompts.REPAIR_MARK`).
    The reply to a plan turn (``DesignConfig.plan``) is not an earlier attempt: the module after
    it is a first attempt.

    >>> a = DesignAttempt(0, 0, 1, None, "games", None, ({"role": "user", "content": "x"},
    ...     {"role": "assistant", "content": "y"}, {"role": "user", "content": "fix"}), "", (), (), (), "static")
    >>> is_repair(a)
    True
    >>> import dataclasses
    >>> is_repair(dataclasses.replace(a, messages=({"role": "user", "content": "doc " + PLAN_ASK},
    ...     {"role": "assistant", "content": "Values: x"}, {"role": "user", "content": "code"})))
    False
    """
    msgs = attempt.messages
    return any((m.get("role") == "assistant" and not _answers_plan(msgs[i - 1] if i else {}))
               or (m.get("role") == "user" and REPAIR_MARK in str(m.get("content")))
               for i, m in enumerate(msgs))


def _answers_plan(before: Mapping[str, Any]) -> bool:
    return before.get("role") == "user" and str(before.get("content", "")).endswith(PLAN_ASK)


def trained_at_birth(attempt: DesignAttempt, rejected_first_attempts: str) -> bool:
    """Whether a new attempt is archived as already trained, i.e. never trains: a repair turn, a
    reply without logprobs, or a rejected attempt when rejections earn nothing (``"none"``)."""
    return (is_repair(attempt) or not attempt.output_ids
            or (attempt.outcome != ACCEPTED and rejected_first_attempts == "none"))


def credit_attempts(pending: Sequence[DesignAttempt], env_rewards: Mapping[str, float],
                    cfg: RewardConfig, rejected_first_attempts: str) -> list[tuple[tuple[int, int, int], float]]:
    """(attempt key, reward) for each pending attempt that can be credited now: an accepted one
    whose environment was played (``env_rewards``: env id -> :func:`env_credit`), a
    rejected first attempt when rejections earn the rejection reward. Repairs never are.

    >>> a = DesignAttempt(0, 0, 0, None, "games", None, (), "", (), (), (), "static")
    >>> credit_attempts([a], {}, RewardConfig(rejection_reward=-1.0, rejection_progress=1.0), "reward")
    [((0, 0, 0), -0.8181818181818181)]
    """
    out = []
    for att in pending:
        if is_repair(att):
            continue
        if att.outcome == ACCEPTED:
            if att.env_id in env_rewards:
                out.append((att.key, env_rewards[att.env_id]))
        elif rejected_first_attempts == "reward":
            out.append((att.key, cfg.rejection_reward + cfg.rejection_progress * rejection_progress(att)))
    return out


# -- advantages ---------------------------------------------------------------------------------

def reference_designer_scale(n_agent: int, n_designer: int, regen_interval: int,
                             cap: float = 50.0) -> float:
    """The reference's designer reward scale: ``min(n_agent / n_designer * regen, cap)``, 1 if a
    count is 0. ``n_agent`` counts agent episodes (the reference trains each trajectory as one
    sample), never turns or packed sequences.

    It makes the few designer samples weigh about as much as the many agent samples in a
    token-summed loss (recipes: 192 / 24 * 4 = 32, 192 = 24 environments x 8 plays).

    >>> reference_designer_scale(192, 24, 4)
    32.0
    >>> reference_designer_scale(0, 24, 4), reference_designer_scale(1000, 2, 4)
    (1.0, 50.0)
    """
    if n_agent <= 0 or n_designer <= 0:
        return 1.0
    return float(min(n_agent / n_designer * regen_interval, cap))


def designer_assembly(attempts: Sequence[DesignAttempt], *, scheme: str = "center_scale",
                      scale: float = 1.0, eps: float = 1e-8) -> Assembly:
    """Designer samples from credited attempts (keyed by the attempt's (iteration, slot,
    attempt)); see the module docstring.

    Attempts are grouped by skill (``None`` is a group of its own). ``center_scale``:
    ``(r - mean_skill(r)) * scale``; ``zscore``: ``(r - mean) / (std + eps)`` per skill.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    dropped: Counter[str] = Counter()
    kept: list[DesignAttempt] = []
    for a in attempts:
        why = "no_reward" if a.reward is None else trainable_reason(a.prompt_ids, a.output_ids,
                                                                    a.logprobs, a.sampling)
        if why:
            dropped[why] += 1
        else:
            kept.append(a)
    rewards = [float(a.reward) for a in kept]  # type: ignore[arg-type]
    skills = [a.skill for a in kept]
    if scheme == "center_scale":
        advantages = [c * scale for c in center_by_group(rewards, skills)]
    else:
        advantages = [0.0] * len(kept)
        for skill in set(skills):
            idx = [i for i, s in enumerate(skills) if s == skill]
            for i, z in zip(idx, group_zscore([rewards[i] for i in idx], eps), strict=True):
                advantages[i] = z
    samples = tuple(
        Sample("designer", tuple(a.prompt_ids), tuple(a.output_ids), tuple(a.logprobs), adv,
               a.sampling, key=a.key)
        for a, adv in zip(kept, advantages, strict=True)
    )
    return Assembly(samples, dict(dropped))

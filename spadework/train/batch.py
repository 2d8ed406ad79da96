"""Batch assembly: samples to train on, and the agent's advantages from its episodes.

One assistant turn is one :class:`Sample`: its full prompt ids, its output ids, the logprobs
the sampler gave those output ids (``spadework.policy.base`` convention: raw model at the
sampling temperature), and one scalar advantage that every output token of the turn carries.
The learner builds ``prompt_ids + output_ids`` sequences and masks the loss to the output part.

Agent advantages (:func:`agent_assembly`): ``group_zscore`` of the episode returns within each
``(env_id, arm)`` group, every turn of an episode carrying its episode's advantage. By default
only the ``"no_hint"`` arm is trained on, as in the reference (its hinted plays only measure
``r_hint``): a hinted prompt holds privileged information the agent never has at test time,
and rewarding it would teach the agent to rely on hints. Passing ``arms=ARMS`` trains on both,
each arm z-scored in its own group so the hinted arm's higher returns do not become the
unhinted arm's baseline. Episodes that ended in ``env_error`` or ``timeout`` (the environment
failed or was too slow) or ``policy_error`` are left out of both the groups and the samples: they
say nothing about the agent's play.

With ``format_weight > 0`` the returns that are z-scored are ``shaped_return(return,
episode.format_share, format_weight)`` (``spadework.reward``): a small bonus for replies the
host parsed, for models too small to win at first; the win rate and regret never see it.

Designer samples and their advantages are built by :mod:`spadework.designer.credit`, the home
of every designer crediting rule.

Turns and attempts with no output tokens, or whose logprobs do not match their output ids one
for one, cannot be trained on; they are dropped and counted in :class:`Assembly.dropped`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from spadework.reward import episode_return, group_zscore, shaped_return
from spadework.types import ARMS, Episode, Sampling

ROLES = ("agent", "designer")
#: Episode statuses whose plays are trained on (the others are the environment's or sampler's fault).
TRAINABLE_STATUSES = ("completed", "truncated")


@dataclass(frozen=True)
class Sample:
    """One sampled completion to train on.

    ``sampling`` is how it was drawn: the learner scores its tokens at that temperature, the one
    its ``logprobs`` were reported at (designer and agent samples may differ). ``key`` names
    where it came from: ``(env_id, arm, play_index, turn_index)`` for an agent turn, the
    attempt's ``(iteration, slot, attempt)`` for a designer sample; the learner does not read it.

    >>> T = Sampling(0.7)
    >>> Sample("agent", (1, 2), (3,), (-0.5,), 1.0, T).n_tokens
    1
    >>> Sample("agent", (1,), (3, 4), (-0.5,), 1.0, T)
    Traceback (most recent call last):
    ...
    ValueError: 2 output ids but 1 logprobs
    """

    role: str
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    advantage: float
    sampling: Sampling
    key: tuple[Hashable, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if not self.prompt_ids:
            raise ValueError("prompt_ids is empty; a sample needs a prompt to condition on")
        if not self.output_ids:
            raise ValueError("output_ids is empty; there is nothing to train on")
        if len(self.output_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.output_ids)} output ids but {len(self.logprobs)} logprobs")
        if not math.isfinite(self.advantage):
            raise ValueError(f"advantage must be finite, got {self.advantage!r}")
        if not all(math.isfinite(lp) and lp <= 1e-3 for lp in self.logprobs):
            raise ValueError("logprobs must be finite and <= 0 (log-probabilities)")
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"sampling must say how the sample was drawn, got {self.sampling!r}")

    @property
    def n_tokens(self) -> int:
        return len(self.output_ids)


@dataclass(frozen=True)
class Assembly:
    """Samples plus what was left out and why (reason -> count)."""

    samples: tuple[Sample, ...]
    dropped: dict[str, int] = field(default_factory=dict)


def trainable_reason(prompt_ids: Sequence[int], output_ids: Sequence[int],
               logprobs: Sequence[float], sampling: Sampling | None) -> str:
    """'' when a sampled completion can be trained on, else the reason it cannot."""
    if sampling is None:
        return "unknown_sampling"  # archived before it was recorded: cannot be scored as drawn
    if not output_ids:
        return "no_output_tokens"
    if not prompt_ids:
        return "no_prompt_tokens"
    if len(logprobs) != len(output_ids):
        return "logprobs_mismatch"
    if not all(math.isfinite(lp) and lp <= 1e-3 for lp in logprobs):
        return "bad_logprobs"
    return ""


def agent_assembly(episodes: Sequence[Episode], *, arms: Sequence[str] = ("no_hint",),
                   eps: float = 1e-8, format_weight: float = 0.0) -> Assembly:
    """Agent samples with per-(env, arm) z-scored returns; see the module docstring.

    >>> from spadework.types import Turn
    >>> def ep(i, r):
    ...     t = Turn((1, 2), (5, 6), (-0.1, -0.2), "", "", "", r, "stop", Sampling(0.7), True)
    ...     return Episode("e", "no_hint", i, i, (t,), (r,), True, False, "completed")
    >>> a = agent_assembly([ep(0, 1.0), ep(1, 0.0), ep(2, 0.0), ep(3, 1.0)])
    >>> [round(s.advantage, 6) for s in a.samples]
    [1.0, -1.0, -1.0, 1.0]
    """
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise ValueError(f"unknown arms {sorted(unknown)}; choose from {ARMS}")
    dropped: Counter[str] = Counter()
    groups: dict[Hashable, list[Episode]] = {}
    for e in episodes:
        if e.arm not in arms:
            dropped[f"arm_{e.arm}"] += 1
        elif e.status not in TRAINABLE_STATUSES:
            dropped[f"episode_{e.status}"] += 1
        else:
            groups.setdefault((e.env_id, e.arm), []).append(e)
    samples: list[Sample] = []
    for (env_id, arm), members in groups.items():
        returns = [episode_return(e.rewards, e.terminated) for e in members]
        if format_weight:
            returns = [shaped_return(r, e.format_share, format_weight)
                       for r, e in zip(returns, members, strict=True)]
        for e, adv in zip(members, group_zscore(returns, eps), strict=True):
            for t_index, t in enumerate(e.turns):
                why = trainable_reason(t.prompt_ids, t.output_ids, t.logprobs, t.sampling)
                if why:
                    dropped[why] += 1
                    continue
                samples.append(Sample(
                    "agent", tuple(t.prompt_ids), tuple(t.output_ids), tuple(t.logprobs), adv,
                    t.sampling, key=(env_id, arm, e.play_index, t_index),
                ))
    return Assembly(tuple(samples), dict(dropped))

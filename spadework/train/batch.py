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

With ``format_weight > 0`` the agent also earns a small bonus for replies the host parsed, for
models too small to win at first; the win rate and regret never see it. ``format_shaping``
says where it enters. ``"zscored"``: the returns that are z-scored are ``shaped_return(return,
episode.format_share, format_weight)`` (``spadework.reward``), so in a group without a win the
bonus is all there is and the z-score gives it the size of a win (one unparsed reply of four in
five lost plays: an advantage of -2.0 at any weight). ``"added"``: the returns are z-scored
alone and each episode's advantage gains ``format_weight * (share - the group's mean share)``,
the size the weight says, in every group.

Designer samples and their advantages are built by :mod:`spadework.designer.credit`, the home
of every designer crediting rule.

Turns and attempts with no output tokens, or whose logprobs do not match their output ids one
for one, cannot be trained on; they are dropped and counted in :class:`Assembly.dropped`.

Packing (``pack=True``): the turns of one episode become one sequence when each turn's prompt
starts with the previous turn's prompt and output, token for token (the chat template renders
the history as it was sampled): its ``output_ids`` run from the first turn's output to the last
turn's, the host's messages in between marked untrained (``Sample.trained``). Every trained
token sees exactly the context it was sampled in, so under the ``token`` aggregation the
step's loss and gradient are those of the unpacked turns, for fewer tokens run (each prompt is
run once, not once per later turn: 2.3x fewer on a ``cpu`` run, ``benchmarks/packing.py``). A turn whose prompt does not continue the
previous sequence (a template that strips trailing whitespace from a reply, say) starts a new
sequence.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from spadework.reward import episode_return, group_zscore, shaped_return
from spadework.settings.reward import FORMAT_SHAPINGS
from spadework.settings.run import ROLES
from spadework.types import ARMS, Episode, Sampling

#: Episode statuses whose plays are trained on (the others are the environment's or sampler's fault).
TRAINABLE_STATUSES = ("completed", "truncated")


@dataclass(frozen=True)
class Sample:
    """One sampled completion to train on.

    ``sampling`` is how it was drawn: the learner scores its tokens at that temperature, the one
    its ``logprobs`` were reported at (designer and agent samples may differ). ``key`` names
    where it came from: ``(env_id, arm, play_index, turn_index)`` for an agent turn, the
    attempt's ``(iteration, slot, attempt)`` for a designer sample; the learner does not read it.
    ``trained``: one flag per output id, False for context that was not sampled (the host's
    messages between the turns of a packed episode), with one logprob per True; empty when every
    output id was sampled.

    >>> T = Sampling(0.7)
    >>> Sample("agent", (1, 2), (3,), (-0.5,), 1.0, T).n_tokens
    1
    >>> Sample("agent", (1,), (3, 4), (-0.5,), 1.0, T)
    Traceback (most recent call last):
    ...
    ValueError: 2 output ids but 1 logprobs
    >>> Sample("agent", (1,), (3, 4, 5), (-0.5, -0.1), 1.0, T, trained=(True, False, True)).n_tokens
    2
    """

    role: str
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    advantage: float
    sampling: Sampling
    key: tuple[Hashable, ...] = ()
    trained: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if not self.prompt_ids:
            raise ValueError("prompt_ids is empty; a sample needs a prompt to condition on")
        if not self.output_ids:
            raise ValueError("output_ids is empty; there is nothing to train on")
        if self.trained and len(self.trained) != len(self.output_ids):
            raise ValueError(f"{len(self.output_ids)} output ids but {len(self.trained)} trained flags")
        if self.n_tokens != len(self.logprobs) or not self.n_tokens:
            raise ValueError(f"{self.n_tokens if self.trained else len(self.output_ids)} output ids "
                             f"but {len(self.logprobs)} logprobs")
        if not math.isfinite(self.advantage):
            raise ValueError(f"advantage must be finite, got {self.advantage!r}")
        if not all(math.isfinite(lp) and lp <= 1e-3 for lp in self.logprobs):
            raise ValueError("logprobs must be finite and <= 0 (log-probabilities)")
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"sampling must say how the sample was drawn, got {self.sampling!r}")

    @property
    def n_tokens(self) -> int:
        """The trained (sampled) output tokens."""
        return sum(self.trained) if self.trained else len(self.output_ids)

    @property
    def length(self) -> int:
        """The whole sequence the learner runs: prompt and output ids."""
        return len(self.prompt_ids) + len(self.output_ids)

    def trained_ids(self) -> list[int]:
        """The sampled output ids, in order (those ``logprobs`` are for)."""
        if not self.trained:
            return list(self.output_ids)
        return [t for t, keep in zip(self.output_ids, self.trained, strict=True) if keep]


@dataclass(frozen=True)
class Assembly:
    """Samples plus what was left out and why (reason -> count), how many turns were packed
    into an earlier turn's sequence (:func:`pack_turns`), and how many episodes the samples come
    from (``episodes``: what the reference's designer scale counts as its agent samples, one
    trajectory each; independent of packing)."""

    samples: tuple[Sample, ...]
    dropped: dict[str, int] = field(default_factory=dict)
    packed_turns: int = 0
    episodes: int = 0


def sample_to_dict(sample: Sample) -> dict:
    """``sample`` as JSON-ready data (``key`` as a list), read back by :func:`sample_from_dict`:
    how a benchmark keeps a learner step's batch to replay it.

    >>> s = Sample("agent", (1, 2), (3, 4), (-0.5,), 1.0, Sampling(0.7), ("e", 0), (True, False))
    >>> sample_from_dict(sample_to_dict(s)) == s
    True
    """
    return {"role": sample.role, "prompt_ids": list(sample.prompt_ids),
            "output_ids": list(sample.output_ids), "logprobs": list(sample.logprobs),
            "advantage": sample.advantage,
            "sampling": [sample.sampling.temperature, sample.sampling.top_p, sample.sampling.top_k],
            "key": list(sample.key), "trained": list(sample.trained)}


def sample_from_dict(data: dict) -> Sample:
    """The :class:`Sample` :func:`sample_to_dict` wrote."""
    return Sample(data["role"], tuple(data["prompt_ids"]), tuple(data["output_ids"]),
                  tuple(data["logprobs"]), float(data["advantage"]), Sampling(*data["sampling"]),
                  tuple(data.get("key", ())), tuple(data.get("trained", ())))


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


def pack_turns(turns: Sequence[Sample]) -> list[Sample]:
    """The turns of one episode (in order, one advantage and sampling) as few sequences as their
    prompts allow; see the module docstring.

    >>> T = Sampling(0.7)
    >>> a = Sample("agent", (1, 2), (3, 9), (-0.1, -0.2), 1.0, T)
    >>> b = Sample("agent", (1, 2, 3, 9, 4), (5,), (-0.3,), 1.0, T)
    >>> c = Sample("agent", (1, 2, 3, 7), (6,), (-0.4,), 1.0, T)   # does not continue b
    >>> [(p.prompt_ids, p.output_ids, p.trained, p.logprobs) for p in pack_turns([a, b, c])]
    [((1, 2), (3, 9, 4, 5), (True, True, False, True), (-0.1, -0.2, -0.3)), ((1, 2, 3, 7), (6,), (), (-0.4,))]
    """
    out: list[Sample] = []
    for turn in turns:
        last = out[-1] if out else None
        seq = list(last.prompt_ids) + list(last.output_ids) if last else []
        if (last is None or turn.trained or turn.advantage != last.advantage
                or turn.sampling != last.sampling or turn.role != last.role
                or len(turn.prompt_ids) < len(seq) or list(turn.prompt_ids[:len(seq)]) != seq):
            out.append(turn)
            continue
        between = turn.prompt_ids[len(seq):]
        flags = last.trained or (True,) * len(last.output_ids)
        out[-1] = Sample(last.role, last.prompt_ids, (*last.output_ids, *between, *turn.output_ids),
                         (*last.logprobs, *turn.logprobs), last.advantage, last.sampling, last.key,
                         (*flags, *(False,) * len(between), *(True,) * len(turn.output_ids)))
    return out


def agent_assembly(episodes: Sequence[Episode], *, arms: Sequence[str] = ("no_hint",),
                   eps: float = 1e-8, format_weight: float = 0.0, format_shaping: str = "zscored",
                   pack: bool = False) -> Assembly:
    """Agent samples with per-(env, arm) z-scored returns; see the module docstring. With
    ``pack``, each episode's turns are packed (:func:`pack_turns`).

    >>> from spadework.types import Turn
    >>> def ep(i, r):
    ...     t = Turn((1, 2), (5, 6), (-0.1, -0.2), "", "", "", r, "stop", Sampling(0.7), True)
    ...     return Episode("e", "no_hint", i, i, (t,), (r,), True, False, "completed")
    >>> a = agent_assembly([ep(0, 1.0), ep(1, 0.0), ep(2, 0.0), ep(3, 1.0)])
    >>> [round(s.advantage, 6) for s in a.samples], a.episodes
    ([1.0, -1.0, -1.0, 1.0], 4)
    """
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise ValueError(f"unknown arms {sorted(unknown)}; choose from {ARMS}")
    if format_shaping not in FORMAT_SHAPINGS:
        raise ValueError(f"format_shaping must be one of {FORMAT_SHAPINGS}, got {format_shaping!r}")
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
    n_packed = n_episodes = 0
    for (env_id, arm), members in groups.items():
        returns = [episode_return(e.rewards, e.terminated) for e in members]
        if format_weight and format_shaping == "zscored":
            returns = [shaped_return(r, e.format_share, format_weight)
                       for r, e in zip(returns, members, strict=True)]
        advantages = group_zscore(returns, eps)
        if format_weight and format_shaping == "added":
            shares = [e.format_share for e in members]
            mean = sum(shares) / len(shares)
            advantages = [shaped_return(a, s, format_weight) - format_weight * mean
                          for a, s in zip(advantages, shares, strict=True)]
        for e, adv in zip(members, advantages, strict=True):
            mine = []
            for t_index, t in enumerate(e.turns):
                why = trainable_reason(t.prompt_ids, t.output_ids, t.logprobs, t.sampling)
                if why:
                    dropped[why] += 1
                    continue
                mine.append(Sample(
                    "agent", tuple(t.prompt_ids), tuple(t.output_ids), tuple(t.logprobs), adv,
                    t.sampling, key=(env_id, arm, e.play_index, t_index),
                ))
            packed = pack_turns(mine) if pack else mine
            n_packed += len(mine) - len(packed)
            n_episodes += bool(mine)
            samples += packed
    return Assembly(tuple(samples), dict(dropped), n_packed, n_episodes)

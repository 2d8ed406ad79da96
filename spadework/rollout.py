"""Play episodes: multi-turn, batched across episodes, one sandbox handle per episode.

All live episodes advance together: each turn makes one ``Policy.chat`` call for the whole batch,
then steps every episode's environment with its parsed action. Every episode ends with a status
(``completed``, ``truncated``, ``timeout``, ``env_error``, ``policy_error``); failures are
recorded on the episode, never raised into the loop.

Departures from the reference, on purpose:

- The host parses the reply (thinking stripped, the *last* complete ``\\boxed{}``) and hands the
  environment a canonical ``\\boxed{X}``; the reference took the first brace-free box.
- Both regret arms are built by :func:`regret_jobs` on the same seeds, the same number of times,
  and are played with the same sampling settings and context budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from spadework.env.actions import parse_action
from spadework.errors import EnvError, EnvTimeout, PolicyError
from spadework.seeding import derive_seed, episode_seed
from spadework.types import Episode, EnvSource, Turn


@dataclass(frozen=True)
class PlayConfig:
    """How episodes are played. Both arms always share one PlayConfig."""

    max_turns: int = 8
    max_tokens: int = 192
    context_tokens: int = 4096
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 20
    episode_seconds: float = 600.0

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"PlayConfig.max_turns must be >= 1, got {self.max_turns}")
        if self.max_tokens < 1 or self.context_tokens <= self.max_tokens:
            raise ValueError(
                "PlayConfig needs max_tokens >= 1 and context_tokens > max_tokens "
                f"(got {self.max_tokens} and {self.context_tokens})"
            )


@dataclass(frozen=True)
class PlayJob:
    """One episode to play: which environment, which instance (seed), which arm.

    In the hinted arm, ``hint=None`` means the environment's own ``hint()`` for this instance
    (asked right after ``reset``); a text (e.g. written by the policy from the code) is used as is.
    """

    env: EnvSource
    seed: int
    arm: str
    play_index: int
    hint: str | None = None


def regret_jobs(
    env: EnvSource, hint: str | None = None, *, run_seed: int, plays: int
) -> list[PlayJob]:
    """The hinted and unhinted arms of one environment on identical seeds.

    ``hint=None`` gives each hinted play the environment's own ``hint()`` for its instance.

    >>> env = EnvSource(code="x", class_name="X")
    >>> jobs = regret_jobs(env, "look left", run_seed=0, plays=2)
    >>> [(j.arm, j.play_index) for j in jobs]
    [('hint', 0), ('hint', 1), ('no_hint', 0), ('no_hint', 1)]
    >>> jobs[0].seed == jobs[2].seed and jobs[1].seed == jobs[3].seed
    True
    """
    seeds = [episode_seed(run_seed, env.env_id, i) for i in range(plays)]
    return [PlayJob(env, seeds[i], "hint", i, hint) for i in range(plays)] + [
        PlayJob(env, seeds[i], "no_hint", i, None) for i in range(plays)
    ]


def first_message(setting: str, observation: str, hint: str | None) -> str:
    """The agent's first user message: the task, the hint (hinted arm only), the action format."""
    hint_block = f"A hint from the game's designer: {hint.strip()}\n\n" if hint else ""
    if setting == "tool-use":
        how = (
            "Call tools with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call> and give "
            "the final result as <answer>...</answer>."
        )
    else:
        how = "Think briefly, then give your move as \\boxed{...}."
    return f"You are playing a text game. Make valid moves to win.\n\n{hint_block}{observation}\n\n{how}"


@dataclass
class _Live:
    """Mutable state of one episode while it is being played (local to :func:`play`)."""

    job: PlayJob
    handle: object = None
    messages: list = field(default_factory=list)
    tools: list = field(default_factory=list)
    turns: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    status: str | None = None
    error: str = ""
    started: float = field(default_factory=time.monotonic)

    def end(self, status: str, error: str = "") -> None:
        self.status, self.error = status, error

    def record(self) -> Episode:
        return Episode(
            env_id=self.job.env.env_id,
            arm=self.job.arm,
            play_index=self.job.play_index,
            seed=self.job.seed,
            turns=tuple(self.turns),
            rewards=tuple(self.rewards),
            terminated=self.terminated,
            truncated=self.truncated,
            status=self.status or "truncated",
            error=self.error,
            seconds=time.monotonic() - self.started,
        )


def _start(sandbox, job: PlayJob, cfg: PlayConfig) -> _Live:
    live = _Live(job)
    try:
        live.handle = sandbox.load(job.env.code, max_turns=cfg.max_turns, class_name=job.env.class_name)
        obs, _info = live.handle.reset(seed=job.seed)
        hint = job.hint
        if job.arm == "hint" and hint is None:
            hint = live.handle.hint()
        if job.env.setting == "tool-use":
            live.tools = list(live.handle.tools())
    except EnvTimeout as e:
        live.end("timeout", f"reset: {e.reason}")
        return live
    except EnvError as e:
        live.end("env_error", f"load/reset: {e.reason}")
        return live
    live.messages = [{"role": "user", "content": first_message(job.env.setting, str(obs), hint)}]
    return live


def _advance(live: _Live, completion, cfg: PlayConfig) -> None:
    parsed = parse_action(completion.text, live.job.env.setting)
    reply, action = parsed.text, parsed.env_action
    try:
        obs, reward, terminated, truncated, _info = live.handle.step(action)
        reward = float(reward)
        if not math.isfinite(reward):
            raise EnvError(f"step returned a non-finite reward {reward!r}")
    except EnvTimeout as e:
        live.end("timeout", f"step: {e.reason}")
        return
    except EnvError as e:
        live.end("env_error", f"step: {e.reason}")
        return
    except (TypeError, ValueError) as e:
        live.end("env_error", f"step returned a malformed result: {e}")
        return
    live.turns.append(
        Turn(
            prompt_ids=tuple(completion.prompt_ids),
            output_ids=tuple(completion.output_ids),
            logprobs=tuple(completion.logprobs),
            text=completion.text,
            action=action,
            observation=str(obs),
            reward=reward,
            finish_reason=completion.finish_reason,
        )
    )
    live.rewards.append(reward)
    live.terminated, live.truncated = bool(terminated), bool(truncated)
    live.messages.append({"role": "assistant", "content": reply})
    live.messages.append({"role": "user", "content": str(obs)})
    used = len(completion.prompt_ids) + len(completion.output_ids)
    if live.terminated:
        live.end("completed")
    elif live.truncated or len(live.turns) >= cfg.max_turns:
        live.truncated = True
        live.end("truncated")
    elif used + cfg.max_tokens + len(str(obs)) // 2 > cfg.context_tokens:
        live.truncated = True
        live.end("truncated", f"context budget of {cfg.context_tokens} tokens reached")
    elif time.monotonic() - live.started > cfg.episode_seconds:
        live.end("timeout", f"episode passed {cfg.episode_seconds:.0f} s")


def play(policy, sandbox, jobs: Sequence[PlayJob], cfg: PlayConfig, *, seed: int = 0) -> list[Episode]:
    """Play every job to its end and return one :class:`Episode` per job, in job order.

    ``policy`` follows ``spadework.policy.base.Policy``; ``sandbox`` is a started
    ``spadework.sandbox.Sandbox`` (the caller owns both). Sampling is seeded per turn from
    (``seed``, turn index), so a rerun with the same weights replays the same episodes.
    """
    from spadework.policy.base import Conversation, SamplingParams

    lives = [_start(sandbox, job, cfg) for job in jobs]
    try:
        turn = 0
        while active := [lv for lv in lives if lv.status is None]:
            params = SamplingParams(
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                top_k=cfg.top_k,
                max_tokens=cfg.max_tokens,
                seed=derive_seed(seed, "turn", turn),
            )
            convs = [Conversation(messages=tuple(lv.messages), tools=tuple(lv.tools)) for lv in active]
            try:
                completions = policy.chat(convs, params)
            except PolicyError as e:
                for lv in active:
                    lv.end("policy_error", e.reason)
                break
            for lv, completion in zip(active, completions):
                _advance(lv, completion, cfg)
            turn += 1
    finally:
        for lv in lives:
            if lv.handle is not None:
                lv.handle.close()
    return [lv.record() for lv in lives]

"""Play episodes: multi-turn, batched across episodes, one sandbox handle per episode.

Live episodes advance together: each turn makes one ``Policy.chat`` call for every live episode,
then steps each episode's environment with its reply. A policy with a continuous stream
(llama.cpp, ``PlayConfig.continuous``) instead gets each episode's next turn as soon as its reply
is in and its environment has stepped, beside the replies still decoding. At most
``PlayConfig.batch_size`` episodes are live at once (one hardened child each); a finished
episode's slot goes to the next job.
Every episode ends with a status (``completed``, ``truncated``, ``timeout``, ``env_error``,
``policy_error``); failures are recorded on the episode, never raised into the loop.

Two loops share this code:

- games: the host parses the reply (thinking stripped, the *last* complete ``\\boxed{}``) and
  hands the environment a canonical ``\\boxed{X}``; the observation comes back as a user message.
- tool use: the tool schemas go to the chat template (``Conversation(tools=...)``); the reply
  with all its ``<tool_call>`` blocks goes to ``step()``, where the environment runs the calls in
  order (several per turn) and answers with their results. Those results come back as one
  ``tool`` message when the tokenizer's chat template knows a ``tool`` role (Qwen-style
  templates), else as a user message (SmolLM2's template has no tool role and ignores ``tools``;
  the tool environments list their tools in the first observation for exactly this reason). An
  ``<answer>`` in a reply without calls is judged by the environment and ends the episode when
  it is accepted or out of attempts.

Limits: ``max_turns`` replies; a context budget (the next prompt plus ``max_tokens`` must fit in
``context_tokens``, measured with the policy's own template when it exposes ``prompt_ids``);
per-step deadlines (the sandbox's ``Limits.step_seconds``, an environment that hangs is a
``timeout`` whose error starts with ``step``, see :func:`step_timed_out`); a wall-clock budget per
episode (``episode_seconds``, checked between turns). A policy failure on a batch is retried
conversation by conversation, so one unrenderable conversation fails only its own episode.

Departures from the reference, on purpose: both regret arms are built by :func:`regret_jobs` on
the same seeds, the same number of times, and are played with the same sampling settings and
context budget; a reply cut at ``max_tokens`` is still parsed (``stop_on_length`` restores the
reference's rule of ending the episode), because small CPU models often run out of tokens after
writing their box.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from spadework.env.actions import parse_action
from spadework.errors import ConfigError, EnvError, EnvTimeout, PolicyError
from spadework.play_messages import first_message, tool_role_for, windowed
from spadework.policy.base import Conversation, SamplingParams, StreamRequest, streams
from spadework.seeding import derive_seed, episode_seed
from spadework.settings.play import PlayConfig
from spadework.types import EnvSource, Episode, Sampling, Turn


@dataclass(frozen=True)
class PlayJob:
    """One episode to play: which environment at which level, which instance (seed), which arm.

    In the hinted arm, ``hint=None`` means the environment's own ``hint()`` for this instance
    (asked right after ``reset``); a text (e.g. written by the policy from the code) is used as is.
    ``level`` is the difficulty level to build (1 to ``env.levels``).
    """

    env: EnvSource
    seed: int
    arm: str
    play_index: int
    hint: str | None = None
    level: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.level, bool) or not isinstance(self.level, int) or \
                not 1 <= self.level <= self.env.levels:
            raise ConfigError(f"PlayJob.level must be an integer from 1 to {self.env.levels} (the "
                              f"environment's levels), got {self.level!r}")


def level_kwarg(env: EnvSource, level: int) -> int | None:
    """The ``level`` to build ``env`` with: None (no keyword, as before levels) when it has one.

    >>> level_kwarg(EnvSource("x", "X"), 1), level_kwarg(EnvSource("x", "X", levels=3), 1)
    (None, 1)
    """
    return None if env.levels == 1 else level


def regret_jobs(
    env: EnvSource, hint: str | None = None, *, run_seed: int, plays: int, level: int = 1
) -> list[PlayJob]:
    """The hinted and unhinted arms of one environment on identical seeds, at one level.

    ``hint=None`` gives each hinted play the environment's own ``hint()`` for its instance.

    >>> env = EnvSource(code="x", class_name="X")
    >>> jobs = regret_jobs(env, "look left", run_seed=0, plays=2)
    >>> [(j.arm, j.play_index) for j in jobs]
    [('hint', 0), ('hint', 1), ('no_hint', 0), ('no_hint', 1)]
    >>> jobs[0].seed == jobs[2].seed and jobs[1].seed == jobs[3].seed
    True
    """
    seeds = [episode_seed(run_seed, env.env_id, i) for i in range(plays)]
    return [PlayJob(env, seeds[i], "hint", i, hint, level) for i in range(plays)] + [
        PlayJob(env, seeds[i], "no_hint", i, None, level) for i in range(plays)
    ]


def turn_seed(seed: int, job: PlayJob, turn: int) -> int:
    """The sampling seed of turn ``turn`` of ``job``'s episode in a ``play`` seeded ``seed``.

    >>> job = PlayJob(EnvSource(code="x", class_name="X"), seed=5, arm="hint", play_index=0)
    >>> turn_seed(1, job, 0) == turn_seed(1, job, 0) != turn_seed(1, job, 1)
    True
    """
    return derive_seed(seed, job.env.env_id, job.arm, job.play_index, job.seed, turn)


def step_timed_out(episode: Episode) -> bool:
    """Whether the environment itself hung (a reset or step passed its deadline), as opposed to
    the episode running out of wall-clock budget while the policy was generating.

    A hung step is the designer's fault and costs its design the timeout reward.
    """
    return episode.status == "timeout" and episode.error.startswith(("step", "reset"))


@dataclass
class _Live:
    """Mutable state of one episode while it is being played (local to :func:`play`)."""

    job: PlayJob
    handle: object = None
    messages: list = field(default_factory=list)
    history_turns: int | None = None  # PlayConfig.history_turns
    template_tools: bool = True  # PlayConfig.template_tools
    hint: str | None = None  # what the opening message showed (the hinted arm's hint)
    tools: list = field(default_factory=list)
    turns: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    status: str | None = None
    error: str = ""
    started: float = field(default_factory=time.monotonic)
    charged: float = 0.0  # seconds charged to the budget (see PlayConfig.episode_seconds)
    next_prompt: int = 0  # estimated tokens of the next prompt (measured when the policy can)

    def end(self, status: str, error: str = "") -> None:
        self.status, self.error = status, error
        if self.handle is not None:
            self.handle.close()  # free the child and its descriptors at once
            self.handle = None

    @property
    def listed_tools(self) -> list | None:
        """The tools the opening lists itself: all of them when the template does not get them."""
        return None if self.template_tools else self.tools

    def conversation(self, thinking: bool | None):
        messages = windowed(self.messages, self.history_turns, lambda obs: first_message(
            self.job.env.setting, obs, self.hint, self.listed_tools))
        return Conversation(messages=tuple(messages), thinking=thinking,
                            tools=tuple(self.tools) if self.template_tools else ())

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
            opening=self.messages[0]["content"] if self.messages else "",
            level=self.job.level,
        )


def _start(sandbox, job: PlayJob, cfg: PlayConfig) -> _Live:
    live = _Live(job)
    try:
        return _open(live, sandbox, job, cfg)
    finally:
        live.charged += time.monotonic() - live.started


def _open(live: _Live, sandbox, job: PlayJob, cfg: PlayConfig) -> _Live:
    try:
        live.handle = sandbox.load(job.env.code, max_turns=cfg.max_turns, class_name=job.env.class_name,
                                   level=level_kwarg(job.env, job.level))
        obs, _info = live.handle.reset(seed=job.seed)
        hint = job.hint
        if job.arm == "hint" and hint is None:
            hint = live.handle.hint()
        if job.env.setting == "tool-use":
            live.tools = [dict(t) for t in live.handle.tools()]
    except EnvTimeout as e:
        live.end("timeout", f"reset: {e.reason}")
        return live
    except EnvError as e:
        live.end("env_error", f"load/reset: {e.reason}")
        return live
    except (TypeError, ValueError) as e:
        live.end("env_error", f"reset returned a malformed result: {e}")
        return live
    live.hint = hint if isinstance(hint, str) else None
    live.history_turns, live.template_tools = cfg.history_turns, cfg.template_tools
    live.messages = [{"role": "user", "content": first_message(job.env.setting, str(obs), live.hint,
                                                               live.listed_tools)}]
    return live


def _advance(live: _Live, completion, cfg: PlayConfig, tool_role: str, sampling: Sampling) -> None:
    parsed = parse_action(completion.text, live.job.env.setting)
    action = parsed.env_action
    start = time.monotonic()
    try:
        obs, reward, terminated, truncated, _info = live.handle.step(action)
        live.charged += time.monotonic() - start
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
    obs = str(obs)
    live.turns.append(Turn(
        prompt_ids=tuple(completion.prompt_ids), output_ids=tuple(completion.output_ids),
        logprobs=tuple(completion.logprobs), text=completion.text, action=action,
        observation=obs, reward=reward, finish_reason=completion.finish_reason,
        sampling=sampling, parsed=parsed.ok,
    ))
    live.rewards.append(reward)
    live.terminated, live.truncated = bool(terminated), bool(truncated)
    live.messages.append({"role": "assistant", "content": parsed.text})
    role = tool_role if parsed.tool_calls else "user"
    live.messages.append({"role": role, "content": obs})
    live.next_prompt = len(completion.prompt_ids) + len(completion.output_ids) + len(obs) // 3 + 16
    if live.terminated:
        live.end("completed")
    elif live.truncated:
        live.end("truncated")
    elif len(live.turns) >= cfg.max_turns:
        live.truncated = True
        live.end("truncated", f"all {cfg.max_turns} turns used")
    elif cfg.stop_on_length and completion.finish_reason == "length":
        live.truncated = True
        live.end("truncated", f"the reply hit max_tokens={cfg.max_tokens}")
    elif live.charged > cfg.episode_seconds:
        live.end("timeout", f"episode passed its {cfg.episode_seconds:g} s budget (its environment "
                            "time and its share of the policy's)")


def _fits(live: _Live, policy, cfg: PlayConfig, context: int) -> bool:
    """Whether the next turn fits the context budget; ends the episode (truncated) if not."""
    prompt_ids = getattr(policy, "prompt_ids", None)
    if callable(prompt_ids) and live.turns:
        try:
            live.next_prompt = len(prompt_ids(live.conversation(cfg.thinking)))
        except PolicyError as e:
            live.end("policy_error", e.reason)
            return False
    return _within_budget(live, cfg, context)


def _within_budget(live: _Live, cfg: PlayConfig, context: int) -> bool:
    """Whether ``live.next_prompt`` and a whole reply fit ``context``; ends the episode
    (truncated) if not."""
    if live.next_prompt + cfg.max_tokens > context:
        live.truncated = True
        live.end("truncated", f"context budget of {context} tokens reached "
                              f"(next prompt ~{live.next_prompt} + {cfg.max_tokens} reply tokens)")
        return False
    return True


def _admit(queue: deque, lives: list, live: list[int], at_once: int, sandbox,
           cfg: PlayConfig) -> list[int]:
    """Start jobs from ``queue`` while fewer than ``at_once`` episodes are live; their indices."""
    started = []
    while queue and len(live) < at_once:
        i, job = queue.popleft()
        lives[i] = _start(sandbox, job, cfg)
        live.append(i)
        started.append(i)
    return started


def _sampling(cfg: PlayConfig, **extra):
    """How a turn is sampled (``extra``: the row seeds, the move to stop at)."""
    return SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                          max_tokens=cfg.max_tokens, **extra)


def policy_charges(seconds: float, completions: Sequence) -> list[float]:
    """Each row's share of a batched policy call that took ``seconds``: in proportion to its
    work, the tokens it generated plus one (for its prompt), so a row pays for its own reply
    and not for a longer one beside it; a failed row (None) pays nothing.

    >>> from types import SimpleNamespace as C
    >>> [round(c, 6) for c in policy_charges(1.2, [C(output_ids=(1,) * 9), C(output_ids=(2,)), None])]
    [1.0, 0.2, 0.0]
    >>> policy_charges(0.5, [None, None])
    [0.0, 0.0]
    """
    work = [0 if c is None else len(c.output_ids) + 1 for c in completions]
    total = sum(work)
    return [seconds * w / total if total else 0.0 for w in work]


def _chat(policy, lives: list[_Live], params, thinking: bool | None) -> list:
    """One batched chat call; on PolicyError, each conversation alone (with its own row seed,
    so a retried row samples as it would have in the batch), so that one bad conversation fails
    only its own episode. Returns a completion or None per live episode."""
    convs = [lv.conversation(thinking) for lv in lives]
    try:
        return list(policy.chat(convs, params))
    except PolicyError as e:
        if len(lives) == 1:
            lives[0].end("policy_error", e.reason)
            return [None]
    out = []
    for i, (lv, conv) in enumerate(zip(lives, convs)):
        alone = dataclasses.replace(params, row_seeds=params.row_seeds[i:i + 1]) if params.row_seeds else params
        try:
            out.append(policy.chat([conv], alone)[0])
        except PolicyError as e:
            lv.end("policy_error", e.reason)
            out.append(None)
    return out


def play(policy, sandbox, jobs: Sequence[PlayJob], cfg: PlayConfig, *, seed: int = 0,
         progress=None, clock=time.monotonic) -> list[Episode]:
    """Play every job to its end and return one :class:`Episode` per job, in job order.

    ``policy`` follows ``spadework.policy.base.Policy``; ``sandbox`` is a started
    ``spadework.sandbox.Sandbox`` (the caller owns both). Each episode's turn is sampled from its
    own seed, :func:`turn_seed` of (``seed``, the job, the turn), whatever else shares its batch,
    so the same jobs with the same weights replay the same episodes (a resumed stage relies on
    it), and so do the same jobs split across rollout workers (``spadework.distributed``), up to
    the float rounding of a batch's padding.
    ``progress(done, total)``, when given, is called after every turn, in turns: ``total`` is
    ``len(jobs) * cfg.max_turns`` and an episode that ends early counts its remaining turns as
    done, so the count moves at every turn, not only when episodes end (which in batched play is
    mostly at the last turn).
    """
    context = min(cfg.context_tokens, int(getattr(policy, "context_length", cfg.context_tokens)))
    tool_role = tool_role_for(policy, cfg)
    queue = deque(enumerate(jobs))
    lives: list[_Live | None] = [None] * len(jobs)
    live: list[int] = []
    at_once = min(cfg.batch_size, getattr(policy, "max_batch_size", None) or cfg.batch_size)

    def report() -> None:
        if progress is not None:
            progress(sum(cfg.max_turns if lv.status is not None else min(len(lv.turns), cfg.max_turns)
                         for lv in lives if lv is not None), len(jobs) * cfg.max_turns)

    try:
        if cfg.continuous and streams(policy):
            try:
                _stream(policy, sandbox, cfg, context, tool_role, seed, queue, lives, live,
                        at_once, report)
            except PolicyError:
                pass  # the engine failed a step: the episodes left are played turn by turn below
        while queue or live:
            _admit(queue, lives, live, at_once, sandbox, cfg)
            batch = [i for i in live if lives[i].status is None and _fits(lives[i], policy, cfg, context)]
            if batch:
                settings = {lives[i].job.env.setting for i in batch}
                move = settings.pop() if cfg.stop_at_move and len(settings) == 1 else None
                params = _sampling(cfg, row_seeds=[turn_seed(seed, lives[i].job, len(lives[i].turns))
                                                   for i in batch], stop_at_move=move)
                start = clock()
                completions = _chat(policy, [lives[i] for i in batch], params, cfg.thinking)
                charges = policy_charges(clock() - start, completions)
                for i, completion, charge in zip(batch, completions, charges):
                    lives[i].charged += charge
                    if completion is not None:
                        _advance(lives[i], completion, cfg, tool_role, params.record)
            live = [i for i in live if lives[i].status is None]
            report()
    finally:
        for lv in lives:
            if lv is not None and lv.handle is not None:
                lv.handle.close()
    return [lv.record() for lv in lives]  # type: ignore[union-attr]


def _stream(policy, sandbox, cfg: PlayConfig, context: int, tool_role: str, seed: int,
            queue: deque, lives: list, live: list[int], at_once: int, report) -> None:
    """Play the jobs in ``queue`` through ``policy.stream`` (see ``PlayConfig.continuous``),
    keeping ``lives`` and ``live`` (the indices of episodes not yet ended) as :func:`play` does,
    so that if the engine fails a step the episodes left go on turn by turn from there."""
    params = _sampling(cfg)

    def turn(i: int) -> StreamRequest | None:
        """Episode ``i``'s next turn, or None when it has ended (or ends here: no room left)."""
        lv = lives[i]
        if lv.status is not None:
            return None
        try:
            ids = policy.prompt_ids(lv.conversation(cfg.thinking))
        except PolicyError as e:
            lv.end("policy_error", e.reason)
            return None
        lv.next_prompt = len(ids)
        # as _fits: a first prompt too long for the model is the engine's PolicyError, as in chat
        if lv.turns and not _within_budget(lv, cfg, context):
            return None
        return StreamRequest(i, ids, turn_seed(seed, lv.job, len(lv.turns)),
                             lv.job.env.setting if cfg.stop_at_move else None)

    def after(episodes: list[int]) -> list[StreamRequest]:
        """The next turns of ``episodes``; each one that has ended gives its place to new jobs."""
        out, todo = [], deque(episodes)
        while todo:
            i = todo.popleft()
            request = turn(i)
            if request is not None:
                out.append(request)
            else:
                live.remove(i)
                todo.extend(_admit(queue, lives, live, at_once, sandbox, cfg))
        return out

    def on_done(request: StreamRequest, result) -> list[StreamRequest]:
        lv = lives[request.key]
        if isinstance(result, PolicyError):
            lv.end("policy_error", result.reason)
        else:
            lv.charged += float(result.metadata.get("seconds", 0.0))
            _advance(lv, result, cfg, tool_role, params.record)
        report()
        return after([request.key])

    first = after(_admit(queue, lives, live, at_once, sandbox, cfg))
    # room for a whole episode from the start (a KV cache grown mid-stage drops every cached
    # conversation): each turn adds a reply and an observation, taken as long as the opening
    opening = max((len(r.prompt_ids) for r in first), default=0)
    policy.stream(first, params, on_done,
                  cells=min(context, opening + cfg.max_turns * (cfg.max_tokens + opening)))

"""``[play]``: how the agent plays an episode (turns, tokens, sampling, time)."""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError

TOOL_MESSAGES = ("auto", "tool", "user")


@dataclass(frozen=True)
class PlayConfig:
    """How episodes are played. Both arms always share one PlayConfig."""

    max_turns: int = 8
    """Replies per episode; the environment is built with the same ``max_turns``."""
    max_tokens: int = 192
    """Tokens per reply."""
    context_tokens: int = 4096
    """Prompt plus reply must fit; an episode whose next turn would not fit is truncated."""
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 20
    episode_seconds: float = 600.0
    """Time budget of one episode; past it the episode is a timeout. It is charged the
    episode's own environment time (load, reset, steps) and its share of each batched policy
    call by the work it asked for (:func:`policy_charges`: a call that took T seconds charges
    each row T times its share of the call's tokens), not the wall clock: in batched play every
    episode waits for the whole batch, so on a loaded machine the wall clock would time out
    every episode of a long stage at once. A timeout is a failure of the host, not a loss: the
    episode's seed is left out of both arms' scores (:func:`spadework.metrics.score_env`)."""
    batch_size: int = 64
    """Episodes live at once (one sandbox child each, one chat row each per turn), at most the
    policy's ``max_batch_size`` where it has one: an engine that keeps each conversation's
    cached prefix in one of its rows (llama.cpp) must not be asked for more conversations than
    it has rows, or they evict each other's caches and every turn prefills its whole
    conversation again (measured on a cpu-qwen play stage, 40 episodes on 16 rows: 38,389 of
    42,894 prompt tokens recomputed)."""
    tool_messages: str = "auto"
    """Tool results as ``tool`` messages, ``user`` messages, or ``auto`` (by the chat template)."""
    template_tools: bool = True
    """Give the tool schemas to the chat template (tool use). Qwen-style templates render them
    as a JSON block in the system message: for the six tool starters 800-1,100 tokens, about
    three quarters of a first prompt (Qwen2.5-Coder tokenizer; 1,189-1,664 tokens with it,
    411-545 without), prefilled for every row and, with ``history_turns = 0``, every turn, and
    trained on by the learner. False: the opening message lists the tools compactly instead
    (``name(arg: type, ...): description``), as ToolEnv's first observation already does.
    Measured (``benchmarks/starter_levels.py --preset cpu-qwen-tools --levels 1``): the base
    0.5B won the calendar's level 1 in 10 of 10 plays with the schemas in the template and 2
    of 5 without, so every preset keeps them."""
    stop_on_length: bool = False
    """End an episode (truncated) when a reply hits ``max_tokens``, as the reference does."""
    thinking: bool | None = None
    """``enable_thinking`` for templates that have it; None keeps the template's default."""
    stop_at_move: bool = True
    """End each reply at its first complete move (a closed ``\\boxed{}``; a closed tool call or
    answer), recorded as ``finish_reason == "move"`` (``SamplingParams.stop_at_move``). A small
    model that has written its move and goes on writes more boxes a parser may misread and
    tokens the learner must train on; measured before this setting, about half of the 0.5B
    agent's replies were cut at 128 tokens before any move."""
    history_turns: int | None = None
    """How much of the episode each reply is sampled from. None: the whole conversation. ``k``:
    the opening message and the last ``k`` exchanges (reply and observation); 0: one message,
    the opening rebuilt around the latest observation (the task, the hint in the hinted arm,
    the reply format). A games observation restates the task, the last move and what was wrong
    with it (:class:`gameenv.GameEnv`), so 0 loses no state there. Each turn's prompt is
    recorded as sampled, so the learner trains on what the agent saw; packing
    (``learner.pack_turns``) joins only turns whose prompts continue each other. Why it exists:
    with the whole conversation the base 0.5B agent often writes its earlier reply again
    whatever the feedback said (in 3 of 4 transcripts of short arithmetic games, turns 2-4).
    Measured (``benchmarks/starter_levels.py --history 0``, level 1, 10 plays, seed 7): on
    the nine starters a run's pool draws from, 0 is no better, 11 wins of 90 against 12 of 90
    with the whole conversation, so no preset sets it."""
    continuous: bool = True
    """Sample every live episode's turns through one continuously filled batch where the
    policy has a stream (``LlamaCppPolicy.stream``): an episode's next turn joins the engine's
    batch as soon as its reply is in and its environment has stepped, beside replies still
    decoding, and a finished episode's place goes to the next job at once. Off (or a policy
    without a stream): one ``chat`` call per turn of all live episodes, which waits for the
    longest reply of the turn (measured on a cpu-qwen play stage: 4.97 rows per decode step of
    40 live episodes). Each episode samples from the same seeds either way."""

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ConfigError(f"PlayConfig.max_turns must be >= 1, got {self.max_turns}")
        if self.max_tokens < 1 or self.context_tokens <= self.max_tokens:
            raise ConfigError(
                "PlayConfig needs max_tokens >= 1 and context_tokens > max_tokens "
                f"(got {self.max_tokens} and {self.context_tokens})"
            )
        if not self.episode_seconds > 0 or self.batch_size < 1:
            raise ConfigError("PlayConfig.episode_seconds must be > 0 and batch_size >= 1")
        if self.history_turns is not None and (isinstance(self.history_turns, bool)
                                               or not isinstance(self.history_turns, int)
                                               or self.history_turns < 0):
            raise ConfigError("PlayConfig.history_turns must be a whole number >= 0 or unset "
                              f"(the whole conversation), got {self.history_turns!r}")
        if self.tool_messages not in TOOL_MESSAGES:
            raise ConfigError(f"PlayConfig.tool_messages must be one of {TOOL_MESSAGES}, "
                              f"got {self.tool_messages!r}")

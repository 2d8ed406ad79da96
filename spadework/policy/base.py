"""The Policy protocol: batched chat in, completions with token ids and logprobs out.

Every backend (transformers, an OpenAI-compatible server) implements ``chat``. The learner trains
on exactly what was sampled, so a ``Completion`` carries the prompt token ids, the output token
ids and one logprob per output token, not only text.

Logprob convention (all backends): the log-probability of each sampled token under the *raw
model distribution at the sampling temperature*, ``log_softmax(logits / T)``, before top-k / top-p
truncation (``T = 1`` for greedy decoding). Why: the learner recomputes
``log_softmax(logits / T)`` by a teacher-forced forward pass; truncation is not reproducible there
(the nucleus boundary moves with tiny numeric changes) and renormalising over the nucleus would
add a per-step constant to every importance ratio. This is what SGLang returns by default and
what GRPO with truncated importance sampling (TIS) expects. vLLM's default (``--logprobs-mode
raw_logprobs``) is the distribution *before* temperature; ``spadework.distributed.engines`` starts
vLLM with ``processed_logprobs`` (after temperature and truncation), the nearer of its modes,
which is higher than the convention by ``-log(kept mass)``. The learner scores the convention
for every sample whatever the backend; :mod:`spadework.train.grpo` says what that costs on vLLM,
measured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from spadework.env.actions import strip_thinking
from spadework.env.gameenv.boxes import extract_boxed
from spadework.errors import ConfigError
from spadework.seeding import derive_seed
from spadework.types import Sampling

FinishReason = Literal["stop", "length", "move", "repeat"]

#: What ``SamplingParams.stop_at_move`` may name: the setting whose move ends a reply.
MOVE_SETTINGS = ("games", "tool-use")


def cut_at_move(text: str, setting: str) -> tuple[str, bool]:
    """``text`` up to the end of its first complete move (a closed box; a closed tool call or
    answer), and whether it was cut: what a backend honouring ``stop_at_move`` returns.

    >>> cut_at_move("I say \\\\boxed{3}. Or \\\\boxed{4}", "games")
    ('I say \\\\boxed{3}', True)
    >>> cut_at_move("<answer>7</answer> done", "tool-use"), cut_at_move("no move", "games")
    (('<answer>7</answer>', True), ('no move', False))
    """
    for end in range(1, len(text) + 1):
        if text[end - 1] in "}>" and holds_move(text[:end], setting):
            return text[:end], end < len(text)
    return text, False


def holds_move(text: str, setting: str) -> bool:
    """Whether a reply already holds a complete move of ``setting``: a closed ``\\boxed{...}``
    (games), or a closed ``</tool_call>`` or ``</answer>`` (tool use). What ends a reply under
    ``SamplingParams.stop_at_move``: a small model that has written its move and goes on only
    adds text a parser may misread and tokens the learner must train on.

    >>> holds_move("I add them: \\\\boxed{12", "games"), holds_move("so \\\\boxed{12}", "games")
    (False, True)
    >>> holds_move('<tool_call>{"name": "f"}</tool_call>', "tool-use")
    True
    >>> holds_move("<think>maybe \\\\boxed{1}", "games")  # drafted while thinking: not a move yet
    False

    Moves are looked for where the rollout's parser looks (``spadework.env.actions.
    strip_thinking``): after the last ``</think>``, and not inside a ``<think>`` left open.
    """
    visible = strip_thinking(text)
    if setting == "games":
        return "}" in visible and extract_boxed(visible) is not None
    return "</tool_call>" in visible or "</answer>" in visible


#: The longest block of lines :func:`ends_in_loop` looks for (the 1.5B designer's loops repeat
#: blocks of 1, 2, 4, 6 and 8 lines), and the fewest characters a block must hold to count:
#: short lines (``else:``, ``return x``, a closing bracket) recur in any module, while a list
#: that cycles through six short items (``"light brown",`` ...) is a loop all the same.
LOOP_MAX_LINES = 16
LOOP_LINE_CHARS = 20
#: A line still open after this many characters is asked whether it loops (:func:`line_loops`):
#: the designer's own lines stay under 120 characters (a long task sentence: 300), and a line
#: that loops (``"item1", "item2", ...``) runs to ``max_tokens`` without a newline.
LOOP_LONG_LINE = 400
#: The end of such a line that must repeat one pattern of at most ``LOOP_MAX_PERIOD``
#: characters (digits counted as one): ``"Sow Thistle", `` or ``"item17", ``.
LOOP_WINDOW = 200
LOOP_MAX_PERIOD = 40

_DIGITS = re.compile(r"[0-9]+")


def ends_in_loop(text: str, times: int, max_lines: int = LOOP_MAX_LINES,
                 min_chars: int = LOOP_LINE_CHARS) -> bool:
    """Whether the complete lines of ``text`` end with one block of 1 to ``max_lines`` lines
    (compared stripped, together at least ``min_chars`` characters) written ``times`` times in
    a row, or its last line, still open, is a long one that repeats one pattern
    (:func:`line_loops`): what ends a reply under ``SamplingParams.stop_at_repeat``, asked at
    each newline and along a long line.

    >>> line = "self.a = rng.choice([1, 2, 3])\\n"
    >>> loop = "x = 1\\n" + line * 3
    >>> ends_in_loop(loop, 3), ends_in_loop(loop, 4), ends_in_loop("else:\\n" * 9, 3)
    (True, False, False)
    >>> ends_in_loop((line + "self.b = rng.choice([4, 5])\\n") * 3, 3)  # a block of two lines
    True
    >>> ends_in_loop(line * 2 + "y = 2\\n" + line, 3), ends_in_loop(line * 2 + line[:-1], 3)
    (False, False)
    >>> colours = "".join(f'    "{c}",\\n' for c in ("tan", "light tan", "gray", "light gray"))
    >>> ends_in_loop("x = [\\n" + colours * 4, 4), ends_in_loop("]\\n" * 40, 4)  # short lines
    (True, False)
    >>> ends_in_loop("names = [" + ", ".join(f'"item{i}"' for i in range(60)), 4)  # one line
    True
    """
    if line_loops(text[text.rfind("\n") + 1:]):
        return True
    lines = [line.strip() for line in text.split("\n")[:-1]]  # the last one is not complete
    n = len(lines)
    for p in range(1, min(max_lines, n // times) + 1):
        block = lines[n - p:]
        if sum(map(len, block)) >= min_chars and all(
                lines[n - (k + 1) * p:n - k * p] == block for k in range(1, times)):
            return True
    return False


def line_loops(line: str, long: int = LOOP_LONG_LINE, window: int = LOOP_WINDOW,
               max_period: int = LOOP_MAX_PERIOD) -> bool:
    """Whether ``line`` is at least ``long`` characters and its last ``window`` characters, each
    run of digits counted as one, repeat one pattern of at most ``max_period`` characters at
    least four times: a reply writing numbered names, or one phrase, on one line without end.

    >>> line_loops('"Sow Thistle", ' * 30), line_loops('"Sow Thistle", ' * 20)
    (True, False)
    >>> line_loops("The " + " ".join(f"record {i} holds {i * 7} units;" for i in range(40)))
    True
    >>> task = ('return (f"Place Catherine II on the grid. She was Empress of Russia from '
    ...         '1762 to 1796; her long reign helped Russia thrive in a golden age during the '
    ...         'Enlightenment, which led to the founding of many new cities, universities and '
    ...         'theatres, to immigration from the rest of Europe and to the recognition of Russia '
    ...         'as one of the great powers of Europe. The grid is {self.width} by {self.height} '
    ...         'squares; where does she end after {len(self.moves)} moves? Answer as x y, '
    ...         'two numbers.")')
    >>> len(task) > LOOP_LONG_LINE, line_loops(task)  # long, but no loop
    (True, False)
    """
    if len(line) < long:
        return False
    tail = _DIGITS.sub("0", line[-window:])
    return any(len(tail) >= 4 * p and tail[p:] == tail[:-p] for p in range(1, max_period + 1))


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``temperature == 0`` means greedy; ``top_k == 0`` and ``top_p == 1`` are off.

    ``n`` samples are drawn per conversation. ``stop`` strings end a completion (the text excludes
    the stop string, as in the OpenAI API). ``seed`` makes sampling reproducible: sample ``j`` of
    conversation ``i`` draws from its own generator seeded from ``(seed, i, j)``, so a row's
    tokens do not depend on which other rows share its batch (up to float rounding of padding).

    >>> SamplingParams(temperature=0.6, top_k=20).top_k
    20
    >>> SamplingParams(temperature=-1)
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: temperature must be >= 0 (0 = greedy), got -1
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 256
    n: int = 1
    stop: tuple[str, ...] = ()
    seed: int | None = None
    row_seeds: tuple[int, ...] = ()
    """One seed per conversation, in place of ``seed``: sample ``j`` of conversation ``i`` then
    draws from ``(row_seeds[i], j)``, so a row's tokens depend on the row itself, not on where
    it sits in the batch nor on which batch it is in (how ``rollout.play`` seeds each episode's
    turns, so that one episode samples alike on one worker or split across several)."""
    stop_at_move: str | None = None
    """``"games"`` or ``"tool-use"``: end a reply at the token that completes its first move
    (:func:`holds_move`), with ``finish_reason == "move"``. The local backends (transformers,
    llama.cpp) honour it; OpenAI-compatible servers cannot and ignore it (the rollout parses
    the move either way)."""
    stop_at_repeat: int | None = None
    """End a reply once it has written one block of lines this many times in a row
    (:func:`ends_in_loop`), with ``finish_reason == "repeat"``: a small model caught in a loop
    writes the same lines until ``max_tokens``, and a design stage waits for it
    (``DesignConfig.stop_at_repeat``). The local backends honour it; OpenAI-compatible servers
    ignore it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "row_seeds", tuple(int(s) for s in self.row_seeds))
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.n < 1:
            raise ConfigError(f"n must be >= 1, got {self.n}")
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        if any(not s for s in self.stop):
            raise ConfigError("stop strings must be non-empty")
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or not isinstance(
                self.max_tokens, int) or self.max_tokens < 1):
            raise ConfigError(f"max_tokens must be a whole number >= 1 or None, got "
                              f"{self.max_tokens!r}")
        if self.stop_at_move is not None and self.stop_at_move not in MOVE_SETTINGS:
            raise ConfigError(f"stop_at_move must be one of {MOVE_SETTINGS} or None, got "
                              f"{self.stop_at_move!r}")
        if self.stop_at_repeat is not None and (isinstance(self.stop_at_repeat, bool) or not
                                                isinstance(self.stop_at_repeat, int)
                                                or self.stop_at_repeat < 2):
            raise ConfigError(f"stop_at_repeat must be a whole number >= 2 or None, got "
                              f"{self.stop_at_repeat!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def sample_seed(self, base: int, i: int, j: int) -> int:
        """The seed of sample ``j`` of conversation ``i``: from ``row_seeds[i]`` when given,
        else from (``base``, i, j), ``base`` being ``seed`` or a random one drawn per call.

        >>> p = SamplingParams(row_seeds=(7, 8))
        >>> p.sample_seed(0, 1, 0) == SamplingParams(row_seeds=(8,)).sample_seed(5, 0, 0)
        True
        """
        if self.row_seeds:
            if i >= len(self.row_seeds):
                raise ConfigError(f"row_seeds has {len(self.row_seeds)} seeds but the batch has "
                                  f"more conversations (row {i}); give one seed per conversation")
            return derive_seed(self.row_seeds[i], j)
        return derive_seed(base, i, j)

    @property
    def record(self) -> Sampling:
        """What a sample drawn with these parameters records about how it was drawn."""
        return Sampling(self.temperature, self.top_p, self.top_k)


@dataclass(frozen=True)
class Conversation:
    """One chat to continue: messages (OpenAI-style dicts), optional tool schemas, thinking switch.

    ``tools`` are JSON-schema tool declarations handed to the chat template (tool-use settings).
    ``thinking`` is passed as ``enable_thinking`` where the template has that switch; ``None``
    keeps the template's default.
    """

    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    thinking: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(self.tools))
        for m in self.messages:
            if not isinstance(m, Mapping) or "role" not in m:
                raise ConfigError(f"each message must be a dict with a 'role', got {m!r:.80}")


ConversationLike = Conversation | Sequence[Mapping[str, Any]] | str


def as_conversation(item: ConversationLike) -> Conversation:
    """Accept a ``Conversation``, a list of message dicts, or a bare user prompt string.

    >>> as_conversation("hi").messages
    ({'role': 'user', 'content': 'hi'},)
    """
    if isinstance(item, Conversation):
        return item
    if isinstance(item, str):
        return Conversation(messages=({"role": "user", "content": item},))
    return Conversation(messages=tuple(item))


@dataclass(frozen=True)
class Completion:
    """One sampled reply.

    ``output_ids`` include the end-of-sequence token when the model emitted one (the learner must
    learn to stop) and the token that completed a stop string; ``text`` excludes both.
    ``logprobs[k]`` is the logprob of ``output_ids[k]`` (see the module docstring), so the two
    have equal length; a backend that cannot supply logprobs returns an empty tuple.
    ``ids_from`` says how trustworthy the ids are: ``"model"`` (sampled locally, exact),
    ``"server"`` (the server reported ids), ``"retokenized"`` (rebuilt from text locally; may
    differ from what the server sampled).
    """

    text: str
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason
    ids_from: str = "model"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.logprobs and len(self.logprobs) != len(self.output_ids):
            raise ValueError(
                f"{len(self.logprobs)} logprobs for {len(self.output_ids)} output tokens"
            )


@dataclass(frozen=True)
class StreamRequest:
    """One reply to sample in a continuous stream (``LlamaCppPolicy.stream``).

    ``key`` names what the reply belongs to (an episode): the engine keeps the sequence whose
    cached cells served a key for that key's next request, so a conversation that continues
    finds its cached prefix even when other conversations start beside it. ``prompt_ids`` are
    the rendered prompt; ``seed`` is a row seed as in ``SamplingParams.row_seeds`` (the reply
    draws what ``chat`` draws for that row seed); ``stop_at_move`` replaces the stream's
    ``SamplingParams.stop_at_move`` for this reply, and ``max_tokens`` (when set) its
    ``max_tokens`` (a designer's short plan turn beside module replies).
    """

    key: Any
    prompt_ids: tuple[int, ...]
    seed: int
    stop_at_move: str | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_ids", tuple(int(t) for t in self.prompt_ids))
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or not isinstance(
                self.max_tokens, int) or self.max_tokens < 1):
            raise ConfigError(f"max_tokens must be a whole number >= 1 or None, got "
                              f"{self.max_tokens!r}")
        if self.stop_at_move is not None and self.stop_at_move not in MOVE_SETTINGS:
            raise ConfigError(f"stop_at_move must be one of {MOVE_SETTINGS} or None, got "
                              f"{self.stop_at_move!r}")


def streams(policy: Any) -> bool:
    """Whether ``policy`` samples through a continuous stream (``stream``, with the rendered
    ``prompt_ids`` the stream's requests carry): ``LlamaCppPolicy``, also inside a
    ``BaseWeights``."""
    return callable(getattr(policy, "stream", None)) and callable(getattr(policy, "prompt_ids", None))


@runtime_checkable
class Policy(Protocol):
    """A model that continues chats.

    ``chat`` returns ``len(conversations) * params.n`` completions, conversation-major:
    the ``n`` samples of conversation 0, then those of conversation 1, and so on. It raises
    ``PolicyError`` (with the cause) when the backend fails, never hangs, and never returns a
    partial list. ``context_length`` is the model's token window (prompt plus output).
    """

    @property
    def context_length(self) -> int: ...

    def chat(
        self, conversations: Sequence[ConversationLike], params: SamplingParams
    ) -> list[Completion]: ...


def template_has_thinking(template: str | None) -> bool:
    """Whether a chat template reads an ``enable_thinking`` switch.

    >>> template_has_thinking("{% if enable_thinking %}<think>{% endif %}")
    True
    >>> template_has_thinking(None)
    False
    """
    return bool(template) and "enable_thinking" in template


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string; return (text, whether one was found).

    >>> cut_at_stop("abc</a>def</b>", ["</b>", "</a>"])
    ('abc', True)
    >>> cut_at_stop("abc", ["x"])
    ('abc', False)
    """
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    if not hits:
        return text, False
    return text[: min(hits)], True


class BaseWeights:
    """``policy`` sampled with its base weights: each ``chat`` runs inside
    ``policy.base_weights()``, so the LoRA adapter the learner trains (for the other role) is
    off for these calls and on for everyone else's. How a frozen role shares a trained model.

    ``policy`` must have ``base_weights()`` (``HFPolicy``, ``LlamaCppPolicy``).
    """

    def __init__(self, policy: Any) -> None:
        if not callable(getattr(policy, "base_weights", None)):
            raise ConfigError(f"a {type(policy).__name__} cannot switch its adapter off; give the "
                              "frozen role its own model (designer_model / agent_model)")
        self.policy = policy

    @property
    def context_length(self) -> int:
        return self.policy.context_length

    def chat(self, conversations: Sequence[ConversationLike], params: SamplingParams) -> list[Completion]:
        with self.policy.base_weights():
            return self.policy.chat(conversations, params)

    def __getattr__(self, name: str) -> Any:
        # what the rollout and the loop look for: the rendered prompt, the cache's release, and
        # the continuous stream where the policy has one (run, like chat, with the adapter off)
        if name in ("prompt_ids", "release"):  # release: free the cache (the run's memory)
            return getattr(self.__dict__.get("policy"), name)
        if name == "stream" and callable(getattr(self.__dict__.get("policy"), "stream", None)):
            return self._stream
        raise AttributeError(name)

    def _stream(self, *args: Any, **kwargs: Any) -> Any:
        with self.policy.base_weights():
            return self.policy.stream(*args, **kwargs)

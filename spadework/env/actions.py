"""Parse agent replies on the host: ``\\boxed{...}`` for games, tool calls and ``<answer>`` for
tool use. Standard library only.

The tool-call format has exactly one parser, :mod:`spadework.env.toolenv` (it also runs inside
the sandbox as ``toolenv``); this module wraps it, turning its ``ToolCallFormatError`` into
:class:`~spadework.errors.ActionParseError`, and re-exports its ``ToolCall`` and
``format_tool_call``.

One rule for malformed input: the small parsers (:func:`parse_tool_calls`) raise
:class:`ActionParseError` with a reason; :func:`parse_action`, the entry point of a rollout,
never raises on any reply text. It returns a :class:`ParsedAction` whose ``error`` says what is
missing or malformed, because a bad turn is data for the episode, not a crash.

Departures from the reference (``utils/parsing.py``): its ``extract_boxed_answer`` first tries
regexes for brace-free boxes, so the *first* brace-free box wins over a later one
(``"\\boxed{\\frac{1}{2}} and \\boxed{3}"`` gives ``3``, ``"\\boxed{1} ... \\boxed{2}"`` gives
``1``); here the last complete box always wins, with nested braces kept. The reference never
drops an unclosed ``<think>``, so reasoning cut off by the token limit could count as the action.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spadework.env.gameenv.boxes import extract_boxed
from spadework.env.gameenv.boxes import unwrap as _unwrap
from spadework.env.toolenv import (
    ToolCall,
    ToolCallFormatError,
    format_tool_call,
)
from spadework.env.toolenv import parse_answer as _toolenv_parse_answer
from spadework.env.toolenv import parse_bare_call as _toolenv_parse_bare_call
from spadework.env.toolenv import parse_tool_calls as _toolenv_parse_tool_calls
from spadework.errors import ActionParseError, ConfigError

__all__ = [
    "ParsedAction",
    "ToolCall",
    "extract_boxed",
    "format_answer",
    "format_boxed",
    "format_tool_call",
    "parse_action",
    "parse_answer",
    "parse_tool_calls",
    "strip_thinking",
]

_BOX_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")
_END_TOKEN = re.compile(r"(?:<\|[A-Za-z0-9_]{1,60}\|>|</s>)\Z")


def strip_thinking(text: str) -> str:
    """The part of a reply that can hold an action: the text after the last ``</think>``,
    stripped, and cut at a later ``<think>`` that is never closed.

    Reasoning left open (``<think>`` without ``</think>``) was cut off by the token limit: what
    follows it is unfinished thought, and treating a box or tool call drafted in it as the action
    would reward the agent for text it never committed to. So a reply that opens with ``<think>``
    and never closes it has no action at all and gives ``""``. A reply without think tags is
    returned stripped; a reply with only ``</think>`` (chat templates put the opening tag in the
    prompt) loses everything up to it.

    >>> strip_thinking("<think>maybe \\\\boxed{1}</think> So: \\\\boxed{2}")
    'So: \\\\boxed{2}'
    >>> strip_thinking("reasoning without the opening tag</think>\\nanswer")
    'answer'
    >>> strip_thinking("<think>still thinking \\\\boxed{1}")
    ''
    >>> strip_thinking("  plain reply ")
    'plain reply'
    """
    cut = text.rfind("</think>")
    if cut >= 0:
        text = text[cut + len("</think>"):]
    opened = text.find("<think>")
    if opened >= 0:
        text = text[:opened]
    return text.strip()


def format_boxed(answer: str) -> str:
    """Write an answer as ``\\boxed{answer}``, so that :func:`extract_boxed` gives it back exactly.

    Raises ValueError for an answer that could not come back unchanged: unbalanced braces,
    surrounding whitespace, braces wrapping the whole answer, or a ``\\boxed`` inside it.

    >>> format_boxed(r"\\frac{1}{2}")
    '\\\\boxed{\\\\frac{1}{2}}'
    >>> format_boxed("{7}")
    Traceback (most recent call last):
    ...
    ValueError: '{7}' is wrapped in braces, which extract_boxed removes; box '7' instead
    """
    depth = 0
    for m in _BRACE.finditer(answer):
        depth += 1 if m.group() == "{" else -1
        if depth < 0:
            break
    if depth != 0:
        raise ValueError(f"{answer!r} has unbalanced braces; a box cannot hold it")
    if answer != answer.strip():
        raise ValueError(f"{answer!r} has surrounding whitespace, which extract_boxed strips")
    if answer and _unwrap(answer) != answer:
        raise ValueError(f"{answer!r} is wrapped in braces, which extract_boxed removes; "
                         f"box {_unwrap(answer)!r} instead")
    if _BOX_OPEN.search(answer):
        raise ValueError(f"{answer!r} holds a \\boxed of its own, which extract_boxed would pick")
    return "\\boxed{" + answer + "}"


def format_answer(answer: str) -> str:
    """Write a final tool-use answer as ``<answer>answer</answer>``; :func:`parse_answer` gives
    back ``answer.strip()``. Raises ValueError if the answer contains ``</answer>``.

    >>> format_answer("42")
    '<answer>42</answer>'
    >>> parse_answer(format_answer(" 42 "))
    '42'
    """
    if "</answer>" in answer:
        raise ValueError(f"{answer!r} contains </answer>, which would end the answer early")
    return f"<answer>{answer}</answer>"


def parse_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>`` outside thinking, else None
    (:func:`strip_thinking` and trailing end-of-turn tokens first, then the toolenv parser).

    >>> parse_answer("<think><answer>1</answer></think> done: <answer>2</answer>")
    '2'
    >>> parse_answer("<think>I will answer <answer>1</answer>") is None
    True
    """
    return _toolenv_parse_answer(_visible(text))


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every tool call outside thinking, in order (JSON ``<tool_call>`` blocks and XML
    ``<function=...>`` calls, nested arguments kept). Raises :class:`ActionParseError` naming
    the first malformed call.

    >>> parse_tool_calls('<tool_call>{"name": "find", "arguments": {"q": {"id": [1, 2]}}}</tool_call>')
    [ToolCall(name='find', arguments={'q': {'id': [1, 2]}})]
    >>> parse_tool_calls('<tool_call>{"name": "find", "arguments": {"q": }}</tool_call>')
    Traceback (most recent call last):
    ...
    spadework.errors.ActionParseError: tool call 1: invalid JSON at line 1 column 48: Expecting value
    """
    try:
        return _toolenv_parse_tool_calls(_visible(text))
    except ToolCallFormatError as e:
        raise ActionParseError(str(e.args[0])) from e


@dataclass(frozen=True)
class ParsedAction:
    """What one agent reply holds.

    ``text`` is the reply after thinking and trailing end-of-turn tokens. Games fill ``boxed``;
    tool use fills ``tool_calls`` and/or ``answer`` (the reference lets an answer take
    precedence over calls in the same reply; that choice belongs to the rollout). ``error`` is
    empty when the reply is well formed and holds an action; else it says what is missing or
    malformed, in words the agent can be shown. Fields parsed before an error stay filled (a
    reply with a bad tool call and a good answer keeps the answer).

    >>> a = parse_action("Moving on: \\\\boxed{ {left} }", "games")
    >>> a.boxed, a.ok, a.env_action
    ('left', True, '\\\\boxed{left}')
    """

    setting: str
    text: str
    boxed: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def env_action(self) -> str:
        """What a games environment's ``step()`` gets: ``\\boxed{content}`` when a box was
        found (as the reference passes it), else the text, so the environment can answer with
        its own format reminder. Tool-use environments get ``text``."""
        if self.setting == "games" and self.boxed is not None:
            return "\\boxed{" + self.boxed + "}"
        return self.text


def parse_action(reply: str, setting: str) -> ParsedAction:
    """Parse one agent reply for ``setting`` ``"games"`` or ``"tool-use"``; never raises on
    reply text (see the module docstring). Raises ConfigError for an unknown setting.

    >>> parse_action("I think it is \\\\boxed{ 42 }.", "games").boxed
    '42'
    >>> parse_action("I give up.", "games").error
    'no \\\\boxed{...} in the reply: put the final answer in \\\\boxed{}'
    >>> a = parse_action('<tool_call>{"name": "ls", "arguments": {}}</tool_call>', "tool-use")
    >>> a.tool_calls, a.answer, a.ok
    ((ToolCall(name='ls', arguments={}),), None, True)
    """
    if setting not in ("games", "tool-use"):
        raise ConfigError(f"unknown setting {setting!r}; use 'games' or 'tool-use'")
    if not isinstance(reply, str):
        raise TypeError(f"a reply is text, got {type(reply).__name__}")
    text = _visible(reply)
    if not text and "<think>" in reply and "</think>" not in reply[reply.rfind("<think>"):]:
        return ParsedAction(setting, text, error="the reply opened <think> and never closed it, "
                            "so it holds no action: finish reasoning within the token budget")
    if setting == "games":
        return _games(text)
    return _tool_use(text)


def _visible(reply: str) -> str:
    """The reply as parsed: after thinking, without trailing end-of-turn tokens."""
    return _strip_end_tokens(strip_thinking(reply))


def _strip_end_tokens(text: str) -> str:
    """Drop trailing end-of-turn tokens a backend left in (``<|im_end|>``, ``</s>``); only the
    last 80 characters are searched, so this stays linear on any input.

    >>> _strip_end_tokens("<answer>1</answer><|im_end|>\\n<|endoftext|>")
    '<answer>1</answer>'
    """
    while (m := _END_TOKEN.search(text[-80:])) is not None:
        text = text[: len(text) - len(text[-80:]) + m.start()].rstrip()
    return text


def _games(text: str) -> ParsedAction:
    boxed = extract_boxed(text)
    if boxed is None:
        opened = _BOX_OPEN.search(text) is not None
        why = ("the \\boxed{ is never closed: close it with }" if opened
               else "no \\boxed{...} in the reply: put the final answer in \\boxed{}")
        return ParsedAction("games", text, error=why)
    if not boxed:
        return ParsedAction("games", text, boxed="", error="the \\boxed{} is empty: put the "
                            "answer inside it")
    return ParsedAction("games", text, boxed=boxed)


def _tool_use(text: str) -> ParsedAction:
    answer = _toolenv_parse_answer(text)
    try:
        calls = tuple(_toolenv_parse_tool_calls(text))
    except ToolCallFormatError as e:
        return ParsedAction("tool-use", text, answer=answer, error=str(e.args[0]))
    if not calls and answer is None and (bare := _toolenv_parse_bare_call(text)) is not None:
        calls = (bare,)  # ToolEnv runs a bare JSON call too, and says so
    if not calls and answer is None:
        return ParsedAction("tool-use", text, error='no <tool_call> and no <answer>: call a tool '
                            'with <tool_call>{"name": ..., "arguments": {...}}</tool_call> or '
                            "submit <answer>...</answer>")
    return ParsedAction("tool-use", text, tool_calls=calls, answer=answer)

"""The one parser of the tool-call format, and its formatter. Standard library only.

The agent's reply format:

* a tool call, JSON style (Hermes / Qwen2.5)::

      <tool_call>{"name": "get_order", "arguments": {"order_id": 7}}</tool_call>

  ``arguments`` may be an object or a JSON string holding one (``parameters`` is accepted as a
  synonym); nested objects and arrays are kept exactly (the reference's regex turned them into
  ``{}``); a markdown fence inside the block is tolerated; a missing closing tag at the very end
  of the reply is tolerated (stop sequences often strip it).
* a tool call, XML style (Qwen3-Coder), optionally inside ``<tool_call>``::

      <function=get_order><parameter=order_id>7</parameter></function>

  A parameter value that parses as JSON becomes that value, else it is the stripped string.
  Values are not HTML-unescaped (models do not escape them, and unescaping would corrupt values
  that contain ``&``).
* the final answer: ``<answer>...</answer>``; the last one counts.

Text up to the last ``</think>`` is reasoning and is ignored, so a reply that merely thinks about
a tool call does not make one (a ``</think>`` inside a JSON value would therefore cut the reply).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field


class ToolCallFormatError(ValueError):
    """A ``<tool_call>`` block or ``<function=...>`` call is malformed.

    ``args[0]`` says which call (1-based, in reply order) and what is wrong, in words the agent
    can act on; it is shown to the agent as feedback.
    """


@dataclass(frozen=True)
class ToolCall:
    """One parsed tool call: the tool's name and its arguments (a JSON object as a dict).

    ``texts`` keeps the raw text of XML-style parameters (``<parameter=id>007</parameter>``),
    whose values are read as JSON when they parse: an environment whose schema declares the
    parameter a string gets the text back (``"007"``, not ``7``). It is not part of equality.
    """

    name: str
    arguments: dict
    texts: dict = field(default_factory=dict, compare=False, repr=False)


_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_FUNC_RE = re.compile(r"<function=\s*([^<>\s]+?)\s*>")
_PARAM_RE = re.compile(r"<parameter=\s*([^<>\s]+?)\s*>")
_FENCE_OPEN_RE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?")
_XML_KEY_RE = re.compile(r"[^<>\s]+")


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


_END_TOKEN_RE = re.compile(r"<\|[A-Za-z0-9_]+\|>")


def _after_thinking(text: str) -> str:
    """The part of a reply after its last ``</think>`` (all of it when there is none), without
    trailing end-of-turn tokens such as ``<|im_end|>``."""
    cut = text.rfind("</think>")
    text = text if cut < 0 else text[cut + len("</think>") :]
    while True:  # a loop, not one regex: a regex anchored at the end backtracks quadratically
        end = text.rstrip()
        start = end.rfind("<|")
        if start < 0 or not _END_TOKEN_RE.fullmatch(end, start):
            return text
        text = end[:start]


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


#: Deepest nesting accepted in arguments; deeper values are refused rather than risking the
#: recursion limit in the code that walks them.
MAX_DEPTH = 32


def too_deep(value: object) -> bool:
    """Whether ``value`` nests lists/dicts more than MAX_DEPTH levels (iterative, no recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _decode(text: str, where: str, what: str) -> object:
    """Decode one JSON document, turning every failure into a ToolCallFormatError."""
    try:
        value = _DECODER.decode(text)
    except RecursionError as e:
        raise ToolCallFormatError(f"{where}: {what} is nested too deeply") from e
    except ValueError as e:
        raise ToolCallFormatError(f"{where}: {what} is not valid JSON ({e})") from e
    if too_deep(value):
        raise ToolCallFormatError(f"{where}: {what} is nested more than {MAX_DEPTH} levels deep")
    return value


def _coerce_arguments(raw: object, where: str) -> dict:
    """Arguments as a dict: an object, a JSON string holding one, or absent/null/"" for none."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        raw = _decode(raw, where, "the \"arguments\" string")
    if not isinstance(raw, dict):
        raise ToolCallFormatError(
            f"{where}: \"arguments\" must be a JSON object like {{\"key\": value}}, "
            f"got {type(raw).__name__}"
        )
    return raw


def _call_from_object(obj: object, where: str) -> ToolCall:
    """Validate a decoded JSON tool-call object (plain or OpenAI ``{"function": {...}}`` form)."""
    if not isinstance(obj, dict):
        raise ToolCallFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "name" not in obj and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolCallFormatError(
            f"{where}: missing \"name\" (write {{\"name\": \"tool_name\", \"arguments\": {{...}}}})"
        )
    raw = obj["arguments"] if "arguments" in obj else obj.get("parameters")
    return ToolCall(name.strip(), _coerce_arguments(raw, where))


def _parse_json_block(text: str, pos: int, where: str) -> tuple[ToolCall, int]:
    """Parse a JSON call that starts at ``pos`` (just after ``<tool_call>``); return it and the
    position after the closing tag. The JSON decoder consumes strings whole, so values that
    contain braces, quotes, ``<`` or ``</tool_call>`` survive."""
    pos = _skip_ws(text, pos)
    fence = _FENCE_OPEN_RE.match(text, pos)
    if fence:
        pos = _skip_ws(text, fence.end())
    try:
        obj, end = _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        raise ToolCallFormatError(
            f"{where}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from e
    except ValueError as e:  # NaN / Infinity, rejected by _reject_constant
        raise ToolCallFormatError(f"{where}: invalid JSON: {e}") from e
    except RecursionError as e:
        raise ToolCallFormatError(f"{where}: the JSON is nested too deeply") from e
    if too_deep(obj):
        raise ToolCallFormatError(f"{where}: the JSON is nested more than {MAX_DEPTH} levels deep")
    call = _call_from_object(obj, where)
    end = _skip_ws(text, end)
    if fence and text.startswith("```", end):
        end = _skip_ws(text, end + 3)
    if text.startswith(_CLOSE, end):
        return call, end + len(_CLOSE)
    if end >= len(text):
        return call, end
    snippet = text[end : end + 20]
    raise ToolCallFormatError(
        f"{where}: unexpected text {snippet!r} after the JSON object; close the call with {_CLOSE}"
    )


def _xml_value(raw: str, where: str) -> object:
    """A parameter value: the JSON it parses as, else the stripped string."""
    value = raw.strip()
    try:
        parsed = _DECODER.decode(value)
    except ValueError:
        return value
    except RecursionError as e:
        raise ToolCallFormatError(f"{where}: a parameter value is nested too deeply") from e
    if too_deep(parsed):
        raise ToolCallFormatError(f"{where}: a parameter value is nested more than {MAX_DEPTH} "
                                  "levels deep")
    return parsed


def _parse_function(text: str, pos: int, where: str) -> tuple[ToolCall, int]:
    """Parse ``<function=name>(<parameter=k>v</parameter>)*</function>`` at ``pos``."""
    head = _FUNC_RE.match(text, pos)
    if head is None:
        raise ToolCallFormatError(f"{where}: expected <function=tool_name>")
    name, pos, args, texts = head.group(1), head.end(), {}, {}
    while True:
        pos = _skip_ws(text, pos)
        if text.startswith("</function>", pos):
            return ToolCall(name, args, texts), pos + len("</function>")
        if pos >= len(text) or text.startswith(_CLOSE, pos):
            return ToolCall(name, args, texts), pos  # lenient: </function> omitted
        param = _PARAM_RE.match(text, pos)
        if param is None:
            snippet = text[pos : pos + 20]
            raise ToolCallFormatError(
                f"{where}: unexpected text {snippet!r} inside <function={name}>; "
                "write <parameter=name>value</parameter>"
            )
        key, start = param.group(1), param.end()
        ends = [i for i in (text.find("</parameter>", start), text.find("<parameter=", start),
                            text.find("</function>", start)) if i >= 0]
        stop = min(ends) if ends else len(text)
        if key in args:
            raise ToolCallFormatError(f"{where}: parameter {key!r} is given twice")
        args[key] = _xml_value(text[start:stop], where)
        texts[key] = text[start:stop].strip()
        closed = text.startswith("</parameter>", stop)
        pos = stop + len("</parameter>") if closed else stop


def _parse_block(text: str, pos: int, where: str) -> tuple[ToolCall, int]:
    """Parse one ``<tool_call>`` block whose opening tag ends at ``pos``."""
    inner = _skip_ws(text, pos)
    if not text.startswith("<function=", inner):
        return _parse_json_block(text, pos, where)
    call, end = _parse_function(text, inner, where)
    end = _skip_ws(text, end)
    if text.startswith(_CLOSE, end):
        return call, end + len(_CLOSE)
    if end >= len(text):
        return call, end
    raise ToolCallFormatError(f"{where}: expected {_CLOSE} after </function>")


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every tool call in a reply, in order: ``<tool_call>`` blocks (JSON or XML inside) and bare
    ``<function=...>`` calls. Raises :class:`ToolCallFormatError` naming the first bad call.

    >>> parse_tool_calls('<tool_call>{"name": "f", "arguments": {"a": {"b": [1, 2]}}}</tool_call>')
    [ToolCall(name='f', arguments={'a': {'b': [1, 2]}})]
    >>> parse_tool_calls('<function=g><parameter=n>3</parameter><parameter=s>hi</parameter></function>')
    [ToolCall(name='g', arguments={'n': 3, 's': 'hi'})]
    >>> parse_tool_calls("no calls here")
    []
    """
    text = _after_thinking(text)
    calls: list[ToolCall] = []
    pos = 0
    while True:
        opens = [i for i in (text.find(_OPEN, pos), text.find("<function=", pos)) if i >= 0]
        if not opens:
            return calls
        start = min(opens)
        where = f"tool call {len(calls) + 1}"
        if text.startswith(_OPEN, start):
            call, pos = _parse_block(text, start + len(_OPEN), where)
        else:
            call, pos = _parse_function(text, start, where)
        calls.append(call)


def parse_bare_call(text: str) -> ToolCall | None:
    """A reply with no ``<tool_call>`` tag that is one JSON call object on its own
    (``{"name": ..., "arguments": {...}}``, optionally in a markdown fence, with at most a short
    sentence around it), else None. Small models often drop the tags (the base
    Qwen2.5-Coder-0.5B did in most replies of a calendar task); a host that reads such a reply
    as the call it plainly is, and says so, teaches the format instead of wasting the turn.
    Never raises.

    >>> parse_bare_call('```json\\n{"name": "ls", "arguments": {"dir": "/tmp"}}\\n```')
    ToolCall(name='ls', arguments={'dir': '/tmp'})
    >>> parse_bare_call('I will look. {"name": "ls", "arguments": {}}')
    ToolCall(name='ls', arguments={})
    >>> [parse_bare_call(t) for t in ('{"a": 1}', '<tool_call>{"name": "ls"}</tool_call>',
    ...                               '{"name": "a", "arguments": {}} {"name": "b", "arguments": {}}')]
    [None, None, None]
    """
    text = _after_thinking(text)
    if _OPEN in text or "<function=" in text or "<answer>" in text or len(text) > 4000:
        return None
    decoder, found, pos = json.JSONDecoder(), [], 0
    while (start := text.find("{", pos)) >= 0:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        found.append(obj)
        pos = end
    if len(found) != 1 or not isinstance(found[0], dict) or set(found[0]) - {"name", "arguments"}:
        return None
    try:
        call = _call_from_object(found[0], "tool call 1")
    except ToolCallFormatError:
        return None
    return call if "arguments" in found[0] else None


def parse_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>`` after any reasoning, else None.

    >>> parse_answer("<answer>1</answer> no, <answer> 42 </answer>")
    '42'
    >>> parse_answer("<think><answer>x</answer></think>no answer") is None
    True
    """
    # Linear: the last closing tag, then the last opening tag before it (a regex scan is
    # quadratic on many unclosed <answer> tags).
    text = _after_thinking(text)
    end = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, end) if end >= 0 else -1
    return text[start + len("<answer>"):end].strip() if start >= 0 else None


def _xml_literal(value: object) -> str:
    """How a parameter value is written in XML style so that :func:`_xml_value` gives it back.

    A string is written raw when that is unambiguous (it does not parse as JSON, has no
    surrounding whitespace and no ``<``); everything else is JSON with ``<``, ``>`` and ``&``
    escaped, so no value can close its tag early.
    """
    if isinstance(value, str) and value == value.strip() and "<" not in value:
        try:
            _DECODER.decode(value)
        except ValueError:
            return value
    dumped = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return dumped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def format_tool_call(call: ToolCall, style: str = "json") -> str:
    """Write a call the way an agent should, in ``"json"`` or ``"xml"`` style; the inverse of
    :func:`parse_tool_calls`. XML style needs parameter names without whitespace, ``<`` or ``>``.

    >>> format_tool_call(ToolCall("f", {"a": [1]}))
    '<tool_call>\\n{"name": "f", "arguments": {"a": [1]}}\\n</tool_call>'
    >>> print(format_tool_call(ToolCall("f", {"a": "x y", "n": 2}), style="xml"))
    <tool_call>
    <function=f>
    <parameter=a>
    x y
    </parameter>
    <parameter=n>
    2
    </parameter>
    </function>
    </tool_call>
    """
    if style == "json":
        body = json.dumps({"name": call.name, "arguments": call.arguments},
                          ensure_ascii=False, allow_nan=False)
        body = body.replace("<", "\\u003c")  # no value can spell a tag (</think>, <tool_call>)
        return f"{_OPEN}\n{body}\n{_CLOSE}"
    if style != "xml":
        raise ValueError(f"unknown tool-call style {style!r}; use 'json' or 'xml'")
    for key in [call.name, *call.arguments]:
        if not isinstance(key, str) or not _XML_KEY_RE.fullmatch(key):
            raise ValueError(
                f"{key!r} cannot be written in XML style (no whitespace, '<' or '>' allowed); "
                "use style='json'"
            )
    params = "".join(
        f"<parameter={k}>\n{_xml_literal(v)}\n</parameter>\n" for k, v in call.arguments.items()
    )
    return f"{_OPEN}\n<function={call.name}>\n{params}</function>\n{_CLOSE}"


def fit_replies(replies: list[str], max_turns: int, max_calls: int) -> list[str]:
    """``replies`` merged until there are at most ``max_turns``: adjacent tool-call replies are
    joined, smallest pair first, never above ``max_calls`` calls per reply. Calls still run in
    the same order, so the merged sequence wins whenever the original does; it is returned
    unchanged when it fits already or cannot be shortened further.

    >>> call = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    >>> [r.count("<tool_call>") for r in fit_replies([call, call, call, "<answer>1</answer>"], 3, 8)]
    [2, 1, 0]
    """
    replies = list(replies)
    counts = [len(parse_tool_calls(r)) if parse_answer(r) is None else 0 for r in replies]
    while len(replies) > max_turns:
        pairs = [(counts[i] + counts[i + 1], i) for i in range(len(replies) - 1)
                 if counts[i] and counts[i + 1] and counts[i] + counts[i + 1] <= max_calls]
        if not pairs:
            break
        _, i = min(pairs)
        replies[i:i + 2] = [replies[i] + "\n" + replies[i + 1]]
        counts[i:i + 2] = [counts[i] + counts[i + 1]]
    return replies

"""The tool-use base class and the one parser of the tool-call format. Standard library only.

This file is loaded inside the sandbox as the module ``toolenv`` (generated environments write
``from toolenv import ToolEnv``), so it imports nothing from spadework; the host-side parser in
``spadework.env.actions`` imports the functions below, so exactly one parser of the format exists.

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

The base class :class:`ToolEnv` turns a subclass's tool declarations (JSON schema), ``tool_<name>``
methods and instruction sequence into the text-in, text-out environment contract; its docstring
states the episode rules. Departures from the reference's base class: arguments are checked
against the schema before a tool runs (the reference passed them unchecked and showed Python's
TypeError); several calls per reply are executed; turns are counted for tool turns too; a wrong
final answer is not free to retry forever; numeric answers compare at 1e-6 relative, not 0.01.

This one file exceeds the ~400-line guide on purpose: the sandbox imports it as one module.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "Instruction",
    "ToolCall",
    "ToolCallFormatError",
    "ToolEnv",
    "ToolError",
    "answers_match",
    "format_tool_call",
    "parse_answer",
    "parse_tool_calls",
    "render_record",
    "render_records",
    "schema_error",
]


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


def _too_deep(value: object) -> bool:
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
    if _too_deep(value):
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
    if _too_deep(obj):
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
    if _too_deep(parsed):
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


# ------------------------------------------------------------------------ argument checking

_PY_TYPES = {"object": dict, "array": list, "string": str, "null": type(None)}


def _is_type(value: object, kind: str) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float))
    return isinstance(value, _PY_TYPES.get(kind, object))


def _describe(value: object) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return f"{kind} {shown[:40] + '...' if len(shown) > 40 else shown}"


def _same(a: object, b: object) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _object_error(value: dict, schema: dict, path: str) -> str | None:
    props = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            return f"missing required argument '{path}{key}'"
    extra = schema.get("additionalProperties", "properties" not in schema)
    for key, item in value.items():
        if key in props:
            sub = props[key]
        elif isinstance(extra, dict):
            sub = extra
        elif extra:
            continue
        else:
            allowed = ", ".join(props) or "none"
            return f"unknown argument '{path}{key}' (allowed: {allowed})"
        error = schema_error(item, sub, f"{path}{key}")
        if error:
            return error
    return None


def schema_error(value: object, schema: dict, path: str = "") -> str | None:
    """The first way ``value`` breaks a JSON schema, in words an agent can act on; None if none.

    Supports type (incl. lists of types; integer vs number vs boolean), enum, required,
    properties, additionalProperties (unknown keys are rejected wherever properties are
    declared), items, minItems/maxItems, minimum/maximum, minLength/maxLength.

    >>> schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    >>> schema_error({"n": 2}, schema) is None
    True
    >>> schema_error({"n": "2"}, schema)
    'argument \\'n\\' must be integer, got string "2"'
    >>> schema_error({}, schema)
    "missing required argument 'n'"
    """
    name = f"argument '{path}'" if path else "arguments"
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or ())
    if kinds and not any(_is_type(value, k) for k in kinds):
        return f"{name} must be {' or '.join(kinds)}, got {_describe(value)}"
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        options = ", ".join(json.dumps(e, ensure_ascii=False) for e in schema["enum"])
        return f"{name} must be one of {options}, got {_describe(value)}"
    if isinstance(value, dict):
        return _object_error(value, schema, f"{path}." if path else "")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", math.inf):
            return f"{name} has {len(value)} items, outside the allowed range"
        for i, item in enumerate(value):
            error = schema_error(item, schema.get("items", {}), f"{path}[{i}]")
            if error:
                return error
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < schema.get("minimum", -math.inf) or value > schema.get("maximum", math.inf):
            low, high = schema.get("minimum", "-inf"), schema.get("maximum", "inf")
            return f"{name} must be between {low} and {high}, got {value}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", math.inf):
            return f"{name} has length {len(value)}, outside the allowed range"
    return None


def _coerce_integers(value: object, schema: dict) -> object:
    """Integral floats (3.0) where the schema says integer become ints; the rest is unchanged."""
    kinds = schema.get("type")
    if isinstance(value, float) and (kinds == "integer" or (isinstance(kinds, list)
                                                             and "integer" in kinds
                                                             and "number" not in kinds)):
        return int(value)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _coerce_integers(v, props.get(k, {})) for k, v in value.items()}
    if isinstance(value, list):
        return [_coerce_integers(v, schema.get("items", {})) for v in value]
    return value


# ------------------------------------------------------------------------ rendering and answers


def _cell(value: object) -> str:
    if isinstance(value, float):
        return format(value, ".10g")
    if isinstance(value, (dict, list, bool)) or value is None:
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def render_record(record: dict) -> str:
    """One record on one line, for tool results.

    >>> render_record({"id": 3, "name": "Ann", "balance": 0.1 + 0.2, "tags": ["vip"]})
    'id: 3, name: Ann, balance: 0.3, tags: ["vip"]'
    """
    return ", ".join(f"{key}: {_cell(value)}" for key, value in record.items())


def render_records(records: list[dict], columns: list[str] | None = None) -> str:
    """Records as a compact table: a header line of column names, then one line per record.

    >>> print(render_records([{"id": 1, "qty": 5}, {"id": 2, "qty": 0}]))
    id | qty
    1 | 5
    2 | 0
    >>> render_records([])
    '(no records)'
    """
    if not records:
        return "(no records)"
    columns = columns or list(records[0])
    lines = [" | ".join(columns)]
    lines += [" | ".join(_cell(r.get(c, "")) for c in columns) for r in records]
    return "\n".join(lines)


def answers_match(given: str, expected: str) -> bool:
    """Case-insensitive equality after stripping, or numbers equal within 1e-6 relative (after
    removing ``$``, ``,`` and surrounding spaces). The reference used 0.01 absolute, which
    accepts wrong cents on small amounts and is needlessly strict on large ones.

    >>> answers_match(" Done ", "done"), answers_match("$1,234.50", "1234.5")
    (True, True)
    >>> answers_match("1234.51", "1234.5"), answers_match("12", "twelve")
    (False, False)
    """
    a, b = str(given).strip(), str(expected).strip()
    if a.casefold() == b.casefold():
        return True
    try:
        x = float(a.replace("$", "").replace(",", "").strip())
        y = float(b.replace("$", "").replace(",", "").strip())
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)


# ------------------------------------------------------------------------ the base class


class ToolError(Exception):
    """Raised by a ``tool_<name>`` method for a failure the agent should see and can recover from
    (record not found, insufficient funds, ...). Its message becomes the tool result. Any other
    exception from a tool is a bug in the environment and propagates."""


@dataclass(frozen=True)
class Instruction:
    """One step of the task: the text shown to the agent, and ``done()`` which says, from the
    environment's state, whether the step's goal has been met."""

    text: str
    done: Callable[[], bool]


class ToolEnv:
    """Base class of tool-use environments.

    A subclass implements:

    * ``declare_tools() -> {name: {"description": str, "parameters": <JSON schema object>}}``
      and a method ``tool_<name>(**arguments)`` per tool returning a string (or a dict/list,
      rendered compactly); raise :class:`ToolError` for failures the agent should see;
    * ``reset(seed=None)``: build state from ``random.Random(seed)``, then
      ``return self.start(intro, [Instruction(text, done), ...])``;
    * ``solution()``: the winning list of replies, written with :meth:`reply_call` and
      :meth:`reply_answer`, computed from the state;
    * optionally ``expected_answer()`` (default ``"done"``) or ``check_answer(given)``.

    Episode rules, enforced here so that every tool environment plays the same way:

    * Each :meth:`step` is one turn, tool turns included; ``truncated`` is True when
      ``max_turns`` turns are used without ending the episode.
    * A reply's tool calls run in order, at most :attr:`max_calls_per_turn` (8) per turn; the
      rest are skipped and the observation says so. Arguments are checked against the schema
      first; errors (bad types, unknown or missing arguments, unknown tool) come back as the
      tool's result, never raised.
    * Instructions are revealed one at a time: after each successful call, while the open
      step's ``done()`` holds, the next instruction is appended to that call's result.
    * ``<answer>`` in a reply without tool calls is judged: before all steps are done it is
      refused and the open step is named (reward 0); after, a correct answer wins (1.0,
      terminated); a wrong one uses up one of :attr:`answer_attempts` (1), and the last one
      ends the episode (0.0, terminated). An answer in a reply that also calls tools is ignored.
    * A reply with neither a tool call nor an answer, or with a malformed call, gets format
      feedback and :attr:`format_penalty` (-0.05): small enough never to outweigh a win, large
      enough to rank a silent episode below an honest wrong answer.
    """

    max_calls_per_turn = 8
    answer_attempts = 1
    format_penalty = -0.05
    list_tools_in_observation = True

    def __init__(self, max_turns: int = 10, **kwargs) -> None:
        self.max_turns = int(max_turns)
        self.options = dict(kwargs)
        self.turn_count = 0
        self.call_history: list[ToolCall] = []
        self._instructions: tuple[Instruction, ...] = ()
        self._instruction_index = 0
        self._attempts_left = self.answer_attempts
        self._started = False
        self._over = False

    # -- to implement -------------------------------------------------------------------------

    def declare_tools(self) -> dict[str, dict]:
        raise NotImplementedError("declare_tools() must return {name: {description, parameters}}")

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        raise NotImplementedError("reset() must build the state and return self.start(...)")

    def solution(self) -> list[str]:
        raise NotImplementedError("solution() must return the winning list of replies")

    def expected_answer(self) -> str:
        """The final answer, computed from the state when the answer is judged."""
        return "done"

    def check_answer(self, given: str) -> bool:
        return answers_match(given, str(self.expected_answer()))

    # -- helpers for subclasses ---------------------------------------------------------------

    def start(self, intro: str, instructions: list[Instruction] | tuple = ()) -> tuple[str, dict]:
        """Begin an episode (call at the end of ``reset``): clears turns, history and progress,
        and returns the first observation: the intro, the first instruction, the tools and the
        reply format. Raises ValueError when the first step's goal already holds, because such
        an environment can be won without doing anything."""
        self.turn_count = 0
        self.call_history = []
        self._instructions = tuple(instructions)
        self._instruction_index = 0
        self._attempts_left = self.answer_attempts
        self._started, self._over = True, False
        if self._instructions and self._instructions[0].done():
            raise ValueError("the goal of step 1 is already met at reset; the task is trivial")
        parts = [intro.strip()]
        if self._instructions:
            parts.append(f"Instruction (step 1 of {len(self._instructions)}): "
                         f"{self._instructions[0].text}")
        if self.list_tools_in_observation:
            parts.append("Tools:\n" + "\n".join(self._tool_lines()))
        parts.append(
            'Call tools with <tool_call>{"name": "tool_name", "arguments": {...}}</tool_call> '
            f"(up to {self.max_calls_per_turn} per reply). Further instructions appear as steps "
            "are completed; when all are done, reply with <answer>...</answer>. You have "
            f"{self.max_turns} replies in all."
        )
        return "\n\n".join(parts), self._info(0, 0)

    def called(self, tool: str, /, **arguments: object) -> bool:
        """Whether a successful call of ``tool`` with at least these arguments was made."""
        return any(c.name == tool and all(_same(c.arguments.get(k), v) for k, v in arguments.items())
                   for c in self.call_history)

    @staticmethod
    def reply_call(name: str, /, **arguments: object) -> str:
        """A reply that makes one tool call (for ``solution()``)."""
        return format_tool_call(ToolCall(name, arguments))

    @staticmethod
    def reply_answer(value: object) -> str:
        """A reply that submits a final answer (for ``solution()``)."""
        return f"<answer>{value}</answer>"

    def fit_turns(self, replies: list[str]) -> list[str]:
        """``replies`` merged until they fit ``max_turns`` (for ``solution()``): adjacent
        tool-call replies are joined, smallest pair first, never above
        :attr:`max_calls_per_turn` calls per reply. Calls still run in the same order, so the
        merged sequence wins whenever the original does; it is returned unchanged when it fits
        already or cannot be shortened further.

        >>> env = ToolEnv(max_turns=2)
        >>> replies = [ToolEnv.reply_call("a"), ToolEnv.reply_call("b"), "<answer>1</answer>"]
        >>> [r.count("<tool_call>") for r in env.fit_turns(replies)]
        [2, 0]
        """
        replies = list(replies)
        counts = [len(parse_tool_calls(r)) if parse_answer(r) is None else 0 for r in replies]
        while len(replies) > self.max_turns:
            pairs = [(counts[i] + counts[i + 1], i) for i in range(len(replies) - 1)
                     if counts[i] and counts[i + 1]
                     and counts[i] + counts[i + 1] <= self.max_calls_per_turn]
            if not pairs:
                break
            _, i = min(pairs)
            replies[i:i + 2] = [replies[i] + "\n" + replies[i + 1]]
            counts[i:i + 2] = [counts[i] + counts[i + 1]]
        return replies

    # -- the interface hosts use --------------------------------------------------------------

    def tools(self) -> list[dict]:
        """The tools in the OpenAI function format, for chat templates."""
        return [{"type": "function", "function": {"name": name, **decl}}
                for name, decl in self._declarations().items()]

    def _as_declared(self, call: ToolCall) -> dict:
        """The call's arguments, with XML-style texts restored where the schema wants a string."""
        if not call.texts or not isinstance(call.arguments, dict):
            return call.arguments
        decl = self._declarations().get(call.name, {})
        props = decl.get("parameters", {}).get("properties", {})
        return {k: call.texts[k] if k in call.texts and not isinstance(v, str)
                and props.get(k, {}).get("type") == "string" else v
                for k, v in call.arguments.items()}

    def execute_tool(self, name: str, arguments: dict) -> tuple[str, bool]:
        """Run one tool call and return (result text, succeeded). Checks the arguments, records
        the call, and appends any newly revealed instruction. Does not count a turn: a host that
        delivers tool calls as structured messages counts assistant turns itself and submits the
        final answer through :meth:`step`."""
        self._require_started()
        declarations = self._declarations()
        if name not in declarations:
            return (f"Error: unknown tool '{name}'. Available tools: "
                    f"{', '.join(declarations)}.", False)
        schema = declarations[name]["parameters"]
        if not isinstance(arguments, dict) or _too_deep(arguments):
            return (f"Error: arguments of {name} must be a JSON object nested at most "
                    f"{MAX_DEPTH} levels deep.", False)
        error = schema_error(arguments, schema)
        if error:
            return f"Error: {error}. Usage: {self._signature(name, declarations[name])}", False
        arguments = _coerce_integers(arguments, schema)
        try:
            result = getattr(self, f"tool_{name}")(**arguments)
        except ToolError as e:  # a tool may have changed state before refusing
            return f"Error: {e}{self._advance()}", False
        self.call_history.append(ToolCall(name, arguments))
        text = result if isinstance(result, str) else _render_result(result)
        return text + self._advance(), True

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """One agent reply; see the class docstring for the rules. After the episode has ended
        it returns a reminder, reward 0 and truncated=True."""
        self._require_started()
        if self._over:
            return "The episode is over; call reset().", 0.0, False, True, self._info(0, 0)
        self.turn_count += 1
        obs, reward, terminated, ran, failed = self._respond(str(action))
        truncated = not terminated and self.turn_count >= self.max_turns
        if truncated:
            obs += "\n\nOut of turns: the episode is over."
        self._over = terminated or truncated
        reward = min(1.0, max(-1.0, float(reward)))  # a subclass's constants cannot break the range
        return obs, reward, bool(terminated), bool(truncated), self._info(ran, failed)

    # -- internals ----------------------------------------------------------------------------

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("call reset() before step() or execute_tool()")

    def _declarations(self) -> dict[str, dict]:
        """The declared tools, normalised and checked against the methods that implement them."""
        out = {}
        for name, decl in self.declare_tools().items():
            if not callable(getattr(self, f"tool_{name}", None)):
                raise TypeError(f"tool {name!r} is declared but method tool_{name} is missing")
            params = dict(decl.get("parameters") or {"type": "object"})
            if params.get("type", "object") != "object":
                raise TypeError(f"tool {name!r}: parameters must be a JSON schema of type object")
            params.setdefault("type", "object")
            params.setdefault("properties", {})
            out[name] = {"description": str(decl.get("description", "")), "parameters": params}
        return out

    @staticmethod
    def _signature(name: str, decl: dict) -> str:
        params = decl["parameters"]
        required = set(params.get("required", ()))
        fields = []
        for key, sub in params["properties"].items():
            kind = ("|".join(json.dumps(e) for e in sub["enum"]) if "enum" in sub
                    else sub.get("type", "any"))
            kind = "|".join(kind) if isinstance(kind, list) else kind
            fields.append(f"{key}{'' if key in required else '?'}: {kind}")
        return f"{name}({', '.join(fields)})"

    def _tool_lines(self) -> list[str]:
        return [f"- {self._signature(n, d)}: {d['description']}"
                for n, d in self._declarations().items()]

    def _format_help(self) -> str:
        return ('Call a tool with <tool_call>{"name": "tool_name", "arguments": {...}}</tool_call>'
                " or give the final answer with <answer>...</answer>.")

    def _respond(self, text: str) -> tuple[str, float, bool, int, int]:
        """(observation, reward, terminated, calls run, calls failed) for one reply."""
        try:
            calls = parse_tool_calls(text)
        except ToolCallFormatError as e:
            return f"Format error: {e.args[0]}. {self._format_help()}", self.format_penalty, \
                False, 0, 0
        answer = parse_answer(text)
        if calls:
            obs, ran, failed = self._run_calls(calls, answer is not None)
            return obs, 0.0, False, ran, failed
        if answer is None:
            return (f"Format error: no tool call and no answer. {self._format_help()}",
                    self.format_penalty, False, 0, 0)
        obs, reward, terminated = self._judge(answer)
        return obs, reward, terminated, 0, 0

    def _run_calls(self, calls: list[ToolCall], had_answer: bool) -> tuple[str, int, int]:
        parts, ran, failed = [], 0, 0
        for call in calls[: self.max_calls_per_turn]:
            text, ok = self.execute_tool(call.name, self._as_declared(call))
            ran, failed = ran + 1, failed + (not ok)
            parts.append(f"Result of {call.name}:\n{text}")
        skipped = len(calls) - ran
        if skipped:
            parts.append(f"{skipped} more call(s) skipped: at most {self.max_calls_per_turn} "
                         "per reply.")
        if had_answer:
            parts.append("The <answer> was ignored: answer in a reply without tool calls.")
        return "\n\n".join(parts), ran, failed

    def _advance(self) -> str:
        """Mark open steps whose goal now holds as done; the text announcing what comes next."""
        notes, total = [], len(self._instructions)
        while self._instruction_index < total and self._instructions[self._instruction_index].done():
            self._instruction_index += 1
            k = self._instruction_index
            if k < total:
                notes.append(f"[Step {k} of {total} complete] Next instruction (step {k + 1} of "
                             f"{total}): {self._instructions[k].text}")
            else:
                notes.append(f"[Step {k} of {total} complete] All steps are done: reply with "
                             "<answer>...</answer>.")
        return "".join("\n\n" + n for n in notes)

    def _judge(self, answer: str) -> tuple[str, float, bool]:
        total = len(self._instructions)
        if self._instruction_index < total:
            k = self._instruction_index
            return (f"Not accepted yet: step {k + 1} of {total} is still open: "
                    f"\"{self._instructions[k].text}\" Complete it with the tools first.", 0.0, False)
        if self.check_answer(answer):
            return "Correct!", 1.0, True
        self._attempts_left -= 1
        if self._attempts_left <= 0:
            return "Incorrect. The episode is over.", 0.0, True
        return f"Incorrect. {self._attempts_left} attempt(s) left.", 0.0, False

    def _info(self, ran: int, failed: int) -> dict:
        return {"tool_calls": ran, "tool_errors": failed, "turn": self.turn_count,
                "steps_done": self._instruction_index, "steps": len(self._instructions)}


def _render_result(result: object) -> str:
    if isinstance(result, dict):
        return render_record(result)
    if isinstance(result, list) and all(isinstance(r, dict) for r in result):
        return render_records(result)
    return _cell(result)

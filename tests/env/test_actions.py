"""Agent-reply parsing on the host: boxes, answers, tool calls, and what a bad reply yields."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadework.env.actions import (
    ParsedAction,
    ToolCall,
    extract_boxed,
    format_answer,
    format_boxed,
    format_tool_call,
    parse_action,
    parse_answer,
    parse_tool_calls,
    strip_thinking,
)
from spadework.env.toolenv import parse_bare_call
from spadework.errors import ActionParseError, ConfigError


# ---------------------------------------------------------------- thinking


def test_strip_thinking_keeps_only_text_after_the_last_close() -> None:
    reply = "<think>try \\boxed{1}</think> hmm <think>no, \\boxed{2}</think>\nFinal: \\boxed{3}"
    assert strip_thinking(reply) == "Final: \\boxed{3}"


def test_unclosed_think_has_no_action() -> None:
    assert strip_thinking("<think>The answer might be \\boxed{4} but let me check") == ""
    assert strip_thinking("<think>a</think>\\boxed{5} <think>second thoughts \\boxed{6}") == "\\boxed{5}"


def test_unclosed_think_is_reported_not_parsed() -> None:
    a = parse_action("<think>Let me compute. 6*7 = \\boxed{42}, wait", "games")
    assert a.boxed is None and not a.ok
    assert "never closed" in a.error


# ---------------------------------------------------------------- boxes


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("The answer is \\boxed{42}.", "42"),
        ("So x = \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        # the reference returns "3" here only because it is the first brace-free box
        ("Either \\boxed{\\frac{1}{2}} or \\boxed{3}; I pick \\boxed{\\sqrt{2}}", "\\sqrt{2}"),
        ("First \\boxed{1}, on reflection \\boxed{2}", "2"),
        ("\\boxed{{7}}", "7"),
        ("\\boxed{{{ 8 }}}", "8"),
        ("\\boxed {up}", "up"),
        ("\\boxed{ move north }", "move north"),
        ("\\boxed{\\{1, 2, 3\\}}", "\\{1, 2, 3\\}"),
        ("\\boxed{{a}{b}}", "{a}{b}"),
        ("\\boxed{\\text{B) the red one}}", "\\text{B) the red one}"),
        ("$$\\boxed{x^{2} + y_{i}}$$", "x^{2} + y_{i}"),
        ("I guess \\boxed{3}. Hmm, actually \\boxed{4", "3"),  # truncated last box
        ("\\boxed{\\boxed{5}}", "5"),
        ("a stray } then \\boxed{6} and a stray {", "6"),
        ("\\boxed{}", ""),
    ],
)
def test_extract_boxed_on_model_style_text(reply: str, expected: str) -> None:
    assert extract_boxed(reply) == expected


@pytest.mark.parametrize("reply", ["no box", "\\boxed{unclosed", "\\boxed 5", "boxed{5}", ""])
def test_extract_boxed_none(reply: str) -> None:
    assert extract_boxed(reply) is None


def test_games_chatty_reply_with_thinking_and_latex() -> None:
    reply = (
        "<think>\nThe grid has 3 rows. Maybe \\boxed{left}? No: the wall.\n</think>\n\n"
        "Looking at the board, the only safe move is to go **up**, since the left is blocked.\n\n"
        "$$\\boxed{\\text{up}}$$<|im_end|>"
    )
    a = parse_action(reply, "games")
    assert a == ParsedAction("games", a.text, boxed="\\text{up}")
    assert a.ok and a.env_action == "\\boxed{\\text{up}}"
    assert not a.text.endswith("<|im_end|>")


@pytest.mark.parametrize(
    ("reply", "needle"),
    [("I am not sure.", "no \\boxed"), ("Answer: \\boxed{12", "never closed"), ("\\boxed{ }", "empty")],
)
def test_games_bad_replies_say_what_is_missing(reply: str, needle: str) -> None:
    a = parse_action(reply, "games")
    assert not a.ok and needle in a.error
    # the environment sees what was written and can answer with its own format reminder
    assert a.env_action == (a.text if a.boxed is None else "\\boxed{}")


def test_unknown_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown setting"):
        parse_action("\\boxed{1}", "chess")


# ---------------------------------------------------------------- answers and tool calls


def test_answer_last_one_outside_thinking() -> None:
    reply = "<think><answer>draft</answer></think>Checked.\n<answer>3</answer> sorry: <answer> 4 </answer>"
    assert parse_answer(reply) == "4"
    assert parse_answer("no answer tag") is None


def test_several_tool_calls_in_fences_with_nested_arguments() -> None:
    reply = (
        "I'll look up both orders, then update the first.\n\n```json\n"
        '<tool_call>\n{"name": "get_order", "arguments": {"order_id": 17}}\n</tool_call>\n'
        '<tool_call>\n{"name": "update_order", "arguments": {"order_id": 17, '
        '"patch": {"items": [{"sku": "A-1", "qty": 2}], "note": "ship {fast}"}}}\n</tool_call>\n```'
    )
    a = parse_action(reply, "tool-use")
    assert a.ok and a.answer is None
    assert a.tool_calls == (
        ToolCall("get_order", {"order_id": 17}),
        ToolCall("update_order", {"order_id": 17, "patch": {"items": [{"sku": "A-1", "qty": 2}],
                                                           "note": "ship {fast}"}}),
    )


def test_tool_call_with_string_values_that_look_like_markup() -> None:
    args = {"body": 'close with </tool_call> and {"x": 1}', "tags": ["<a>", "}"]}
    reply = format_tool_call(ToolCall("send", args)) + "\n"
    assert parse_tool_calls(reply) == [ToolCall("send", args)]


def test_xml_style_call_with_json_values() -> None:
    reply = (
        "<tool_call>\n<function=set_filter>\n<parameter=query>\n{\"status\": [\"open\", \"late\"]}\n"
        "</parameter>\n<parameter=limit>\n5\n</parameter>\n<parameter=label>\nurgent items\n"
        "</parameter>\n</function>\n</tool_call>"
    )
    assert parse_tool_calls(reply) == [
        ToolCall("set_filter", {"query": {"status": ["open", "late"]}, "limit": 5, "label": "urgent items"})
    ]


def test_tool_call_inside_thinking_is_not_a_call() -> None:
    reply = '<think><tool_call>{"name": "rm", "arguments": {}}</tool_call></think>I will not.'
    a = parse_action(reply, "tool-use")
    assert a.tool_calls == () and "no <tool_call>" in a.error


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>{"name": "f", "arguments": {"a": 1,}}</tool_call>',
        "<tool_call>{'name': 'f', 'arguments': {}}</tool_call>",
        '<tool_call>{"arguments": {"a": 1}}</tool_call>',
        '<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>',
        '<tool_call>{"name": "f", "arguments": {"a": NaN}}</tool_call>',
        '<tool_call>{"name": "f"} trailing words</tool_call>',
    ],
)
def test_malformed_tool_calls_raise_typed_errors_or_become_data(reply: str) -> None:
    with pytest.raises(ActionParseError) as e:
        parse_tool_calls(reply)
    assert e.value.reason.startswith("tool call 1")
    a = parse_action(reply, "tool-use")
    assert not a.ok and a.tool_calls == () and a.error == e.value.reason


def test_bad_call_and_good_answer_keep_the_answer() -> None:
    a = parse_action('<tool_call>{"name": }</tool_call>\n<answer>done</answer>', "tool-use")
    assert a.answer == "done" and not a.ok and "tool call 1" in a.error


def test_truncated_tool_call_at_the_end_is_kept() -> None:
    a = parse_action('Calling:\n<tool_call>\n{"name": "ls", "arguments": {"dir": "/a"}}', "tool-use")
    assert a.ok and a.tool_calls == (ToolCall("ls", {"dir": "/a"}),)


def test_truncated_mid_json_is_an_error() -> None:
    a = parse_action('<tool_call>\n{"name": "ls", "arguments": {"dir": "/a', "tool-use")
    assert not a.ok and a.tool_calls == ()


def test_answer_and_calls_together_are_both_reported() -> None:
    reply = '<tool_call>{"name": "f", "arguments": {}}</tool_call><answer>7</answer>'
    a = parse_action(reply, "tool-use")
    assert a.ok and a.answer == "7" and a.tool_calls == (ToolCall("f", {}),)


def test_format_answer_round_trip_and_refusal() -> None:
    assert parse_answer("text " + format_answer("a <b> & c") + " more") == "a <b> & c"
    with pytest.raises(ValueError):
        format_answer("x</answer>")


# ---------------------------------------------------------------- hostile input


def test_binary_and_huge_input_never_crash() -> None:
    rng = random.Random(0)
    junk = bytes(rng.randrange(256) for _ in range(20_000)).decode("latin-1")
    for setting in ("games", "tool-use"):
        a = parse_action(junk, setting)
        assert isinstance(a, ParsedAction) and not a.ok
    huge = "word { " * 200_000 + "\\boxed{" * 50_000 + "\\boxed{9} " + "} " * 10
    assert extract_boxed(huge) == "9"
    assert parse_action("x" * 2_000_000 + "\\boxed{ok}", "games").boxed == "ok"
    calls = "".join(format_tool_call(ToolCall("f", {"i": i})) for i in range(2_000))
    assert len(parse_action(calls, "tool-use").tool_calls) == 2_000


def test_control_characters_inside_a_box_are_kept() -> None:
    assert extract_boxed("\x00\x1b[31m\\boxed{a\x00b}\x1b[0m") == "a\x00b"


# ---------------------------------------------------------------- round trips (property based)

_BALANCED = st.recursive(
    st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=12),
    lambda inner: st.lists(
        st.one_of(inner, inner.map(lambda s: "{" + s + "}")), max_size=4
    ).map("".join),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(answer=_BALANCED, before=st.text(max_size=30), after=st.text(max_size=30))
def test_boxed_round_trip(answer: str, before: str, after: str) -> None:
    """Any answer with balanced braces comes back exactly, or format_boxed refuses it up front."""
    after = after.replace("\\", "/")  # a later box would rightly win
    try:
        boxed = format_boxed(answer)
    except ValueError:
        assert answer != answer.strip() or answer.startswith("{") or "\\boxed" in answer
        return
    before_no_open = before.replace("{", "(")  # an unclosed brace before must not swallow the box
    assert extract_boxed(f"{before_no_open} {boxed} {after}") == answer


@settings(max_examples=200, deadline=None)
@given(answer=_BALANCED.map(str.strip).filter(lambda s: not s.startswith("{") and "\\boxed" not in s))
def test_format_boxed_accepts_every_plain_balanced_answer(answer: str) -> None:
    assert extract_boxed("Final: " + format_boxed(answer) + ".") == answer


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)
_XML_KEY = st.text(alphabet=st.characters(blacklist_categories=("Z", "Cc", "Cs"),
                                          blacklist_characters="<>"), min_size=1, max_size=10)
_NAME = st.from_regex(r"[a-z_][a-z0-9_.-]{0,15}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(name=_NAME, args=st.dictionaries(st.text(max_size=10), _JSON, max_size=5))
def test_tool_call_round_trip_json(name: str, args: dict) -> None:
    call = ToolCall(name, args)
    assert parse_tool_calls("Sure.\n" + format_tool_call(call, style="json")) == [call]


@settings(max_examples=200, deadline=None)
@given(name=_NAME, args=st.dictionaries(_XML_KEY, _JSON, max_size=5))
def test_tool_call_round_trip_xml(name: str, args: dict) -> None:
    call = ToolCall(name, args)
    text = format_tool_call(call, style="xml")
    assert parse_tool_calls(text) == [call]
    assert json.dumps(parse_tool_calls(text)[0].arguments, sort_keys=True) == json.dumps(args, sort_keys=True)


_REPLY_PARTS = st.sampled_from([
    "<think>", "</think>", "\\boxed{", "\\boxed {", "{", "}", "<tool_call>", "</tool_call>",
    '{"name": "f", "arguments": {"a": [1, {"b": "}"}]}}', '{"name": ', "<function=f>",
    "<parameter=x>", "</parameter>", "</function>", "<answer>", "</answer>", "```json\n", "```",
    "<|im_end|>", "\n", " ",
]) | st.text(max_size=10)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_REPLY_PARTS, max_size=20), setting=st.sampled_from(["games", "tool-use"]))
def test_parse_action_never_raises_and_is_consistent(parts: list[str], setting: str) -> None:
    reply = "".join(parts)
    a = parse_action(reply, setting)
    assert a.setting == setting and isinstance(a.text, str)
    if setting == "games":
        assert a.boxed == extract_boxed(a.text)
        assert a.ok == bool(a.boxed)
    else:
        assert a.answer == parse_answer(a.text)
        assert a.ok or a.error
        if a.ok:
            tagged = parse_tool_calls(a.text)
            bare = parse_bare_call(a.text) if not tagged and a.answer is None else None
            assert list(a.tool_calls) == (tagged or ([bare] if bare else []))
            assert a.tool_calls or a.answer is not None


def test_a_bare_json_call_is_read_as_the_call_the_environment_runs() -> None:
    """The base 0.5B agent often drops the tags; the host and ToolEnv read it the same way."""
    a = parse_action('```json\n{"name": "cancel", "arguments": {"id": "EV-1"}}\n```', "tool-use")
    assert a.ok and a.tool_calls == (ToolCall("cancel", {"id": "EV-1"}),)
    for reply in ('{"name": "cancel"}', '{"id": 1}', '{"name": "a", "arguments": {}} <answer>1</answer>'):
        assert parse_action(reply, "tool-use").tool_calls == ()

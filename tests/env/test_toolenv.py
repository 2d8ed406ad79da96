"""Tests of the tool-call parser and the ToolEnv base class (spadework/env/toolenv.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadework.env.toolenv import (
    ToolCall,
    ToolCallFormatError,
    format_tool_call,
    parse_answer,
    parse_tool_calls,
)

# ---------------------------------------------------------------- parser: real model-style replies


def test_hermes_style_reply_with_prose_and_newlines():
    reply = (
        "I'll look up the order first.\n\n<tool_call>\n"
        '{"name": "get_order", "arguments": {"order_id": 17}}\n</tool_call>'
    )
    assert parse_tool_calls(reply) == [ToolCall("get_order", {"order_id": 17})]


def test_nested_arguments_are_kept_exactly():
    args = {"filter": {"status": ["open", "late"], "range": {"min": 1.5, "max": None}},
            "fields": [], "flags": {"deep": {"deeper": [True, False, {"x": "y"}]}}}
    reply = f'<tool_call>{{"name": "search", "arguments": {json.dumps(args)}}}</tool_call>'
    assert parse_tool_calls(reply) == [ToolCall("search", args)]


def test_arguments_as_json_string_and_parameters_synonym():
    reply = ('<tool_call>{"name": "a", "arguments": "{\\"k\\": [1, {\\"z\\": 2}]}"}</tool_call>'
             '<tool_call>{"name": "b", "parameters": {"q": "x"}}</tool_call>'
             '<tool_call>{"name": "c"}</tool_call>')
    assert parse_tool_calls(reply) == [
        ToolCall("a", {"k": [1, {"z": 2}]}), ToolCall("b", {"q": "x"}), ToolCall("c", {})]


def test_openai_function_wrapper_is_accepted():
    reply = '<tool_call>{"type": "function", "function": {"name": "f", "arguments": "{}"}}</tool_call>'
    assert parse_tool_calls(reply) == [ToolCall("f", {})]


def test_markdown_fence_inside_block():
    reply = '<tool_call>\n```json\n{"name": "f", "arguments": {"a": 1}}\n```\n</tool_call>'
    assert parse_tool_calls(reply) == [ToolCall("f", {"a": 1})]


def test_several_calls_in_order_mixed_styles():
    reply = ('First <tool_call>{"name": "one", "arguments": {}}</tool_call> then\n'
             "<tool_call>\n<function=two>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>"
             '\nand <function=three><parameter=s>hello world</parameter></function>')
    assert [c.name for c in parse_tool_calls(reply)] == ["one", "two", "three"]
    assert parse_tool_calls(reply)[1].arguments == {"n": 5}


def test_xml_values_json_when_possible_else_stripped_string():
    reply = ("<function=f><parameter=a> [1, {\"b\": 2}] </parameter><parameter=s>  plain text \n"
             "</parameter><parameter=t>true</parameter><parameter=q>\"7\"</parameter></function>")
    assert parse_tool_calls(reply) == [
        ToolCall("f", {"a": [1, {"b": 2}], "s": "plain text", "t": True, "q": "7"})]


def test_xml_missing_closing_parameter_tags_tolerated():
    reply = "<tool_call><function=f><parameter=a>1<parameter=b>x</function></tool_call>"
    assert parse_tool_calls(reply) == [ToolCall("f", {"a": 1, "b": "x"})]


def test_tricky_string_values_survive():
    value = 'brace } { "quote" <tag> </tool_call> \\ backslash'
    reply = f'<tool_call>{{"name": "echo", "arguments": {{"v": {json.dumps(value)}}}}}</tool_call>'
    assert parse_tool_calls(reply) == [ToolCall("echo", {"v": value})]


def test_missing_close_tag_at_end_tolerated():
    assert parse_tool_calls('<tool_call>{"name": "f", "arguments": {}}\n') == [ToolCall("f", {})]


def test_thinking_is_ignored():
    reply = ('<think>maybe <tool_call>{"name": "bad"</think>'
             '<tool_call>{"name": "good", "arguments": {}}</tool_call>')
    assert parse_tool_calls(reply) == [ToolCall("good", {})]


# ---------------------------------------------------------------- parser: malformed blocks


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ('<tool_call>{"name": "f", "arguments": {"a": 1,}}</tool_call>', "invalid JSON at line 1"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'missing "name"'),
        ('<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "f", "arguments": "not json"}</tool_call>', "not a JSON object"),
        ('<tool_call>{"name": "f", "arguments": {}}} </tool_call>', "unexpected text"),
        ("<tool_call>call f please</tool_call>", "invalid JSON"),
        ('<tool_call>{"name": "f", "arguments": {"x": NaN}}</tool_call>', "invalid JSON"),
        ("<function=f><parameter=a>1</parameter><parameter=a>2</parameter></function>", "twice"),
        ("<function=f>junk</function>", "unexpected text"),
    ],
)
def test_malformed_blocks_raise_with_reason(reply, needle):
    with pytest.raises(ToolCallFormatError) as info:
        parse_tool_calls(reply)
    assert needle in info.value.args[0]
    assert "tool call 1" in info.value.args[0]


def test_error_names_the_bad_block():
    reply = ('<tool_call>{"name": "ok", "arguments": {}}</tool_call>'
             '<tool_call>{"name": "bad", "arguments": {</tool_call>')
    with pytest.raises(ToolCallFormatError, match="tool call 2"):
        parse_tool_calls(reply)


# ---------------------------------------------------------------- answers


def test_parse_answer_last_one_stripped():
    assert parse_answer("<answer> 12.5 </answer>") == "12.5"
    assert parse_answer("<answer>a</answer> then <answer>\nb\n</answer>") == "b"
    assert parse_answer("nothing") is None
    assert parse_answer("<answer></answer>") == ""


# ---------------------------------------------------------------- round trips

_json_scalars = st.none() | st.booleans() | st.integers() | st.text() | st.floats(
    allow_nan=False, allow_infinity=False)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(_names, st.dictionaries(st.text(), _json_values, max_size=5))
def test_json_style_round_trip(name, arguments):
    call = ToolCall(name, arguments)
    assert parse_tool_calls(format_tool_call(call, "json")) == [call]


@settings(max_examples=200, deadline=None)
@given(_names, st.dictionaries(st.from_regex(r"[^<>\s]+", fullmatch=True), _json_values,
                               max_size=5))
def test_xml_style_round_trip(name, arguments):
    call = ToolCall(name, arguments)
    assert parse_tool_calls(format_tool_call(call, "xml")) == [call]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(_names, st.dictionaries(st.text(), _json_values, max_size=3)),
                max_size=4), st.sampled_from(["json", "xml"]))
def test_several_formatted_calls_round_trip(pairs, style):
    calls = [ToolCall(n, a) for n, a in pairs]
    if style == "xml":
        calls = [ToolCall(c.name, {f"k{i}": v for i, v in enumerate(c.arguments.values())})
                 for c in calls]
    reply = "\n".join(format_tool_call(c, style) for c in calls)
    assert parse_tool_calls(reply) == calls


def test_xml_style_refuses_unwritable_names():
    with pytest.raises(ValueError, match="XML style"):
        format_tool_call(ToolCall("f", {"a b": 1}), "xml")

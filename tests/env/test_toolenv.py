"""Tests of the tool-call parser and the ToolEnv base class (spadework/env/toolenv/)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadework.env.toolenv import (
    Instruction,
    ToolCall,
    ToolCallFormatError,
    ToolEnv,
    ToolError,
    answers_match,
    format_tool_call,
    parse_answer,
    parse_tool_calls,
    schema_error,
)
from spadework.designer.guides import TOOL_EXAMPLE

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


def test_trailing_end_of_turn_tokens_are_ignored():
    reply = '<tool_call>{"name": "f", "arguments": {"a": "<|x|>"}}<|im_end|>\n'
    assert parse_tool_calls(reply) == [ToolCall("f", {"a": "<|x|>"})]
    assert parse_answer("<answer>4</answer><|endoftext|>") == "4"


def test_pretty_printed_json_and_qwen3_coder_layout():
    reply = (
        "Let me check both.\n<tool_call>\n{\n  \"name\": \"search\",\n  \"arguments\": {\n"
        "    \"query\": \"late orders\",\n    \"filters\": {\"days\": [1, 2]}\n  }\n}\n</tool_call>\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
    )
    assert parse_tool_calls(reply) == [
        ToolCall("search", {"query": "late orders", "filters": {"days": [1, 2]}}),
        ToolCall("get_weather", {"city": "São Paulo", "days": 3}),
    ]


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
        ('<tool_call>{"name": "f", "arguments": "not json"}</tool_call>', "is not valid JSON"),
        ('<tool_call>{"name": "f", "arguments": "[1]"}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "f", "arguments": {"a": ' + "[" * 5000 + "]" * 5000 + "}}</tool_call>",
         "nested too deeply"),
        ('<tool_call>{"name": "f", "arguments": {"a": ' + "[" * 40 + "]" * 40 + "}}</tool_call>",
         "more than 32 levels"),
        ("<function=f><parameter=a>" + "[" * 40 + "]" * 40 + "</parameter></function>",
         "more than 32 levels"),
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


# ---------------------------------------------------------------- the base class


class CounterEnv(ToolEnv):
    """A small real tool environment: counters to read and add to, in three dependent steps."""

    def declare_tools(self):
        return {
            "read": {"description": "Read a counter.",
                     "parameters": {"type": "object", "required": ["name"],
                                    "properties": {"name": {"type": "string",
                                                            "enum": ["a", "b"]}}}},
            "add": {"description": "Add to a counter.",
                    "parameters": {"type": "object", "required": ["name", "amount"],
                                   "properties": {"name": {"type": "string", "enum": ["a", "b"]},
                                                  "amount": {"type": "integer", "minimum": 1},
                                                  "note": {"type": "object",
                                                           "properties": {
                                                               "tags": {"type": "array",
                                                                        "items": {"type": "string"}},
                                                               "urgent": {"type": "boolean"}}}}}},
            "noop": {"description": "Does nothing.", "parameters": {}},
        }

    def tool_read(self, name):
        return f"{name} = {self.counters[name]}"

    def tool_add(self, name, amount, note=None):
        if self.counters[name] + amount > 100:
            raise ToolError(f"counter {name} would exceed 100")
        self.counters[name] += amount
        self.notes.append(note)
        return {"name": name, "value": self.counters[name]}

    def tool_noop(self):
        return "ok"

    def reset(self, seed=None):
        self.counters, self.notes = {"a": 3, "b": 5}, []
        return self.start("Two counters a and b.", [
            Instruction("Read counter a.", lambda: self.called("read", name="a")),
            Instruction("Add 2 to counter b.", lambda: self.counters["b"] >= 7),
            Instruction("Report a + b.", lambda: True),
        ])

    def expected_answer(self):
        return str(self.counters["a"] + self.counters["b"])

    def solution(self):
        return [self.reply_call("read", name="a"), self.reply_call("add", name="b", amount=2),
                self.reply_answer(self.counters["a"] + self.counters["b"] + 2)]


def _env(**kw):
    env = CounterEnv(**kw)
    env.reset(seed=0)
    return env


def test_first_observation_lists_step_one_and_tools_but_not_later_steps():
    obs, info = CounterEnv().reset(seed=0)
    assert "Read counter a." in obs and "Add 2" not in obs and "You have 10 replies" in obs
    assert "add(name: \"a\"|\"b\", amount: integer, note?: object)" in obs
    assert info == {"tool_calls": 0, "tool_errors": 0, "turn": 0, "steps_done": 0, "steps": 3}


def test_tools_in_openai_format():
    tools = _env().tools()
    assert [t["function"]["name"] for t in tools] == ["read", "add", "noop"]
    assert tools[2] == {"type": "function", "function": {
        "name": "noop", "description": "Does nothing.",
        "parameters": {"type": "object", "properties": {}}}}


def test_solution_wins_and_steps_are_revealed_in_order():
    env = _env()
    observations = []
    for reply in env.solution():
        obs, reward, terminated, truncated, info = env.step(reply)
        observations.append(obs)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert "Next instruction (step 2 of 3): Add 2 to counter b." in observations[0]
    assert "step 3 of 3" in observations[1] and "value: 7" in observations[1]


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"name": "b", "amount": "2"}, "argument 'amount' must be integer, got string \"2\""),
        ({"name": "b", "amount": 2.5}, "must be integer, got number 2.5"),
        ({"name": "b", "amount": True}, "must be integer, got boolean true"),
        ({"name": "c", "amount": 2}, "argument 'name' must be one of \"a\", \"b\""),
        ({"name": "b"}, "missing required argument 'amount'"),
        ({"name": "b", "amount": 2, "colour": 1}, "unknown argument 'colour' (allowed: name, amount, note)"),
        ({"name": "b", "amount": 0}, "must be between 1 and inf"),
        ({"name": "b", "amount": 2, "note": {"tags": ["x", 3]}}, "argument 'note.tags[1]' must be string"),
        ({"name": "b", "amount": 2, "note": {"urgent": 1}}, "argument 'note.urgent' must be boolean"),
        ({"name": "b", "amount": 2, "note": {"when": 1}}, "unknown argument 'note.when'"),
    ],
)
def test_schema_errors_come_back_as_observations(arguments, needle):
    env = _env()
    env.step(env.reply_call("read", name="a"))
    obs, reward, terminated, truncated, info = env.step(env.reply_call("add", **arguments))
    assert needle in obs, obs
    assert "Usage: add(" in obs
    assert (reward, terminated, info["tool_errors"]) == (0.0, False, 1)
    assert env.counters["b"] == 5


def test_execute_tool_refuses_non_objects_and_deep_nesting():
    env = _env()
    deep: list = []
    for _ in range(40):
        deep = [deep]
    assert env.execute_tool("add", {"name": "b", "amount": 2, "note": {"tags": deep}})[1] is False
    assert env.execute_tool("add", ["b", 2])[1] is False
    assert env.counters["b"] == 5


def test_integral_float_is_accepted_as_integer_and_converted():
    env = _env()
    text, ok = env.execute_tool("add", {"name": "b", "amount": 2.0})
    assert ok and env.counters["b"] == 7 and isinstance(env.call_history[-1].arguments["amount"], int)


def test_unknown_tool_lists_available_ones_and_tool_error_is_shown():
    env = _env()
    assert env.execute_tool("delete", {}) == (
        "Error: unknown tool 'delete'. Available tools: read, add, noop.", False)
    text, ok = env.execute_tool("add", {"name": "a", "amount": 98})
    assert (text, ok) == ("Error: counter a would exceed 100", False)
    assert env.call_history == []


def test_answer_before_steps_done_names_the_open_step():
    env = _env()
    obs, reward, terminated, truncated, _ = env.step("<answer>10</answer>")
    assert "step 1 of 3 is still open" in obs and "Read counter a." in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    env.step(env.reply_call("read", name="a"))
    obs, *_ = env.step("<answer>10</answer>")
    assert "step 2 of 3 is still open" in obs


def test_wrong_final_answer_ends_the_episode():
    env = _env()
    for reply in env.solution()[:-1]:
        env.step(reply)
    obs, reward, terminated, truncated, _ = env.step("<answer>11</answer>")
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert env.step("<answer>10</answer>")[1:4] == (0.0, False, True)


def test_format_errors_get_small_penalty_and_reason():
    env = _env()
    obs, reward, terminated, truncated, _ = env.step("I think I should read a.")
    assert reward == -0.05 and not terminated and "no tool call and no answer" in obs
    obs, reward, *_ = env.step('<tool_call>{"name": "read", "arguments": {"name": }</tool_call>')
    assert reward == -0.05 and "invalid JSON at line 1 column" in obs


def test_several_calls_per_turn_cap_and_ignored_answer():
    env = _env()
    env.max_calls_per_turn = 2
    reply = "".join(env.reply_call("noop") for _ in range(3)) + "<answer>8</answer>"
    obs, reward, terminated, truncated, info = env.step(reply)
    assert info["tool_calls"] == 2 and "1 more call(s) skipped" in obs
    assert "<answer> was ignored" in obs and not terminated


def test_truncation_at_max_turns_counts_tool_turns():
    env = _env(max_turns=3)
    flags = [env.step(env.reply_call("noop"))[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError, match="reset"):
        CounterEnv().step("<answer>1</answer>")


def test_trivial_first_step_is_refused():
    class Trivial(CounterEnv):
        def reset(self, seed=None):
            self.counters = {"a": 1, "b": 1}
            return self.start("x", [Instruction("nothing", lambda: True)])

    with pytest.raises(ValueError, match="already met"):
        Trivial().reset(0)


def test_declared_tool_without_method_is_a_bug():
    class Missing(CounterEnv):
        def declare_tools(self):
            return {"fly": {"description": "x", "parameters": {}}}

    with pytest.raises(TypeError, match="tool_fly"):
        Missing().reset(0)


def test_answers_match_rules():
    assert answers_match("$1,000", "1000.0000001")
    assert not answers_match("1000.01", "1000")
    assert answers_match("0", "0.0") and answers_match("DONE", "done")
    assert schema_error([1, 2], {"type": "array", "maxItems": 1}) == \
        "arguments has 2 items, outside the allowed range"


def test_the_guide_example_is_a_working_environment(monkeypatch):
    import sys

    import spadework.env.toolenv as toolenv

    monkeypatch.setitem(sys.modules, "toolenv", toolenv)
    code = TOOL_EXAMPLE
    namespace: dict = {}
    exec(compile(code, "<guide example>", "exec"), namespace)  # our own text
    for level in (1, 2, 3):
        env = namespace["PantryEnv"](max_turns=6, level=level)
        for seed in range(5):
            obs, _ = env.reset(seed=seed)
            assert f"step 1 of {level}" in obs and "weather()" in obs
            replies = env.solution()
            assert len(replies) == (level if level < 3 else 4)  # the top level answers
            *_, (obs, reward, terminated, truncated, info) = [env.step(r) for r in replies]
            assert (reward, terminated) == (1.0, True), obs
        if level > 1:  # skipping to the last reply does not win
            env.reset(seed=0)
            assert env.step(env.solution()[-1])[1:3] == (0.0, False)
    from spadework.env.static import check_static

    assert check_static(code).class_name == "PantryEnv"


class LabelEnv(ToolEnv):
    """One string parameter whose XML text also parses as JSON (an id like 1234)."""

    def declare_tools(self):
        return {"tag": {"description": "Tag an order.",
                        "parameters": {"type": "object", "required": ["order_id", "count"],
                                       "properties": {"order_id": {"type": "string"},
                                                      "count": {"type": "integer"}}}}}

    def tool_tag(self, order_id, count):
        self.seen.append((order_id, count))
        return "tagged"

    def reset(self, seed=None):
        self.seen = []
        return self.start("Tag order 1234.", [Instruction("Tag order 1234.", lambda: bool(self.seen)),
                                              Instruction("Answer done.", lambda: True)])

    def expected_answer(self):
        return "done"

    def solution(self):
        return [self.reply_call("tag", order_id="1234", count=1), self.reply_answer("done")]


def test_xml_parameter_text_is_kept_where_the_schema_wants_a_string():
    env = LabelEnv()
    env.reset(seed=0)
    env.step("<function=tag><parameter=order_id>1234</parameter><parameter=count>2</parameter></function>")
    assert env.seen == [("1234", 2)]  # the string as written; the integer as declared
    obs, *_ = env.step('<tool_call>{"name": "tag", "arguments": {"order_id": 7, "count": 1}}</tool_call>')
    assert env.seen == [("1234", 2)] and "must be string" in obs  # JSON says what it means


class TwoStepEnv(ToolEnv):
    """Two steps and a real final answer, with levels."""

    LEVELS = 2

    def declare_tools(self):
        return {"add": {"description": "Add to the total.", "parameters": {
            "type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}}}

    def reset(self, seed=None):
        self.total = 0
        return self.start("Keep a total.", self.steps_for_level([
            Instruction("Add 2.", lambda: self.total >= 2),
            Instruction("Add 3. Then answer with the total.", lambda: self.total >= 5)]))

    def tool_add(self, n):
        self.total += n
        return str(self.total)

    def expected_answer(self):
        return str(self.total)

    def solution(self):
        return self.solution_for_level([[self.reply_call("add", n=2)], [self.reply_call("add", n=3)]],
                                       5)


def test_levels_play_the_first_steps_and_below_the_top_the_steps_win():
    low, top = TwoStepEnv(max_turns=4, level=1), TwoStepEnv(max_turns=4, level=2)
    obs, _ = low.reset(seed=0)
    assert "step 1 of 1" in obs and "Add 3" not in obs and not low.whole_task and top.whole_task
    assert "won as soon as every step is done" in obs
    assert low.solution() == [ToolEnv.reply_call("add", n=2)]
    assert low.step(ToolEnv.reply_call("add", n=1))[1:3] == (0.0, False)  # the step is still open
    obs, reward, terminated, *_ = low.step(ToolEnv.reply_call("add", n=1))
    assert (reward, terminated) == (1.0, True) and "task complete" in obs
    obs, _ = top.reset(seed=0)
    assert "step 1 of 2" in obs and top.solution()[-1] == "<answer>5</answer>"
    assert top.step(top.solution()[0])[1:3] == (0.0, False)
    assert top.step(top.solution()[1])[1:3] == (0.0, False)  # the top level wants the answer
    assert top.step("<answer>done</answer>")[1:3] == (0.0, True)  # the top level judges the total


def test_every_observation_ends_with_the_open_step_and_the_format():
    env = TwoStepEnv(max_turns=4, level=2)
    env.reset(seed=0)
    obs = env.step("nothing")[0]
    assert obs.endswith("3 replies left.") and "Now: step 1 of 2: Add 2." in obs
    assert '<tool_call>{"name": "add", "arguments": {"n": 1}}</tool_call>' in obs  # a real example
    obs = env.step(ToolEnv.reply_call("add", n=2))[0]
    assert "Now: step 2 of 2: Add 3." in obs
    obs = env.step('{"name": "add", "arguments": {"n": 3}}')[0]  # no tags: read as the call
    assert "Read as a tool call" in obs and "Now: every step is done." in obs and env.total == 5


@pytest.mark.parametrize("level", [0, 3, True, "1"])
def test_a_level_outside_the_declared_ones_is_refused(level):
    with pytest.raises(ValueError, match="level must be a whole number from 1 to LEVELS=2"):
        TwoStepEnv(level=level)


def test_level_is_read_only():
    env = TwoStepEnv(level=2)
    with pytest.raises(AttributeError, match="built at"):
        env.level = 1


class DeskEnv(ToolEnv):
    """Three steps written as calls; ``mixed`` makes step 2 a bare Instruction."""

    LEVELS = 3

    def declare_tools(self):
        form = {"type": "string", "enum": ["A-1", "B-2", "C-3", "D-4"]}
        return {"file": {"description": "File a form.", "parameters": {
                    "type": "object", "required": ["form"], "properties": {"form": form}}},
                "stamp": {"description": "Stamp a filed form.", "parameters": {
                    "type": "object", "required": ["form"], "properties": {"form": form}}}}

    def tool_file(self, form):
        self.filed.append(form)
        return f"{form} filed"

    def tool_stamp(self, form):
        if form not in self.filed:
            raise ToolError(f"{form} is not filed")
        self.stamped.append(form)
        return f"{form} stamped"

    def expected_answer(self):
        return str(len(self.filed) + 10 * len(self.stamped))

    def reset(self, seed=None):
        self.filed, self.stamped = [], []
        first, second = self.options.get("forms", ("B-2", "C-3"))
        step2 = (Instruction("Stamp it.", lambda: first in self.stamped)
                 if self.options.get("mixed") else self.call_step("Stamp it.", "stamp", form=first))
        return self.start("A desk.", self.steps_for_level([
            self.call_step(f"File {first}.", "file", form=first), step2,
            self.call_step(f"File {second}.", "file", form=second)]))


@pytest.mark.parametrize("level", [1, 2, 3])
def test_call_steps_give_a_winning_solution_at_every_level_and_leave_the_state_alone(level):
    env = DeskEnv(level=level)
    env.reset(seed=0)
    replies = env.solution()
    assert (env.filed, env.stamped, env.call_history) == ([], [], [])  # worked out on a copy
    assert [r.count("<tool_call>") for r in replies] == [1] * level + [0] * (level == 3)
    if level == 3:
        assert replies[-1] == "<answer>12</answer>"  # the state after the calls, not at reset
    *_, (obs, reward, terminated, _, info) = [env.step(r) for r in replies]
    assert (reward, terminated, info["steps_done"]) == (1.0, True, level), obs


def test_a_step_without_a_call_or_a_failing_call_is_named_by_the_default_solution():
    env = DeskEnv(level=3, mixed=True)
    env.reset(seed=0)
    with pytest.raises(NotImplementedError, match=r"write it, or write every step as "
                                                  r"self\.call_step.*step 2 is an Instruction"):
        env.solution()
    env = DeskEnv(level=3, forms=("B-2", "Z-9"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r'call 3 of the steps, file\(\{"form": "Z-9"\}\), failed: '
                                         r"Error: argument 'form' must be one of"):
        env.solution()
    low = DeskEnv(level=2, forms=("B-2", "Z-9"))  # level 2 never files Z-9
    low.reset(seed=0)
    assert len(low.solution()) == 2
    bare = DeskEnv()
    bare.start("No steps.")
    with pytest.raises(NotImplementedError, match=r"\*\*arguments\)$"):
        bare.solution()


class _Meter(ToolEnv):
    """Declarations written the ways the 1.5B designer wrote them (docs/results.md)."""

    def __init__(self, parameters, **kwargs):
        super().__init__(**kwargs)
        self.parameters = parameters

    def declare_tools(self):
        return {"charge": {"description": "Charge it.", "parameters": self.parameters}}

    def tool_charge(self, units: int, note="none"):
        return f"charged {units} ({note})"


@pytest.mark.parametrize(("parameters", "expected"), [
    ({}, {"type": "object", "properties": {"units": {"type": "integer"}, "note": {"type": "string"}},
          "required": ["units"]}),
    (None, {"type": "object", "properties": {"units": {"type": "integer"}, "note": {"type": "string"}},
            "required": ["units"]}),
    ({"units": {"type": "integer", "minimum": 1}},
     {"type": "object", "properties": {"units": {"type": "integer", "minimum": 1}}, "required": ["units"]}),
    ({"type": "object", "properties": {"note": {"type": "string"}}},
     {"type": "object", "properties": {"note": {"type": "string"}, "units": {"type": "integer"}},
      "required": ["units"]}),
])
def test_a_declaration_is_completed_from_its_method(parameters, expected):
    env = _Meter(parameters)
    assert env.tools()[0]["function"]["parameters"] == expected
    env.start("A meter.")
    assert env.step('<tool_call>{"name": "charge", "arguments": {"units": 2}}</tool_call>')[0] \
        .startswith("Result of charge:\ncharged 2 (none)")
    assert "missing required argument 'units'" in env.step(
        '<tool_call>{"name": "charge", "arguments": {}}</tool_call>')[0]  # not a crash


def test_a_one_value_schema_wraps_a_one_argument_method_and_mismatches_are_named():
    class Dial(_Meter):
        def tool_charge(self, units):
            return str(units)

    schema = Dial({"type": "integer", "minimum": 1}).tools()[0]["function"]["parameters"]
    assert schema == {"type": "object", "properties": {"units": {"type": "integer", "minimum": 1}},
                      "required": ["units"]}
    with pytest.raises(TypeError, match=r"one property per argument of tool_charge\(units, note\)"):
        _Meter({"type": "integer"}).tools()
    with pytest.raises(TypeError, match=r"schema has argument\(s\) 'volts' but the method is "
                                        r"tool_charge\(units, note\)"):
        _Meter({"type": "object", "properties": {"volts": {"type": "number"}}}).tools()
    with pytest.raises(TypeError, match="parameters must be a JSON schema of type object, got list"):
        _Meter(["units"]).tools()

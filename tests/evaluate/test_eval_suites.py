"""The math, BFCL, HumanEval and local-file suites: data as pulled, scorers on known answers."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from eval_policies import ScriptedPolicy, oracle, wrong
from spadework.env.actions import format_boxed
from spadework.evaluate.bfcl import BfclSuite, calls_ok, parse_calls
from spadework.evaluate.data import require
from spadework.evaluate.humaneval import HumanEvalSuite, check_program, extract_program
from spadework.evaluate.items import EvalItem, Scored
from spadework.evaluate.judge import EvalError, Judge
from spadework.evaluate.local import gpqa_answer, local_suite
from spadework.evaluate.mathsuite import fixed_subset, load_mmath, score_math
from spadework.evaluate.presets import SuiteSettings
from spadework.evaluate.suite import RunContext, play_single_turn


@pytest.fixture(scope="module")
def judge():
    with Judge() as j:
        yield j


def test_math_items_are_aime_2024_aime_2025_i_and_math500():
    items = load_mmath(require("mmath")["mmath/mmath/en.json"])
    assert Counter(it.bucket for it in items) == {"AIME2024": 30, "AIME2025": 15, "MATH500": 311}
    assert all(it.messages[0]["content"].endswith(
        "\nPlease reason step by step, and put your final answer within \\boxed{}.") for it in items)
    assert not any(it.gold.startswith("$") for it in items)
    a, b = fixed_subset(items, 120, "math-subset"), fixed_subset(list(reversed(items)), 120, "math-subset")
    assert {i.item_id for i in a} == {i.item_id for i in b} and len(a) == 120


def test_math_oracle_scores_one_and_wrong_zero(judge):
    items = fixed_subset(load_mmath(require("mmath")["mmath/mmath/en.json"]), 12, "t")
    ctx = RunContext(None, SuiteSettings(), judge)
    golds = {it.messages[0]["content"]: it.gold for it in items}
    score = lambda it, r: score_math(ctx, it, r)  # noqa: E731
    right = play_single_turn(RunContext(oracle(golds, format_boxed), SuiteSettings(), judge), items, score)
    assert all(r.correct for r in right), [(r.item_id, r.gold) for r in right if not r.correct]
    bad = play_single_turn(RunContext(ScriptedPolicy(lambda t: r"\boxed{-987654}"), SuiteSettings(),
                                      judge), items, score)
    assert not any(r.correct for r in bad)


def test_bfcl_parser_accepts_calls_and_runs_nothing():
    assert parse_calls("[f(a=[1, 2], b={'k': 'v'})]") == [("f", {"a": [1, 2], "b": {"k": "v"}})]
    assert parse_calls("f(x=1.5)") == [("f", {"x": 1.5})]
    for bad in ("f(1)", "[f(a=g())]", "print('hi'", "[1, 2]"):
        with pytest.raises(ValueError):
            parse_calls(bad)


def test_bfcl_oracle_passes_every_item_and_wrong_none():
    items, truth = BfclSuite().load()
    assert Counter(it.bucket for it in items) == {"simple_python": 400, "multiple": 200,
                                                  "parallel": 200, "parallel_multiple": 200}
    passed = wrong_passed = 0
    for it in items:
        answers, docs = truth[it.item_id]
        calls, off = [], []
        for t in answers:
            (name, params), = t.items()
            props = docs[name]["parameters"]["properties"]
            args = {k: next(v for v in vals if v != "") for k, vals in params.items()
                    if k in props and any(v != "" for v in vals)}
            calls.append((name, args))
            off.append((name, {**args, **{k: "\u00a7" for k in list(args)[:1]}}))
        passed += calls_ok(list(reversed(calls)), answers, docs)  # any order
        wrong_passed += calls_ok(off, answers, docs) or calls_ok(calls[:-1], answers, docs)
    assert passed == len(items) == 1000 and wrong_passed == 0


def test_humaneval_canonical_solutions_pass_in_the_sandbox_and_stubs_fail():
    from spadework.sandbox import Limits, Sandbox

    _, problems = HumanEvalSuite().load()
    assert len(problems) == 164
    with Sandbox(Limits(step_seconds=10)) as sb:
        for p in list(problems.values())[:25]:
            assert check_program(sb, p["prompt"] + p["canonical_solution"], p["test"],
                                 p["entry_point"])[0], p["task_id"]
            assert not check_program(sb, p["prompt"] + "    return None\n", p["test"],
                                     p["entry_point"])[0]
        ok, why = check_program(sb, "import socket\nsocket.socket()\ndef f():\n    pass\n",
                                "def check(c):\n    pass\n", "f")
        assert not ok and "PermissionError" in why


def test_humaneval_program_extraction():
    assert extract_program("no code", "def f():\n", "f") is None
    got = extract_program("x\n```python\ndef g():\n    pass\n```\n```python\n    return 1\n```",
                          "def f():\n", "f")
    assert got == "def f():\n    return 1\n"


def test_gpqa_local_file_shuffles_reproducibly_and_scores_letters(tmp_path, judge):
    rows = [{"Question": f"Q{n}?", "Correct Answer": f"right{n}", "Incorrect Answer 1": "w1",
             "Incorrect Answer 2": "w2", "Incorrect Answer 3": "w3"} for n in range(6)]
    path = tmp_path / "gpqa.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    suite = local_suite("gpqa", path)
    items = suite.items()
    assert [i.gold for i in items] == [i.gold for i in local_suite("gpqa", path).items()]
    for it in items:
        text = it.messages[0]["content"]
        assert f"{it.gold}) right{it.index}" in text
    golds = {it.messages[0]["content"]: it.gold for it in items}
    rows_out = suite.run(RunContext(oracle(golds, format_boxed), SuiteSettings(), judge))
    assert all(r.correct for r in rows_out)
    assert gpqa_answer("The answer is (c)") == "C" and gpqa_answer("Answer: D") == "D"


def test_local_files_say_what_is_wrong(tmp_path):
    with pytest.raises(EvalError, match="does not exist"):
        local_suite("aime", tmp_path / "none.jsonl").items()
    bad = tmp_path / "aime.jsonl"
    bad.write_text(json.dumps({"text": "no fields"}))
    with pytest.raises(EvalError, match="problem, question, prompt"):
        local_suite("aime", bad).items()


def test_aime_local_file_scores_with_math_verify(tmp_path, judge):
    path = tmp_path / "aime.jsonl"
    path.write_text("\n".join(json.dumps({"problem": f"P{n}", "answer": str(n * 7)}) for n in range(3)))
    suite = local_suite("aime", path)
    rows = suite.run(RunContext(wrong(), SuiteSettings(), judge))
    assert len(rows) == 3 and not any(r.correct for r in rows)
    items = suite.items()
    golds = {it.messages[0]["content"]: it.gold for it in items}
    assert all(r.correct for r in suite.run(RunContext(oracle(golds, format_boxed), SuiteSettings(), judge)))


def test_unplayable_items_are_counted_losses(judge):
    items = [EvalItem("s", "t", "b", "x/1", 1, status="gen_error", error="boom")]
    rows = play_single_turn(RunContext(wrong(), SuiteSettings(samples=3), judge), items,
                            lambda it, r: None)
    assert [r.status for r in rows] == ["gen_error"] * 3 and not any(r.correct for r in rows)


def test_a_prompt_longer_than_the_context_is_recorded_not_cut(judge):
    class Short(ScriptedPolicy):
        context_length = 50

        def prompt_ids(self, conv):
            return list(range(len(str(conv.messages[-1]["content"]))))

    items = [EvalItem("s", "t", "b", f"x/{n}", n, messages=({"role": "user", "content": "q" * n},))
             for n in (10, 60)]
    policy = Short(lambda text: "<answer>1</answer>")
    rows = play_single_turn(RunContext(policy, SuiteSettings(), judge), items,
                            lambda it, r: Scored("1", 1.0, True))
    assert [r.status for r in rows] == ["ok", "too_long"]
    assert rows[1].error.startswith("prompt of 60 tokens") and not rows[1].correct
    assert policy.calls[0][0] == 1  # only the item that fits was sent

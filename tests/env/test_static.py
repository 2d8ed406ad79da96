"""The static stage on its own: real fixture files and small modules written for one rule each."""

from __future__ import annotations

from pathlib import Path

import pytest

from spadework.env.static import StaticInfo, allowed_imports, check_static
from spadework.errors import ContractError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "envs"


def _expect(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} lacks '# expect: <stage>'"
    return first.removeprefix("# expect: ").strip()


BAD = sorted((FIXTURES / "bad").glob("*.py"))
STATIC_BAD = [p for p in BAD if _expect(p) == "static"]
OTHER = [p for p in BAD if _expect(p) != "static"] + sorted((FIXTURES / "good").glob("*.py"))

GAME = '''
import random
import re
class GameEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
    def reset(self, seed=None):
        self.x = random.Random(seed).randint(1, 9)
        return "Guess.", {}
    def step(self, action):
        return "ok", 0.0, False, False, {}
    def solution(self):
        return "\\\\boxed{%d}" % self.x
'''


def _with(extra_top: str = "", body: str = "") -> str:
    """GAME with lines added at module level (top) and inside step()."""
    code = extra_top + GAME
    if body:
        code = code.replace('        return "ok"', f"        {body}\n        return \"ok\"")
    return code


REASONS = {
    "import_os": "import of 'os'",
    "import_subprocess": "import of 'subprocess'",
    "import_socket": "import of 'socket'",
    "syntax_error": "syntax error at line",
    "no_step": "defines reset() but no step",
    "module_level_code": "when the module is imported",
}


@pytest.mark.parametrize("path", STATIC_BAD, ids=lambda p: p.stem)
def test_static_bad_fixtures_fail_with_reason(path):
    with pytest.raises(ContractError) as e:
        check_static(path.read_text())
    assert REASONS[path.stem] in e.value.reason
    if "line" in e.value.reason:
        assert any(ch.isdigit() for ch in e.value.reason)


@pytest.mark.parametrize("path", OTHER, ids=lambda p: p.stem)
def test_other_fixtures_pass_static(path):
    expected = {"cipher_alphabet_slip": "CipherMachineEnv", "hidden_answer": "HarvestEnv",
                "level_unsolvable": "LongSumEnv", "levels_inverted": "ProductEnv",
                "levels_not_an_int": "StringLevelsEnv", "placeholder_format": "PlaceholderSumEnv",
                "terse_feedback": "TerseSumEnv", "example_is_answer": "DivisibilityRemainderEnv",
                }.get(path.stem, "ArithmeticChainEnv")
    assert check_static(path.read_text()).class_name == expected or path.parent.name == "good"


def test_starter_library_passes_static():
    library = pytest.importorskip("spadework.library")
    envs = library.starter_envs()
    assert envs, "the starter library is empty"
    for env in envs:
        info = check_static(env.code)
        assert info.class_name == env.class_name
        assert info.setting == env.setting, env.name


def test_game_passes():
    assert check_static(GAME) == StaticInfo("GameEnv", "games")


def test_numpy_only_when_allowed():
    code = _with("import numpy as np\n")
    with pytest.raises(ContractError, match="import of 'numpy'"):
        check_static(code)
    assert check_static(code, allow_numpy=True).class_name == "GameEnv"
    assert "toolenv" in allowed_imports()


@pytest.mark.parametrize(
    "top, body, needle",
    [
        ("", "eval('1+1')", "'eval'"),
        ("", "exec('x = 1')", "'exec'"),
        ("", "__import__('os')", "'__import__'"),
        ("", "open('/etc/passwd')", "'open'"),
        ("", "input()", "'input'"),
        ("", "globals()['x'] = 1", "'globals'"),
        ("", "compile('1', 'f', 'eval')", "'compile'"),
        ("", "x = ().__class__.__bases__", "__bases__"),
        ("", "x = object.__subclasses__()", "__subclasses__"),
        ("", "getattr(self.step, '__globals__')", "'__globals__'"),
        ("", "print(__builtins__)", "'__builtins__'"),
        ("from . import helpers\n", "", "relative imports"),
        ("import importlib\n", "", "import of 'importlib'"),
        ("from os import path\n", "", "import of 'os'"),
        ("import ctypes\n", "", "import of 'ctypes'"),
        ("import sys\n", "", "import of 'sys'"),
    ],
)
def test_escape_hatches_are_rejected(top, body, needle):
    with pytest.raises(ContractError) as e:
        check_static(_with(top, body))
    assert needle in e.value.reason


def test_a_variable_named_like_a_builtin_is_fine():
    assert check_static(_with("", "input = action.strip(); open = 3")).class_name == "GameEnv"


@pytest.mark.parametrize(
    "top",
    [
        'import re\nPAT = re.compile(r"\\\\boxed")\n',
        'WORDS = "apple pear plum".split()\n',
        "from itertools import product\nCELLS = list(product(range(3), repeat=2))\n",
        "SQUARES = {i: i * i for i in range(10)}\n",
        '"""A docstring."""\nfrom __future__ import annotations\n',
        'if __name__ == "__main__":\n    print(GameEnv().reset(0))\n',
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\n",
        "import math\nLIMIT = math.sqrt(2) * 10\n",
        "SCORE = lambda x: x + 1\n",
    ],
)
def test_pure_module_level_definitions_pass(top):
    assert check_static(_with(top)).class_name == "GameEnv"


@pytest.mark.parametrize(
    "top, needle",
    [
        ("import random\nrandom.seed(0)\n", "Expr statement"),
        ("import random\nSECRET = random.randint(1, 9)\n", "calls random.randint()"),
        ("WORDS = ['a', 'b']\nfor w in WORDS:\n    pass\n", "For statement"),
        ("while True:\n    pass\n", "While statement"),
        ("print('hello')\n", "Expr statement"),
        ("class Helper:\n    X = print('x')\n", "class Helper calls print()"),
        ("try:\n    import json\nexcept ImportError:\n    json = None\n", "Try statement"),
    ],
)
def test_module_level_side_effects_are_rejected(top, needle):
    with pytest.raises(ContractError) as e:
        check_static(_with(top))
    assert needle in e.value.reason and "line" in e.value.reason


def test_trailing_self_test_is_rejected():
    with pytest.raises(ContractError, match="calls GameEnv"):
        check_static(GAME + "\nenv = GameEnv()\n")


@pytest.mark.parametrize(
    "old, new, needle",
    [
        ("    def __init__(self, max_turns=10, **kwargs):\n        self.max_turns = max_turns\n", "", "no __init__()"),
        ("def __init__(self, max_turns=10, **kwargs)", "def __init__(self)", "must accept 'max_turns'"),
        ("def reset(self, seed=None)", "def reset(self)", "must accept 'seed'"),
        ("def step(self, action)", "def step(self)", "takes no action argument"),
        ("def step(self, action)", "def act(self, action)", "defines reset() but no step"),
    ],
)
def test_contract_methods_are_checked(old, new, needle):
    code = GAME.replace(old, new)
    assert code != GAME
    with pytest.raises(ContractError) as e:
        check_static(code)
    assert needle in e.value.reason


def test_inherited_methods_count():
    code = GAME.replace("class GameEnv:", "class Base:") + "\nclass GameEnv(Base):\n    def reset(self, seed=None):\n        return super().reset(seed)\n"
    assert check_static(code).class_name == "GameEnv"


def test_toolenv_subclass_is_tool_use():
    code = (
        "from toolenv import ToolEnv\n"
        "class ShopEnv(ToolEnv):\n"
        "    def declare_tools(self):\n        return {}\n"
        "    def reset(self, seed=None):\n        return self.start('Shop.', [])\n"
        "    def solution(self):\n        return ['<answer>done</answer>']\n"
    )
    assert check_static(code) == StaticInfo("ShopEnv", "tool-use")


def test_no_class_at_all():
    with pytest.raises(ContractError, match="no environment class"):
        check_static("X = 1\n")

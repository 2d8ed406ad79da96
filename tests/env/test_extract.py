"""Pulling the environment module out of designer replies, and the f-string brace repair."""

from __future__ import annotations

import ast
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadework.env.contract import find_env_class
from spadework.env.extract import ExtractedModule, extract_env_module, parse_with_repair
from spadework.errors import ExtractError

GAME = '''import random


class Board:
    """A helper defined before the environment (the reference would pick it by name)."""

    def __init__(self, n):
        self.n = n


class GuessEnv:
    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(1, 100)
        self.turn = 0
        return "Guess a number from 1 to 100. Answer as \\\\boxed{n}.", {}

    def step(self, action):
        self.turn += 1
        return "higher", 0.0, False, self.turn >= self.max_turns, {}

    def solution(self):
        return f"\\\\boxed{{{self.target}}}"
'''


def fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}" + ("" if code.endswith("\n") else "\n") + "```\n"


def test_plain_reply_with_prose_and_one_block() -> None:
    reply = "Here is a number-guessing game grounded in the document.\n\n" + fence(GAME) + "\nEnjoy!"
    assert extract_env_module(reply) == ExtractedModule(GAME, "GuessEnv", ())


@pytest.mark.parametrize("lang", ["python", "py", "Python", "python3", ""])
def test_fence_labels(lang: str) -> None:
    assert extract_env_module(fence(GAME, lang)).class_name == "GuessEnv"


def test_thinking_with_a_draft_is_dropped() -> None:
    draft = GAME.replace("GuessEnv", "DraftEnv")
    reply = f"<think>\nLet me draft it:\n{fence(draft)}Good, now the final.\n</think>\n\n{fence(GAME)}"
    assert extract_env_module(reply).class_name == "GuessEnv"


def test_prefix_closed_by_think_without_an_opening_tag() -> None:
    draft = GAME.replace("GuessEnv", "DraftEnv")
    reply = f"Okay, the user wants a game.\n{fence(draft)} fine.\n</think>\n{fence(GAME)}"
    assert extract_env_module(reply).class_name == "GuessEnv"


def test_draft_fenced_in_thinking_then_unfenced_module() -> None:
    draft = GAME.replace("GuessEnv", "DraftEnv")
    reply = f"<think>\n{fence(draft)}</think>\n\n{GAME}\n\n"
    assert extract_env_module(reply) == ExtractedModule(GAME, "GuessEnv", ())


def test_think_tags_inside_code_are_code() -> None:
    code = GAME.replace('return "higher"', 'action = action.split("</think>")[-1]\n        return "higher"')
    reply = "<think>plan</think>\n" + fence(code)
    m = extract_env_module(reply)
    assert m.code == code and m.class_name == "GuessEnv"


def test_unfenced_module_with_a_think_literal_is_still_accepted() -> None:
    code = GAME.replace('return "higher"', 'action = action.split("</think>")[-1]\n        return "higher"')
    assert extract_env_module(code).code == code


def test_several_blocks_the_one_defining_the_env_wins() -> None:
    usage = "env = GuessEnv()\nobs, info = env.reset(seed=1)\nprint(obs)\n"
    reply = "The game:\n" + fence(GAME) + "Usage:\n" + fence(usage) + "Example output:\n" + fence("Guess a number", "")
    assert extract_env_module(reply).class_name == "GuessEnv"


def test_several_env_blocks_the_last_wins() -> None:
    v2 = GAME.replace("GuessEnv", "GuessEnvV2")
    reply = "First try:\n" + fence(GAME) + "Improved version:\n" + fence(v2)
    assert extract_env_module(reply).class_name == "GuessEnvV2"


def test_json_blocks_are_not_candidates() -> None:
    reply = fence('{"name": "x"}', "json") + fence(GAME)
    assert extract_env_module(reply).class_name == "GuessEnv"


def test_unterminated_final_fence_is_taken_to_the_end() -> None:
    m = extract_env_module("Here you go:\n```python\n" + GAME)
    assert m.class_name == "GuessEnv" and m.repairs == (
        "took the unterminated final code block to the end of the reply",)


def test_truncated_reply_that_does_not_parse_says_so() -> None:
    cut = GAME[: GAME.index("def solution")] + "def solution(self):\n        return f\"\\\\boxed{{"
    with pytest.raises(ExtractError, match="cut off .*truncated"):
        extract_env_module("```python\n" + cut)


def test_bare_fence_inside_a_string_does_not_end_the_block() -> None:
    code = GAME.replace(
        '        return "higher", 0.0',
        '        board = """The board:\n```\n. . X\n```\n"""\n        return board, 0.0',
    )
    m = extract_env_module("Game:\n" + fence(code) + "That is all.")
    assert m.code == code
    ast.parse(m.code)


def test_indented_fence_is_dedented() -> None:
    indented = "".join("   " + line if line.strip() else line for line in GAME.splitlines(True))
    reply = "1. The code:\n   ```python\n" + indented + "   ```\n"
    assert extract_env_module(reply).code == GAME


def test_windows_line_endings() -> None:
    reply = ("Game:\n" + fence(GAME) + "Done.").replace("\n", "\r\n")
    m = extract_env_module(reply)
    assert m.class_name == "GuessEnv" and m.code == GAME.replace("\n", "\r\n") and m.repairs == ()


def test_unfenced_reply_that_is_a_module() -> None:
    assert extract_env_module(GAME).class_name == "GuessEnv"


def test_explicit_env_class() -> None:
    code = GAME + "\nclass Other(GuessEnv):\n    pass\n\nENV_CLASS = \"GuessEnv\"\n"
    assert extract_env_module(fence(code)).class_name == "GuessEnv"


# ---------------------------------------------------------------- errors a person can act on


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        ("<think>I should design a maze game. First", "all thinking: <think> was never closed"),
        ("<think>done thinking</think>\n  ", "all thinking: there is nothing after </think>"),
        ("I cannot help with that.", "no ```python code block"),
        ("Sure! " + GAME, "no ```python code block"),
        (fence("class Helper:\n    pass\n"), "no class defines both reset() and step()"),
        (fence("def f(:\n    pass\n"), "syntax error at line 1"),
        ("<think>\n" + fence(GAME) + "</think>Done, see above.", "only code blocks are inside the thinking"),
        (fence("ENV_CLASS = 'Missing'\n" + GAME), "ENV_CLASS names 'Missing'"),
    ],
)
def test_errors_say_what_went_wrong(reply: str, needle: str) -> None:
    with pytest.raises(ExtractError) as e:
        extract_env_module(reply)
    assert needle in e.value.reason


def test_error_lists_every_block() -> None:
    reply = fence("def f(:\n    pass\n") + fence("x = 1\n", "")
    with pytest.raises(ExtractError) as e:
        extract_env_module(reply)
    assert "block 1 of 2 (python, " in e.value.reason and "block 2 of 2 (unlabelled" in e.value.reason


def test_binary_junk_and_oversized_replies() -> None:
    rng = random.Random(1)
    junk = bytes(rng.randrange(256) for _ in range(5000)).decode("latin-1")
    with pytest.raises(ExtractError, match="binary"):
        extract_env_module(junk)
    with pytest.raises(ExtractError, match="binary"):
        extract_env_module(fence(GAME).replace("import", "import\x00"))
    with pytest.raises(ExtractError, match="over the cap"):
        extract_env_module(fence(GAME) + "#" * 600_000)
    assert extract_env_module(fence(GAME) + "x" * 100, max_chars=10_000).class_name == "GuessEnv"
    with pytest.raises(ExtractError, match="not text"):
        extract_env_module(b"```python\n```")  # type: ignore[arg-type]


@pytest.mark.parametrize("code", ["x = " + "-" * 100_000 + "1", "x = " + "+".join(["1"] * 100_000)])
def test_code_too_deep_for_the_parser_is_an_extract_error(code: str) -> None:
    with pytest.raises(ExtractError, match="nested too deeply"):
        extract_env_module(fence(code))


def test_many_fences_and_think_tags_stay_cheap() -> None:
    """Pathological but bounded work: no quadratic blow-up on a long reply."""
    reply = ("<think>x</think>\n```\nnot python (\n```\n" * 3000) + fence(GAME)
    assert extract_env_module(reply).class_name == "GuessEnv"


# ---------------------------------------------------------------- f-string repair


def game_with(line: str) -> str:
    return GAME.replace('        return "higher", 0.0', f"        msg = {line}\n        return msg, 0.0")


@pytest.mark.parametrize(
    ("bad", "good"),
    [
        ('f"Answer with \\\\boxed{your guess}"', 'f"Answer with \\\\boxed{{your guess}}"'),
        ('f"Turn {self.turn}: reply with {}"', 'f"Turn {self.turn}: reply with {{}}"'),
        ('f"Send {\\"move\\": \\"up\\"} (turn {self.turn})"', 'f"Send {{\\"move\\": \\"up\\"}} (turn {self.turn})"'),
        ("f'Format: {-} or {a b}'", "f'Format: {{-}} or {{a b}}'"),
        ('f"Set {1, 2} is shown as {x y}"', 'f"Set {1, 2} is shown as {{x y}}"'),
        ('f"close } and {self.turn:>{3}}"', 'f"close }} and {self.turn:>{3}}"'),
        ('rf"\\boxed{an answer} at {self.turn}"', 'rf"\\boxed{{an answer}} at {self.turn}"'),
        ("f'use {self.turn!r} and {self.turn!z}'", "f'use {self.turn!r} and {{self.turn!z}}'"),
        ("f'{self.turn}} left'", "f'{self.turn}}} left'"),
        ("f'{{literal} and {lambda: 1}'", "f'{{literal}} and {{lambda: 1}}'"),
    ],
)
def test_fstring_repair_doubles_only_what_cannot_be_a_field(bad: str, good: str) -> None:
    with pytest.raises(SyntaxError):
        ast.parse(game_with(bad))
    m = extract_env_module(fence(game_with(bad)))
    assert m.code == game_with(good)
    line = game_with(bad).splitlines().index(f"        msg = {bad}") + 1
    assert m.repairs == (f"doubled literal braces in the f-string at line {line}",)


def test_fstring_repair_in_a_triple_quoted_string_and_two_lines() -> None:
    code = game_with('f"""Rules:\nreply as \\\\boxed{your move}\nturn {self.turn}"""') + (
        '\n\ndef legend():\n    return f"Use {row col} pairs"\n')
    m = extract_env_module(fence(code))
    assert "\\\\boxed{{your move}}\nturn {self.turn}" in m.code and "{{row col}}" in m.code
    assert len(m.repairs) == 2


def test_repair_leaves_other_strings_and_dicts_alone() -> None:
    code = 'd = {"a": 1}; s = "{not f}"; t = f"{x y}"\n'
    _, fixed, repairs = parse_with_repair(code)
    assert fixed == 'd = {"a": 1}; s = "{not f}"; t = f"{{x y}}"\n' and len(repairs) == 1


def test_repair_does_not_touch_code_that_parses() -> None:
    code = 'x = f"use \\boxed{answer}"\n'  # a NameError at run time, not a syntax error
    assert parse_with_repair(code)[1:] == (code, ())


def test_non_fstring_syntax_errors_are_not_repaired() -> None:
    code = 'x = f"{a b}"\ny = (1,\n'
    with pytest.raises(SyntaxError) as e:
        parse_with_repair(code)
    assert e.value.lineno == 1  # the original error is what is reported
    with pytest.raises(ExtractError, match="syntax error at line 1"):
        extract_env_module(fence(code))


def test_prefixes_and_comments_are_scanned_correctly() -> None:
    code = (
        "# a comment with f\"{bad one}\" is ignored\n"
        "if True:x = \"plain {a b}\"\n"
        "elif_f = 1\n"
        "y = F'{z w}'\n"
    )
    _, fixed, _ = parse_with_repair(code)
    assert fixed == code.replace("F'{z w}'", "F'{{z w}}'")


# ---------------------------------------------------------------- fuzzing (property based)

_FRAGMENTS = [
    "```python\n", "```\n", "```py\n", "````\n", "```json\n", "<think>", "</think>", "\n",
    "Here is the game:\n", GAME, GAME.replace("GuessEnv", "OtherEnv"), 'x = f"{a b}"\n',
    'y = f"\\\\boxed{your answer}"\n', "def f(:\n", "    return 1\n", "class A:\n    pass\n",
    '"""\n', "{", "}", "\x00", "ENV_CLASS = 'A'\n",
]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=20), max_size=12))
def test_any_reply_gives_a_parsable_module_or_an_extract_error(parts: list[str]) -> None:
    reply = "".join(parts)
    try:
        m = extract_env_module(reply)
    except ExtractError as e:
        assert e.reason
        return
    assert find_env_class(m.code) == m.class_name  # parses, and the class is the contract's


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from([
    'f"', "f'", '"', "'", "{", "}", "{{", "}}", "a b", "x", "\\\\", "\n", "#", ": ", "!r", "(", ")",
    '"""', 'f"""', "rf'", "x = ",
]), max_size=16))
def test_repair_only_inserts_braces(parts: list[str]) -> None:
    code = "".join(parts)
    try:
        tree, fixed, repairs = parse_with_repair(code)
    except SyntaxError:
        return
    assert isinstance(tree, ast.Module)
    if not repairs:
        assert fixed == code
    strip = str.maketrans("", "", "{}")
    assert fixed.translate(strip) == code.translate(strip)
    ast.parse(fixed)


# ---------------------------------------------------------------- what real replies contain


def test_a_byte_order_mark_before_the_reply() -> None:
    assert extract_env_module("\ufeff" + fence(GAME)) == ExtractedModule(GAME, "GuessEnv", ())
    assert extract_env_module("\ufeff" + GAME) == ExtractedModule(GAME, "GuessEnv", ())


def test_a_byte_order_mark_inside_the_code_is_removed_and_recorded() -> None:
    m = extract_env_module(fence("\ufeff" + GAME))
    assert m.code == GAME and m.repairs == ("removed 1 byte-order mark or zero-width character(s)",)


@pytest.mark.parametrize("opening, closing", [("~~~python", "~~~"), ("~~~", "~~~"), ("~~~~py", "~~~~~")])
def test_tilde_fences(opening: str, closing: str) -> None:
    reply = f"The game:\n{opening}\n{GAME}{closing}\nThat is all."
    assert extract_env_module(reply) == ExtractedModule(GAME, "GuessEnv", ())


def test_a_backtick_line_inside_a_tilde_block_is_code() -> None:
    code = GAME.replace('        return "higher", 0.0', '        board = """\n```\n"""\n        return board, 0.0')
    assert extract_env_module(f"~~~python\n{code}~~~\n").code == code


@pytest.mark.parametrize("tail", [" That is the whole module.", "Hope this helps!", "  (end of env.py)"])
def test_text_after_the_closing_fence_on_its_line(tail: str) -> None:
    reply = f"Here:\n```python\n{GAME}```{tail}\nMore prose.\n"
    assert extract_env_module(reply) == ExtractedModule(GAME, "GuessEnv", ())


def test_text_after_the_closing_fence_then_another_block() -> None:
    v2 = GAME.replace("GuessEnv", "GuessEnvV2")
    reply = f"```python\n{GAME}``` and an improved one:\n```python\n{v2}```\n"
    assert extract_env_module(reply).class_name == "GuessEnvV2"


@pytest.mark.parametrize("stray", ["```\n", "```\n\n", "```python\n", "~~~\n"])
def test_a_stray_fence_line_before_the_block(stray: str) -> None:
    reply = f"Here is the game:\n{stray}```python\n{GAME}```\n"
    assert extract_env_module(reply) == ExtractedModule(GAME, "GuessEnv", ())


def test_an_empty_block_before_the_module_is_still_an_empty_block() -> None:
    reply = f"```\n```\nNow the code:\n```python\n{GAME}```\n"
    assert extract_env_module(reply) == ExtractedModule(GAME, "GuessEnv", ())


@pytest.mark.parametrize("info", ["python{cmd=true}", "python {.numberLines}", "{python}", "python:env.py",
                                  "python3{title='env'}", "py]", "{.python .env}"])
def test_junk_after_the_language_of_the_opening_fence(info: str) -> None:
    assert extract_env_module(f"```{info}\n{GAME}```\n") == ExtractedModule(GAME, "GuessEnv", ())


def test_a_python_block_nested_in_a_markdown_block() -> None:
    reply = f"````markdown\nHere is env.py:\n```python\n{GAME}```\n````\n"
    assert extract_env_module(reply) == ExtractedModule(GAME, "GuessEnv", ())


@pytest.mark.parametrize("space", ["\u00a0", "\u202f", "\u3000"])
def test_non_breaking_spaces_in_code(space: str) -> None:
    nbsp = GAME.replace("        self.turn += 1", space * 8 + "self.turn += 1").replace("return \"higher\"", f"return{space}\"higher\"")
    m = extract_env_module(fence(nbsp))
    assert m.code == GAME.replace("        self.turn += 1", "        self.turn += 1")
    assert m.repairs == ("replaced 9 non-breaking or wide space(s) with plain spaces",)
    assert extract_env_module(nbsp).code == GAME  # unfenced too


def test_a_non_breaking_space_inside_a_string_of_valid_code_stays() -> None:
    code = GAME.replace("Guess a number", "Guess\u00a0a number")
    assert extract_env_module(fence(code)) == ExtractedModule(code, "GuessEnv", ())


@pytest.mark.parametrize("prose", [
    "Here is the environment you asked for.\n\n",
    "Sure! The game below draws a target from reset(seed).\nIt gives higher/lower hints:\n",
    "# Guess the number\n\nA classic game, grounded in the document.\n\n",
])
def test_prose_followed_by_unfenced_code(prose: str) -> None:
    assert extract_env_module(prose + GAME) == ExtractedModule(GAME, "GuessEnv", ())


@pytest.mark.parametrize("before", ["", "Here is the game:\n\n"])
def test_prose_after_unfenced_code(before: str) -> None:
    reply = before + GAME + "\nThe agent must find the number.\nGood luck!\n"
    assert extract_env_module(reply) == ExtractedModule(GAME, "GuessEnv", ())


@pytest.mark.parametrize("reply", [
    "Sure! " + GAME,  # the module's first line is glued to the prose: it cannot be cut cleanly
    "Here it is:\n\n" + GAME.replace("    def solution(self):\n", "The solution:\n    def solution(self):\n"),
])
def test_prose_that_cannot_be_cut_cleanly_is_refused(reply: str) -> None:
    with pytest.raises(ExtractError, match="no ```python code block"):
        extract_env_module(reply)


def test_a_reply_that_forgot_its_imports_gets_them_added_and_says_so():
    from spadework.designer.examples import GAMES_EXAMPLE

    dropped = GAMES_EXAMPLE.replace("import random\nfrom gameenv import GameEnv\n", "")
    m = extract_env_module(f"Here it is:\n```python\n{dropped}```\n")
    assert m.code.startswith("from gameenv import GameEnv\n") and m.class_name == "CompoundInterestEnv"
    assert m.repairs == ("added the missing import: from gameenv import GameEnv",)
    uses = "import math\nclass A:\n    def reset(self, seed=None):\n        return str(random.random()), {}\n" \
           "    def step(self, a):\n        return '', 0.0, True, False, {}\n"
    m = extract_env_module(f"```python\n{uses}```")
    assert "import random\n" in m.code and m.repairs == ("added the missing import: import random",)
    whole = extract_env_module(f"```python\n{GAMES_EXAMPLE}```")
    assert whole.repairs == () and whole.code.strip() == GAMES_EXAMPLE.strip()


#: A 1.5B designer's reply (benchmarks/designer_validity.py, held-out slot 3 at temperature
#: 0.2): a sound game whose increment is stored as self.step, GameEnv's own method.
SHADOWING = '''from gameenv import GameEnv


class MonotonicityEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.start = rng.randint(1, 10)
        self.step = rng.randint(1, 9)
        self.answer = self.start
        for _ in range(self.level):
            self.answer += self.step

    def task(self):
        return (f"A sequence starts with {self.start} and each term is obtained by adding {self.step}. "
                f"What is the balance after {self.level} term(s)? Answer with a whole number.")

    def example(self):
        return str(self.start)

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.answer:
            return self.WIN, "That is the balance."
        if int(move) > self.answer:
            return self.CONTINUE, f"{move} is too high."
        return self.CONTINUE, f"{move} is too low."

    def solution(self):
        return self.box(self.answer)
'''


def test_a_value_stored_under_a_method_name_is_renamed() -> None:
    m = extract_env_module(fence(SHADOWING))
    assert "self.step" not in m.code.replace("self.step_value", "")
    assert m.code.count("self.step_value") == 3
    assert m.repairs == ("renamed self.step to self.step_value: the class stored a value under "
                         "its method step() (line 9)",)


def test_unshadowing_keeps_calls_and_leaves_possible_replacements_alone() -> None:
    calls = ("class A(GameEnv):\n    def setup(self, rng):\n        self.judge = rng.random()\n"
             "        self.solution = 4\n"
             "    def task(self):\n        return self.judge(self.solution)  # a call stays\n")
    m = extract_env_module(fence(calls))
    assert "self.judge(self.solution_value)" in m.code and "self.judge_value = rng" in m.code
    assert [r.split(":")[0] for r in m.repairs[:2]] == ["renamed self.judge to self.judge_value",
                                                        "renamed self.solution to self.solution_value"]
    for value in ("lambda a: a", "self.judge", "helper"):
        code = (f"def helper(a):\n    return a\n\nclass B(GameEnv):\n    def setup(self, rng):\n"
                f"        self.step = {value}\n")
        assert "renamed" not in " ".join(extract_env_module(fence(code)).repairs), value
    plain = "class C(GameEnv):\n    def setup(self, rng):\n        self.steps = 3\n"
    assert not any("renamed" in r for r in extract_env_module(fence(plain)).repairs)
    clash = ("class D(GameEnv):\n    def setup(self, rng):\n        self.step = 1\n"
             "        self.step_value = 2\n")
    assert "self.step_value_ = 1" in extract_env_module(fence(clash)).code

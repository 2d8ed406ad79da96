"""The two checker stages that ask whether a small agent can win at all: ``visible`` (the answer
follows from what the agent sees) and ``readable`` (a concrete example move; the format restated
after a malformed and a wrong move), on the probe's own modules
(``../shared/reference/small-agent-probe.md``) and on the designs they were written against."""

from __future__ import annotations

from pathlib import Path

import pytest

from spadework.env.checker import CheckConfig, check, solvable_seeds
from spadework.env.readable import concrete_examples, readable_stage
from spadework.env.visible import canonical_move, visible_stage
from spadework.errors import ContractError
from spadework.sandbox import Limits, Sandbox

PROBE = Path(__file__).resolve().parents[1] / "fixtures" / "envs" / "probe"
CFG = CheckConfig(max_turns=4)
SEEDS = solvable_seeds(0, "ab" * 32, 64)


@pytest.fixture(scope="module")
def sb():
    with Sandbox(Limits()) as box:
        yield box


def opener(sb, code):
    return lambda: sb.load(code, max_turns=CFG.max_turns)


def probe(name: str) -> str:
    return (PROBE / f"{name}.py").read_text()


# -- readable -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["terse_guess", "terse_add"])
def test_the_probes_terse_modules_are_unreadable(sb, name):
    """Both say `Answer as \\boxed{N}`: the 0.5B agent copied the N (0/10 and 1/10 wins)."""
    with pytest.raises(ContractError, match=r"no concrete example move \(only the placeholder \\boxed\{N\}\)"):
        readable_stage(opener(sb, probe(name)), CFG)


def test_the_probes_readable_guess_is_readable(sb):
    summary = readable_stage(opener(sb, probe("readable_guess")), CFG)
    assert "first observation shows \\boxed{2}" in summary and "restates it" in summary


def test_the_probes_readable_sum_needs_the_format_after_a_wrong_answer_too(sb):
    """AddV1 as probed (8/10 wins) shows an example first and in its reminder, but answers a
    wrong sum without the format ('5 is wrong; the answer is higher. What is 8 + 1? Tries
    left: 3.'); the stage asks for the format there too, and one clause more is enough."""
    code = probe("readable_add")
    with pytest.raises(ContractError, match="well-formed move .* does not restate the answer format"):
        readable_stage(opener(sb, code), CFG)
    fixed = code.replace("What is {self.a} + {self.b}? Tries left: {left}.\", 0.0, False, trunc, {}\n    def solution",
                         "What is {self.a} + {self.b}? Reply like \\\\boxed{{5}}. Tries left: {left}.\", 0.0, False, trunc, {}\n    def solution")
    assert fixed != code
    assert "restates it" in readable_stage(opener(sb, fixed), CFG)
    assert check(fixed, sandbox=sb, module=True, config=CFG).ok


def test_concrete_examples_skip_placeholders():
    assert concrete_examples("Answer as \\boxed{N}; e.g. \\boxed{...} or \\boxed{12}") == ["12"]


def test_tool_use_is_not_judged_by_the_games_format(sb):
    assert readable_stage(opener(sb, probe("terse_add")), CFG, "tool-use").startswith("tool use")


# -- visible ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["terse_guess", "readable_guess"])
def test_guess_the_hidden_number_is_rejected(sb, name):
    """The probe's guessing games: every seed opens with the same text, and solution() plays the
    hidden number at once, which no agent could."""
    with pytest.raises(ContractError, match=r"hidden answer: seeds \d+ and \d+ show the agent the same observation"):
        visible_stage(opener(sb, probe(name)), CFG, SEEDS)


BISECTING = '''\
import random
from gameenv import GameEnv


class BisectEnv(GameEnv):
    LEVELS = 1

    def setup(self, rng):
        self.secret = rng.randint(1, 8)

    def task(self):
        return "Find my number from 1 to 8. After each wrong guess I say higher or lower."

    def example(self):
        return "4"

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.secret:
            return self.WIN, "Found it."
        return self.CONTINUE, f"My number is {'higher' if int(move) < self.secret else 'lower'} than {move}."

    def solution(self):
        lo, hi, moves = 1, 8, []
        while True:
            guess = (lo + hi) // 2
            moves.append(self.box(guess))
            if guess == self.secret:
                return moves
            lo, hi = (guess + 1, hi) if guess < self.secret else (lo, guess - 1)
'''


def test_a_bisection_from_the_feedback_is_visible(sb):
    """The same hidden number, found the way an agent could: each guess follows from the
    higher/lower replies so far. It passes the visible stage (with 4 turns for 8 numbers it
    then fails not_trivial: replaying one seed's guesses wins 3 instances in 8)."""
    summary = visible_stage(opener(sb, BISECTING), CFG, SEEDS)
    assert "plays from what the agent sees on 64 seeds (1 distinct first observations)" in summary
    cheating = BISECTING.replace("            guess = (lo + hi) // 2\n", "            guess = self.secret\n")
    with pytest.raises(ContractError, match="as move 1"):
        visible_stage(opener(sb, cheating), CFG, SEEDS)
    assert check(BISECTING, sandbox=sb, module=True, config=CFG).failed_stage == "not_trivial"


HIDDEN_INPUT = '''\
import random
from gameenv import GameEnv


class SeriesEnv(GameEnv):
    LEVELS = 1

    def setup(self, rng):
        self.start = rng.randint(1, 9)
        self.step_size = rng.randint(2, 5)
        self.total = sum(self.start + k * self.step_size for k in range(4))

    def task(self):
        return f"A series starts at {self.start} and grows by the same amount each time. What is the sum of its first 4 terms?"

    def example(self):
        return "10"

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.total:
            return self.WIN, "That is the sum."
        return self.CONTINUE, f"{move} is too {'high' if int(move) > self.total else 'low'}."

    def solution(self):
        return self.box(self.total)
'''


def test_a_task_that_leaves_out_an_input_is_rejected(sb):
    """The shape of the 1.5B designer's accepted MathSeriesEnv: the task names the series but not
    its step, so seeds with the same start need different answers."""
    with pytest.raises(ContractError, match="hidden answer") as e:
        visible_stage(opener(sb, HIDDEN_INPUT), CFG, SEEDS)
    assert "A series starts at" in e.value.reason
    shown = HIDDEN_INPUT.replace("grows by the same amount each time", "grows by {self.step_size} each time")
    assert "distinct first observations" in visible_stage(opener(sb, shown), CFG, SEEDS)


def test_moves_compare_as_the_agent_parser_reads_them():
    assert canonical_move("So my move is \\boxed{ 7 }.") == canonical_move("\\boxed{7}") == "7"

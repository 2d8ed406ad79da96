"""The games kit: GameEnv's rules in this process (it is our own, reviewed code) and in the
sandbox, where generated games import it as ``gameenv``; the static stage's checks of a GameEnv
subclass; and the placeholder rule the readable stage and the kit share."""

from __future__ import annotations

import pytest

from spadework.env.checker import CheckConfig, check
from spadework.env.contract import find_env_class
from spadework.env.gameenv import GameEnv, boxes, extract_boxed, is_placeholder
from spadework.env.static import check_static
from spadework.errors import ContractError, EnvLoadError
from spadework.sandbox import Limits, Sandbox


class SumEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        top = 10 ** self.level - 1
        self.a, self.b = rng.randint(1, top), rng.randint(1, top)

    def task(self):
        return f"What is {self.a} + {self.b}?"

    def example(self):
        return "0"

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.a + self.b:
            return self.WIN, "That is the sum."
        if int(move) > 500:
            return self.LOSE, f"{move} is far too big."
        return self.CONTINUE, f"{move} is not the sum."

    def solution(self):
        return self.box(self.a + self.b)


def test_levels_default_to_one_and_are_checked():
    assert SumEnv().level == 1 and SumEnv(level=3).level == 3
    for bad in (0, 4, "2", True, 1.0):
        with pytest.raises(ValueError, match="level must be a whole number from 1 to LEVELS=3"):
            SumEnv(level=bad)
    with pytest.raises(ValueError, match="max_turns"):
        SumEnv(max_turns=0)
    assert SumEnv(level=2).reset(seed=3)[1]["level"] == 2


def test_a_level_changes_the_instance_not_the_rules():
    small = [SumEnv(level=1) for _ in range(20)]
    large = [SumEnv(level=3) for _ in range(20)]
    for s, (e1, e3) in enumerate(zip(small, large)):
        e1.reset(seed=s)
        e3.reset(seed=s)
    assert max(e.a for e in small) <= 9 and max(e.a for e in large) > 99
    assert "Reply with your move in a box" in small[0].reset(seed=1)[0]
    assert "Reply with your move in a box" in large[0].reset(seed=1)[0]


def test_every_observation_is_readable_alone():
    env = SumEnv(max_turns=3)
    first, info = env.reset(seed=4)
    assert first.startswith(f"What is {env.a} + {env.b}?")
    assert "You have 3 moves left" in first and "for example \\boxed{0}" in first
    assert info == {"turn": 0, "level": 1}
    obs, reward, terminated, truncated, info = env.step("I think it is 7 because 3 and 4 make 7\nso")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert obs.startswith("I could not find a move in a box.")
    assert f"What is {env.a} + {env.b}?" in obs and "2 moves left" in obs and "\\boxed{0}" in obs
    obs, *_ = env.step("so \\boxed{1}")
    assert obs.startswith("You played \\boxed{1}. 1 is not the sum.")
    assert "1 move left" in obs and "Reply with your next move in a box, for example \\boxed{0}" in obs
    obs, reward, terminated, truncated, _ = env.step("\\boxed{x}")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert "x is not a whole number" in obs and "No moves left" in obs
    assert env.step("\\boxed{1}")[1:4] == (0.0, False, True), "a finished game stays finished"


def test_win_and_lose_end_the_game():
    env = SumEnv()
    env.reset(seed=2)
    obs, reward, terminated, truncated, _ = env.step(env.solution())
    assert (reward, terminated, truncated) == (1.0, True, False) and obs.endswith("You win!")
    env.reset(seed=2)
    obs, reward, terminated, truncated, _ = env.step("\\boxed{999}")
    assert (reward, terminated, truncated) == (0.0, True, False) and "You lose" in obs
    assert env.step("\\boxed{1}")[2] is True


def test_a_placeholder_example_or_a_malformed_judge_is_a_clear_error():
    class Placeholder(SumEnv):
        def example(self):
            return "N"

    with pytest.raises(ValueError, match="example\\(\\) returned 'N', a placeholder"):
        Placeholder()

    class BadJudge(SumEnv):
        def judge(self, move):
            return True

    env = BadJudge()
    with pytest.raises(TypeError, match="judge\\(\\) must return \\(outcome, message\\)"):
        env.step("\\boxed{3}")

    class NoTask(GameEnv):
        def setup(self, rng):
            pass

    with pytest.raises(NotImplementedError, match="must define task"):
        NoTask()


def test_the_box_parser_and_placeholders():
    assert extract_boxed("first \\boxed{1} then \\boxed{ {2} }") == "2"
    assert boxes("\\boxed{3 + 4} or \\boxed{undo} \\boxed{") == ["3 + 4", "undo"]
    for p in ("N", "n", "d", "...", "number", "your answer", "<move>", "", "a op b", "x"):
        assert is_placeholder(p), p
    for c in ("7", "3 + 4", "up 2", "B", "undo", "answer 5 light", "weigh 1 2 vs 3 4"):
        assert not is_placeholder(c), c


GAME = '''\
import random
from gameenv import GameEnv


class ParityEnv(GameEnv):
    LEVELS = 2

    def setup(self, rng):
        self.n = rng.randint(10, 10 ** (self.level + 1))

    def task(self):
        return f"Is {self.n} even or odd? Answer even or odd."

    def example(self):
        return "even" if self.n % 2 else "odd"

    def judge(self, move):
        if move not in ("even", "odd"):
            return self.INVALID, f"{move} is neither even nor odd."
        right = "even" if self.n % 2 == 0 else "odd"
        return (self.WIN, "Right.") if move == right else (self.LOSE, "Wrong.")

    def solution(self):
        return self.box("even" if self.n % 2 == 0 else "odd")
'''


def test_static_stage_knows_a_gameenv_subclass():
    info = check_static(GAME)
    assert (info.class_name, info.setting) == ("ParityEnv", "games")
    assert find_env_class(GAME) == "ParityEnv"
    with pytest.raises(ContractError, match="subclasses GameEnv but has no judge\\(\\) method; write judge\\(self, move\\)"):
        check_static(GAME.replace("def judge(self, move)", "def decide(self, move)"))


@pytest.fixture(scope="module")
def sb():
    with Sandbox(Limits()) as box:
        yield box


def test_a_gameenv_game_runs_in_the_sandbox_at_each_level(sb):
    for level in (None, 1, 2):
        with sb.load(GAME, max_turns=3, level=level) as env:
            assert env.levels() == 2
            obs, info = env.reset(seed=5)
            assert info["level"] == (level or 1) and "for example \\boxed{" in obs
            assert env.step(env.solution())[1] == 1.0
    with pytest.raises(EnvLoadError, match="level must be a whole number from 1 to LEVELS=2"):
        sb.load(GAME, max_turns=3, level=3)


def test_the_checker_checks_every_level(sb):
    report = check(GAME, sandbox=sb, module=True, config=CheckConfig(max_turns=3))
    assert report.failed_stage == "not_trivial" and report.levels == 2
    # even/odd is a coin flip: random replies win about half of their episodes at the top level
    assert report.reason.startswith("level 2: trivial:"), report.reason
    rows = {r.stage: r.reason for r in report.results}
    assert rows["load"].startswith("ParityEnv(max_turns=3) levels 1-2 built")
    assert rows["solvable"].startswith("levels 1-2: solution() wins on all 64 seeds")


def test_a_value_stored_under_a_hooks_name_does_not_hide_it_and_level_is_read_only():
    """Two mistakes of the 1.5B designer (6 of 40 benchmark attempts raised "'str' object is
    not callable"): it stored its example as ``self.example = ...`` in setup, and assigned
    ``self.level``. The first now works; the second says what to do."""
    class Stores(SumEnv):
        def setup(self, rng):
            super().setup(rng)
            self.example = "9"  # shadows the method on the instance

    obs, _ = Stores().reset(seed=1)
    assert "for example \\boxed{0}" in obs  # the method still answers

    class Overwrites(SumEnv):
        def setup(self, rng):
            super().setup(rng)
            self.level = "hard"

    with pytest.raises(AttributeError, match="self.level is the level the game was built at"):
        Overwrites()


def test_a_reply_that_is_only_a_move_is_played_and_the_box_recalled():
    env = SumEnv(max_turns=4)
    env.reset(seed=4)
    obs, reward, terminated, _, _ = env.step(f" {env.a + env.b}. ")
    assert (reward, terminated) == (1.0, True)
    assert obs.startswith(f"You played \\boxed{{{env.a + env.b}}}. That is the sum.")
    assert "Next time write your move in a box" in obs
    env.reset(seed=4)
    assert env.step("7 please")[0].startswith("You played \\boxed{7 please}. 7 please is not a whole number.")
    long = "Let me think step by step about the two numbers. " * 6
    obs = env.step(long)[0]
    assert obs.startswith("I could not find a move in a box. Your reply ran out before the move")
    assert env.step("so the answer is \\boxed{")[0].startswith("I could not find a move in a box.")


def test_bare_moves_can_be_turned_off():
    class Strict(SumEnv):
        BARE_MOVES = False

    env = Strict(max_turns=3)
    env.reset(seed=4)
    obs, reward, *_ = env.step(str(env.a + env.b))
    assert reward == 0.0 and obs.startswith("I could not find a move in a box.")


ANSWER_GAME = '''\
from gameenv import GameEnv


class BoxesEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.boxes = [rng.randint(2, 9) for _ in range(self.level + 1)]
        self.each = rng.randint(3, 12)
        self.answer = sum(self.boxes) * self.each

    def task(self):
        counts = ", ".join(str(b) for b in self.boxes)
        return (f"Shelves hold {counts} boxes, and every box holds {self.each} pens. "
                f"How many pens are there? Answer with a whole number.")
'''


class WordEnv(GameEnv):
    def setup(self, rng):
        self.answer = "Paris"

    def task(self):
        return "Which capital is on the Seine? Choose Paris or Rome."


def test_a_game_with_one_answer_gets_example_judge_and_solution_from_the_base_class(sb):
    game = type("Sum", (GameEnv,), {"setup": lambda self, rng: setattr(self, "answer", 17),
                                     "task": lambda self: "What is 17 - 0 + 3 - 3?"})(max_turns=3)
    assert game.example() == "0"  # the first number of the task that is not the answer
    assert game.solution() == "\\boxed{17}"
    assert game.judge("20") == (game.CONTINUE, "20 is too high.")
    assert game.judge("1,000")[1] == "1,000 is too high."
    assert game.judge("-3")[1] == "-3 is too low."
    assert game.judge("seventeen") == (game.INVALID, "seventeen is not a whole number.")
    assert game.judge("17.") == (game.WIN, "That is right.")
    word = WordEnv(max_turns=2)
    assert word.judge(' "paris." ')[0] == word.WIN
    assert word.judge("Rome") == (word.CONTINUE, "Rome is not the answer.")
    assert word.example() == "capital" and word.solution() == "\\boxed{Paris}"
    yes_no = type("YesNo", (GameEnv,), {"setup": lambda self, rng: setattr(self, "answer", False),
                                         "task": lambda self: "Is 7 even? Answer yes or no."})(2)
    assert yes_no.solution() == "\\boxed{no}" and yes_no.judge("No")[0] == yes_no.WIN
    # the whole game through the checker, in the sandbox: every stage passes
    assert check_static(ANSWER_GAME).class_name == "BoxesEnv"
    report = check(ANSWER_GAME, sandbox=sb, module=True, config=CheckConfig(max_turns=4))
    assert report.ok, report.reason
    with sb.load(ANSWER_GAME, max_turns=4, level=2) as env:
        obs, _ = env.reset(seed=3)
        assert "for example \\boxed{" in obs
        assert "too high" in env.step("\\boxed{100000}")[0]
        assert env.step(env.solution())[1] == 1.0


def test_a_game_without_its_answer_or_hooks_is_told_what_to_write(sb):
    with pytest.raises(ContractError, match="no example\\(\\) method; write example\\(self\\) "
                                            "\\(GameEnv calls it\\); or set self.answer in setup"):
        check_static(ANSWER_GAME.replace("self.answer = ", "self.total = "))
    with pytest.raises(ContractError,
                       match="no task\\(\\) method; write task\\(self\\) \\(GameEnv calls it\\)$"):
        check_static(ANSWER_GAME.replace("def task(self)", "def text(self)"))
    blank = type("Blank", (GameEnv,), {"setup": lambda self, rng: setattr(self, "answer", None),
                                       "task": lambda self: "Guess."})
    with pytest.raises(NotImplementedError, match="Blank must set self.answer in setup\\(\\) .* "
                                                  "or define example\\(self\\) itself; "
                                                  "self.answer is None"):
        blank(max_turns=2)

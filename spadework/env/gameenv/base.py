"""The games base class: a subclass writes what is particular to its game (the instance for a
seed and a level, the task text, an example move, how a move is judged, the solution) and
:class:`GameEnv` turns it into the environment contract. Standard library only.

What the base class does on every path, so that a designed game cannot get it wrong:

- ``__init__(max_turns=10, level=1, **kwargs)`` checks both and builds the seed-0 instance;
- ``reset(seed)`` draws everything from ``random.Random(seed)`` (passed to ``setup``), resets
  the turn count and returns ``(observation, info)``;
- ``step(action)`` counts the turn, parses the last ``\\boxed{...}`` (or a reply that is only a
  short move, ``BARE_MOVES``), asks ``judge`` about it,
  truncates at ``max_turns`` and always returns the 5-tuple with a float reward;
- every observation can be read alone by a small model: the first states the task, the moves
  allowed and a concrete example move; every later one restates the last move, what was wrong
  with it, the task's current state, the moves left and the answer format with the example
  (``../shared/reference/small-agent-probe.md``: the same 0.5B agent wins a one-digit sum 8 in
  10 written so, 1 in 10 written tersely).

The example move must be concrete (``\\boxed{12}``, not ``\\boxed{N}``): a placeholder is
refused when the episode starts, because small models copy it as their move.

A game with one answer writes less: ``setup`` stores it as ``self.answer`` (a whole number, a
number, a word, or True or False for yes or no) and the base class supplies ``example``,
``judge`` and ``solution`` (a number from the task that is not the answer; "too high" or "too
low" for a wrong number; the answer boxed). A game with different moves writes the three
itself. Why: two of the 16 modules a frozen 1.5B designer wrote in a run of the main job were
rejected because their own ``judge`` refused their own ``solution``, and the examples it copies
had exactly these three methods (docs/results.md, "Games with one answer").
"""

from __future__ import annotations

import random
import re

from .boxes import box, extract_boxed, is_placeholder

WIN, LOSE, CONTINUE, INVALID = "win", "lose", "continue", "invalid"
OUTCOMES = (WIN, LOSE, CONTINUE, INVALID)


def bare_move(reply):
    """A reply that is nothing but a short move, read as that move: one line of at most 40
    characters without braces or backslashes, a final period dropped (a small model often
    writes ``encode abc`` or ``test 2`` without the box). None for anything longer.

    >>> bare_move("encode abc."), bare_move("  1 3 "), bare_move("First I add 3 and 4, then I double it to get 14"), bare_move("x\\ny")
    ('encode abc', '1 3', None, None)
    """
    text = reply.strip()
    if not text or len(text) > 40 or "\n" in text or any(c in text for c in "{}\\"):
        return None
    return text[:-1].rstrip() if text.endswith(".") else text


def _bare_text(text):
    """``text`` as two moves are compared: case and runs of spaces ignored, a final period and
    surrounding quotes dropped.

    >>> _bare_text('  "Paris." '), _bare_text("New   York")
    ('paris', 'new york')
    """
    text = " ".join(str(text).split()).strip("\"' ").rstrip(".").strip("\"' ")
    return text.casefold()


def _number(text, whole):
    """The number ``text`` writes (an int when ``whole``: ``"-12"``, ``"1,200"``; else a float
    too: ``"2.5"``), or None.

    >>> _number("1,200", True), _number("-3.", True), _number("2.5", True)
    (1200, -3, None)
    >>> _number("2.5", False), _number("3 + 4", False)
    (2.5, None)
    """
    text = text.strip().rstrip(".").strip()
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+", text):
        text = text.replace(",", "")
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if not whole and re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)", text):
        return float(text)
    return None


class GameEnv:
    """Subclass it and write (``self.level`` is 1..LEVELS, ``self.turn`` the moves made so far):

    - ``LEVELS = 3``: how many difficulty levels (default 1). A level changes the instance (a
      smaller range, fewer digits, a smaller board), never the rules or the move format.
    - ``setup(self, rng)``: build the instance for ``self.level``, drawing every random choice
      from ``rng`` (a ``random.Random(seed)``).
    - ``task(self) -> str``: the task and its current state in words, with the moves allowed.
      It is shown at the start and after every move, so it always describes the present.
    - ``example(self) -> str``: a concrete, well-formed move (what goes inside the box, e.g.
      ``"7"`` or ``"3 + 4"``) that is not the answer.
    - ``judge(self, move) -> (outcome, message)``: ``move`` is the text inside the agent's box;
      outcome is ``"win"``, ``"lose"`` (the game is lost for good), ``"continue"`` (a legal move
      that did not win; update the state) or ``"invalid"`` (not a legal move); ``message`` says
      what happened, e.g. ``"14 is too high."``.
    - ``solution(self)``: the winning reply or list of replies from the reset state, written
      with ``self.box(...)``; each move may only use what the agent has been shown so far.
    - optionally ``hint(self) -> str``.

    Or, for a game with one answer, store it in ``setup`` as ``self.answer`` (a whole number, a
    number, a word, or True or False for yes or no) and leave ``example``, ``judge`` and
    ``solution`` to the base class.
    """

    LEVELS = 1
    BARE_MOVES = True
    """Read a reply that is only a short move, with no box, as that move (:func:`bare_move`),
    and remind the agent of the box. False: such a reply is not a move."""
    WIN, LOSE, CONTINUE, INVALID = WIN, LOSE, CONTINUE, INVALID

    def __init__(self, max_turns=10, level=1, **kwargs):
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be a whole number >= 1, got {max_turns!r}")
        levels = type(self).LEVELS
        if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
            raise ValueError(f"LEVELS must be a whole number >= 1, got {levels!r}")
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= levels:
            raise ValueError(f"level must be a whole number from 1 to LEVELS={levels}, got {level!r}")
        self.max_turns = max_turns
        self._level = level
        self.reset()

    @property
    def level(self):
        """The level this instance was built at (1 to LEVELS); read-only: a game that assigned
        it (``self.level = ...`` in setup) would silently change its own difficulty."""
        return self._level

    @level.setter
    def level(self, value):
        raise AttributeError(f"self.level is the level the game was built at ({self._level}); "
                             "store your own values under another name")

    # -- what a subclass writes -----------------------------------------------------------------

    def setup(self, rng):
        raise NotImplementedError(f"{type(self).__name__} must define setup(self, rng)")

    def task(self):
        raise NotImplementedError(f"{type(self).__name__} must define task(self) -> str")

    def example(self):
        """A move that is not the answer: the first number in the task that differs from it (0
        or 1 when there is none); for yes the other of yes and no; for another word the task's
        longest other word that is not a placeholder."""
        answer = self._the_answer("example")
        text = self._text("task")
        if self._numeric(answer):
            for found in re.findall(r"-?\d+", text):
                if int(found) != answer:
                    return found
            return "1" if answer == 0 else "0"
        other = {"yes": "no", "no": "yes"}.get(_bare_text(answer))
        words = [w for w in re.findall(r"[A-Za-z]+", text)
                 if _bare_text(w) != _bare_text(answer) and not is_placeholder(w)]
        return other or (max(words, key=len) if words else "yes")

    def judge(self, move):
        """Wins on ``self.answer``; a wrong number is told "too high" or "too low", a wrong word
        that it is not the answer."""
        answer = self._the_answer("judge")
        if self._numeric(answer):
            whole = isinstance(answer, int)
            number = _number(move, whole)
            if number is None:
                return INVALID, f"{move} is not a {'whole ' if whole else ''}number."
            if number == answer or (not whole and abs(number - answer) < 0.005):
                return WIN, "That is right."
            return CONTINUE, f"{move} is too {'high' if number > answer else 'low'}."
        if _bare_text(move) == _bare_text(answer):
            return WIN, "That is right."
        return CONTINUE, f"{move} is not the answer."

    def solution(self):
        """``self.answer`` in a box."""
        return box(self._the_answer("solution"))

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def box(move):
        """``move`` as the agent writes it: ``self.box(12)`` is ``\\boxed{12}``."""
        return box(move)

    @property
    def moves_left(self):
        return max(0, self.max_turns - self.turn)

    def info(self):
        """The info dict of every result (override to add to it; the agent never sees it)."""
        return {"turn": self.turn, "level": self.level}

    # -- the contract ---------------------------------------------------------------------------

    def reset(self, seed=None):
        self.turn = 0
        self.done = self.won = self.truncated = False
        type(self).setup(self, random.Random(0 if seed is None else seed))
        return (f"{self._text('task')}\n{self._how(first=True)}", self.info())

    def step(self, action):
        if self.done:
            return ("The game is over.", 0.0, not self.truncated, self.truncated, self.info())
        self.turn += 1
        reply = action if isinstance(action, str) else str(action)
        move, bare = extract_boxed(reply), None
        if (move is None or move == "") and type(self).BARE_MOVES:
            move = bare = bare_move(reply)
        if move is None or move == "":
            outcome, message = INVALID, "I could not find a move in a box."
            if len(" ".join(reply.split())) > 200:
                message += " Your reply ran out before the move: write one short sentence, then the move in a box."
        else:
            outcome, message = self._judge(move)
            message = f"You played {box(move)}. {message}".rstrip()
            if bare is not None:
                message += f" (Next time write your move in a box: {box(move)}.)"
        if outcome == WIN:
            self.done = self.won = True
            return (f"{message} You win!", 1.0, True, False, self.info())
        if outcome == LOSE:
            self.done = True
            return (f"{message} You lose; the game is over.", 0.0, True, False, self.info())
        if self.turn >= self.max_turns:
            self.done = self.truncated = True
            return (f"{message} No moves left; the game is over.", 0.0, False, True, self.info())
        return (f"{message}\n{self._text('task')}\n{self._how(first=False)}", 0.0, False, False,
                self.info())

    # -- internals ------------------------------------------------------------------------------

    @staticmethod
    def _numeric(answer):
        return isinstance(answer, (int, float)) and not isinstance(answer, bool)

    def _the_answer(self, hook):
        answer = getattr(self, "answer", None)
        if callable(answer):  # written as a method
            answer = answer()
        if isinstance(answer, bool):  # a yes-or-no question
            answer = "yes" if answer else "no"
        if isinstance(answer, float) and answer.is_integer():
            answer = int(answer)
        if answer is None or not (
                self._numeric(answer) or (isinstance(answer, str) and answer.strip())):
            raise NotImplementedError(
                f"{type(self).__name__} must set self.answer in setup() (a whole number or a "
                f"word), or define {hook}(self) itself; self.answer is {answer!r}")
        return answer

    def _text(self, name):
        # through the class: a value the game stored under the same name (self.example = "7"
        # in setup) must not hide its method
        value = getattr(type(self), name)(self)
        if not isinstance(value, str) or not value.strip():
            raise TypeError(f"{name}() must return a non-empty str, got {value!r}")
        return value.strip()

    def _how(self, first):
        example = self._text("example")
        inner = extract_boxed(example) if "\\boxed" in example else example
        if inner is None or is_placeholder(inner):
            raise ValueError(f"example() returned {example!r}, a placeholder; return a concrete "
                             "move the agent could play, such as '7' or '3 + 4'")
        left = self.max_turns - self.turn
        moves = f"{left} move{'s' if left != 1 else ''} left"
        if first:
            return f"You have {moves}. Reply with your move in a box, for example {box(inner)}."
        return f"You have {moves}. Reply with your next move in a box, for example {box(inner)}."

    def _judge(self, move):
        verdict = type(self).judge(self, move)
        if not (isinstance(verdict, (tuple, list)) and len(verdict) == 2
                and verdict[0] in OUTCOMES and isinstance(verdict[1], str)):
            raise TypeError(f"judge() must return (outcome, message) with outcome one of "
                            f"{', '.join(OUTCOMES)} and message a str, got {verdict!r}")
        return verdict[0], verdict[1].strip()

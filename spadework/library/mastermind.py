"""Mastermind: deduce a hidden code of colours from peg feedback.

A secret code of colours (repeats allowed) is drawn at reset from a few colours named in the task.
Each guess is answered with two counts: colours that are right and in the right place, and
colours that are right but in the wrong place. The task shows every guess so far with its counts,
so the game is pure deduction: keep only the codes that agree with everything seen.

Levels (a bigger instance of the same rules at each; the colours are drawn per seed from a
palette of sixteen, so no fixed reply wins across seeds):

1. a code of 2 different colours from 2, and one guess has been made: the code's colours the
   wrong way round, which the task points out (one guess; the example is that guess again, so
   copying it costs a turn only);
2. 2 colours from 3: at most 3 guesses;
3. 3 colours from 4: at most 4 guesses;
4. 4 colours from 6 (the classic game): at most 6 guesses with the strategy of ``solution()``.

Under a tighter ``max_turns`` the game plays the largest level whose guesses fit (level 1 needs
1 turn, level 2 needs 3, level 3 needs 4, level 4 needs 6). The example move shown is a random guess other
than the code.

Action: ``\\boxed{red blue}``, the code's colours in order separated by spaces. Reward 1.0 when
the guess equals the code; truncated after max_turns replies. ``solution()`` guesses as an agent
could: the first guess is fixed, every later one is the guess whose worst feedback leaves the
fewest codes that agree with all the feedback so far (chosen among those codes at level 4, among
all codes below it, a possible code first on ties).
"""

import itertools
import re
from gameenv import GameEnv

ENV_CLASS = "MastermindEnv"
SETTING = "games"
SKILL = "logical deduction"

PALETTE = ("red", "blue", "green", "yellow", "white", "black", "pink", "orange", "purple",
           "brown", "grey", "gold", "silver", "navy", "teal", "lime")
# level -> (code length, colours, guesses the solution needs at most)
SIZES = {1: (2, 2, 1), 2: (2, 3, 3), 3: (3, 4, 4), 4: (4, 6, 6)}
# the first guess of each size, as colour indices; the others are chosen from the feedback
OPENERS = {(2, 2): (0, 1), (2, 3): (0, 1), (3, 4): (0, 0, 1), (4, 6): (0, 0, 1, 1)}
# (length, colours, codes still possible) -> next guess; the same for every seed, kept per process
_PLANS = {}


def score(code, guess):
    """(exact, partial) peg counts of a guess against a code."""
    exact = sum(c == g for c, g in zip(code, guess))
    common = sum(min(code.count(d), guess.count(d)) for d in set(guess))
    return exact, common - exact


class MastermindEnv(GameEnv):
    """Mastermind over a few named colours with the full feedback history shown."""

    LEVELS = 4

    def setup(self, rng):
        self.size = max([1] + [k for k in range(1, self.level + 1) if SIZES[k][2] <= self.max_turns])
        self.length, count, _ = SIZES[self.size]
        picked = set(rng.sample(range(len(PALETTE)), count))
        self.colours = [c for i, c in enumerate(PALETTE) if i in picked]
        self.history = []  # (guess as colour indices, (exact, partial))
        if self.size == 1:  # two different colours; the guess made has them the wrong way round
            self.code = tuple(rng.sample(range(count), 2))
            self.shown = self.code[::-1]  # the example: that guess again (it cannot win)
            self.history.append((self.shown, score(self.code, self.shown)))
            return
        self.code = tuple(rng.randrange(count) for _ in range(self.length))
        others = [g for g in itertools.product(range(count), repeat=self.length) if g != self.code]
        self.shown = rng.choice(others)  # the example move: any guess but the code

    def _say(self, guess):
        return " ".join(self.colours[i] for i in guess)

    # -- what the agent sees ----------------------------------------------------------------------

    def task(self):
        if self.size == 1:
            return self._task_one()
        names = ", ".join(self.colours[:-1]) + f" or {self.colours[-1]}"
        lines = [
            f"Find the secret code: {self.length} colours in a row, each one of {names} "
            "(a colour may appear more than once).",
            f"Guess by writing {self.length} colours separated by spaces. After each guess I say "
            "how many colours are right and in the right place, and how many are right but in "
            "the wrong place.",
        ]
        if self.history:
            lines.append("Your guesses so far:")
            lines += [f"  {self._say(g)}: {self._counts(e, p)}" for g, (e, p) in self.history]
        else:
            lines.append("No guesses yet.")
        return "\n".join(lines)

    def _task_one(self):
        """Level 1: a guess with both colours in the wrong place is shown; swap them."""
        first = self._say(self.history[0][0])
        lines = [f"Find the secret code: 2 different colours in a row, {self.colours[0]} and "
                 f"{self.colours[1]} in some order.", "Your guesses so far:"]
        lines += [f"  {self._say(g)}: {self._counts(e, p)}" for g, (e, p) in self.history]
        lines += [f"Both colours of {first} are in the wrong place, so the code has them the "
                  "other way round. What is the code?",
                  "Guess by writing 2 colours separated by spaces."]
        return "\n".join(lines)

    @staticmethod
    def _counts(exact, partial):
        return (f"{exact} in the right place, {partial} right colour{'' if partial == 1 else 's'} "
                "in the wrong place")

    def example(self):
        return self._say(self.shown)

    def _parse(self, move):
        words = re.findall(r"[a-z]+", move.lower())
        if re.search(r"[^a-zA-Z\s,]", move) or len(words) != self.length:
            return None
        if any(w not in self.colours for w in words):
            return None
        return tuple(self.colours.index(w) for w in words)

    def judge(self, move):
        guess = self._parse(move)
        if guess is None:
            return self.INVALID, (f"A guess is {self.length} colours from the list, separated by "
                                  f"spaces, such as {self._say(self.shown)}.")
        exact, partial = score(self.code, guess)
        self.history.append((guess, (exact, partial)))
        if exact == self.length:
            return self.WIN, f"{self._say(guess)} is the code."
        return self.CONTINUE, f"{self._counts(exact, partial)}."

    def hint(self):
        pos = sum(self.code) % self.length
        return (f"Position {pos + 1} of the code is {self.colours[self.code[pos]]}. Each guess "
                "should agree with the feedback to every earlier guess.")

    def info(self):
        return {"turn": self.turn, "level": self.level, "length": self.length,
                "colours": len(self.colours), "guesses": len(self.history)}

    # -- the solution: each guess chosen from the feedback so far ---------------------------------

    def solution(self):
        moves = []
        codes = list(itertools.product(range(len(self.colours)), repeat=self.length))
        possible = tuple(c for c in codes if all(score(c, g) == s for g, s in self.history))
        while True:
            if not self.history and not moves:
                guess = OPENERS[(self.length, len(self.colours))]
            elif len(possible) == 1:
                guess = possible[0]
            else:
                guess = self._next(possible, codes)
            moves.append(self.box(self._say(guess)))
            feedback = score(self.code, guess)  # what the agent would be told
            if feedback[0] == self.length:
                return moves
            possible = tuple(c for c in possible if score(c, guess) == feedback)

    def _next(self, possible, codes):
        """The guess whose worst feedback leaves the fewest codes: among the possible codes for
        the classic size (fast enough there), among all codes for the smaller ones."""
        key = (self.length, len(self.colours), possible)
        if key not in _PLANS:
            pool = possible if self.length >= 4 else codes
            inside = set(possible)
            best = None
            for guess in pool:
                parts = {}
                for code in possible:
                    s = score(code, guess)
                    parts[s] = parts.get(s, 0) + 1
                rank = (max(parts.values()), guess not in inside, guess)
                if best is None or rank < best:
                    best = rank
            _PLANS[key] = best[2]
        return _PLANS[key]

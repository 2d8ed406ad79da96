"""Mastermind: deduce a hidden code from peg feedback.

A secret code of four digits, each from 1 to 6 (repeats allowed), is drawn at reset. Each guess
is answered with two counts: digits that are right and in the right place, and digits that are
right but in the wrong place. The full history of guesses and feedback is shown every turn, so
the task is pure deduction: keep only the codes consistent with everything seen so far.

Action: ``\\boxed{D D D D}``. Reward 1.0 when the guess equals the code; truncated after
max_turns replies (a random guesser wins about 1 time in 130). ``reset(seed=None)`` plays seed 0.
"""

import random
import re

ENV_CLASS = "MastermindEnv"
SETTING = "games"
SKILL = "logical deduction"

LENGTH = 4
DIGITS = 6


def _boxed(text):
    """The content of the last \\boxed{...} in text, braces balanced; None when there is none."""
    if not isinstance(text, str):
        return None
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None


def score(code, guess):
    """(exact, partial) peg counts of a guess against a code."""
    exact = sum(c == g for c, g in zip(code, guess))
    common = sum(min(code.count(d), guess.count(d)) for d in set(guess))
    return exact, common - exact


class MastermindEnv:
    """Four-digit Mastermind over digits 1-6 with full feedback history."""

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self.code = [rng.randint(1, DIGITS) for _ in range(LENGTH)]
        self.history = []
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("A new secret code has been drawn."), {"length": LENGTH, "digits": DIGITS}

    def _render(self, lead):
        lines = [lead, f"Find the secret code: {LENGTH} digits, each from 1 to {DIGITS}, repeats allowed."]
        if self.history:
            lines.append("Your guesses so far (right place / right digit, wrong place):")
            for guess, (exact, partial) in self.history:
                lines.append(f"  {' '.join(map(str, guess))}  ->  {exact} / {partial}")
        lines.append(f"Reply with \\boxed{{D D D D}}, {LENGTH} digits from 1 to {DIGITS} separated by spaces.")
        lines.append(f"Turns left: {self.max_turns - self.turn}.")
        return "\n".join(lines)

    def _parse(self, text):
        if text is None:
            return None
        digits = re.findall(r"\d", text)
        if len(digits) != LENGTH or re.search(r"[^\d\s,]", text):
            return None
        guess = [int(d) for d in digits]
        return guess if all(1 <= d <= DIGITS for d in guess) else None

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        info = {"turn": self.turn, "guesses": len(self.history)}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        guess = self._parse(_boxed(action))
        if guess is None:
            lead = f"That is not a valid guess: give exactly {LENGTH} digits from 1 to {DIGITS}."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        exact, partial = score(self.code, guess)
        self.history.append((guess, (exact, partial)))
        if exact == LENGTH:
            return self._finish(f"{' '.join(map(str, guess))} is the code. You win!", 1.0, True, False)
        lead = f"{exact} digit(s) in the right place, {partial} right digit(s) in the wrong place."
        if out_of_turns:
            lead += " You are out of turns."
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """The code itself, guessed directly (computed from the hidden state)."""
        return "\\boxed{" + " ".join(map(str, self.code)) + "}"

    def hint(self):
        pos = sum(self.code) % LENGTH
        return (f"Position {pos + 1} holds the digit {self.code[pos]}. Use your guesses to rule out "
                "whole groups of codes at once rather than one code at a time.")

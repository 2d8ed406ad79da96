"""Sequence continuation: find the rule and extend the sequence three terms.

Seven terms of an integer sequence are shown. The hidden rule comes from one of several families
(constant steps, repeating cycles of steps, growing steps, ratios, two-term recurrences, two
interleaved sequences, alternating operations), with random parameters. You predict the next term;
a right prediction is revealed and you go on to the one after, a wrong one is answered "too high"
or "too low". Three right predictions win (as many as max_turns allows, when that is fewer).

Action: ``\\boxed{N}``, an integer. Reward 1.0 after the third right prediction; truncated after
max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import random
import re

ENV_CLASS = "SequenceEnv"
SETTING = "games"
SKILL = "pattern recognition"

SHOWN, TO_PREDICT = 7, 3  # fewer predictions when max_turns is below 3


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


def _steps(rng, n, step_of):
    """x0 plus cumulative steps: x_{i+1} = x_i + step_of(i)."""
    x = [rng.randint(-20, 30)]
    for i in range(n - 1):
        x.append(x[-1] + step_of(i))
    return x, "each term adds a step; the steps follow their own rule"


def make_sequence(rng, n):
    """(terms, description of the rule) for a random family with random parameters."""
    family = rng.randrange(7)
    if family == 0:
        d = rng.choice([-1, 1]) * rng.randint(3, 17)
        return _steps(rng, n, lambda i: d)[0], "the same step is added each time"
    if family == 1:
        cycle = [rng.randint(-6, 12) for _ in range(3)]
        while sum(cycle) < 4 or len(set(cycle)) < 2:
            cycle = [rng.randint(-6, 12) for _ in range(3)]
        return _steps(rng, n, lambda i: cycle[i % 3])[0], "the steps repeat in a cycle of three"
    if family == 2:
        a, b = rng.randint(1, 4), rng.randint(-5, 8)
        return _steps(rng, n, lambda i: a * i + b)[0], "the steps themselves grow by a constant"
    if family == 3:
        r, a = rng.choice([2, 3, -2]), rng.randint(1, 6)
        c = rng.randint(-5, 5)
        return [a * r ** i + c for i in range(n)], "each term minus a constant is a fixed multiple of the previous one"
    if family == 4:
        x = [rng.randint(1, 9), rng.randint(1, 9)]
        p = rng.choice([1, 1, 2])
        while len(x) < n:
            x.append(x[-1] + p * x[-2])
        return x, "each term is built from the two terms before it"
    if family == 5:
        a, b = rng.randint(-10, 20), rng.randint(30, 60)
        da, db = rng.randint(2, 9), -rng.randint(2, 9)
        return [a + da * (i // 2) if i % 2 == 0 else b + db * (i // 2) for i in range(n)], \
            "two sequences are interleaved, odd and even positions"
    m, k = rng.randint(2, 3), rng.randint(1, 9)
    x = [rng.randint(1, 6)]
    while len(x) < n:
        x.append(x[-1] * m if len(x) % 2 else x[-1] + k)
    return x, "two operations alternate"


class SequenceEnv:
    """Predict three more terms of an integer sequence, one at a time."""

    def __init__(self, max_turns=8, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self.to_predict = max(1, min(TO_PREDICT, self.max_turns))
        while True:
            terms, rule = make_sequence(rng, SHOWN + self.to_predict)
            hidden = terms[SHOWN:]
            shown_text = {str(abs(t)) for t in terms[:SHOWN]}
            # no hidden term may be readable in the shown ones (17 inside -17 counts)
            if len(set(terms)) >= SHOWN and not {str(abs(t)) for t in hidden} & shown_text:
                break
        self.terms, self.rule = terms, rule
        self.known = SHOWN
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("Here is the start of a sequence."), {"shown": SHOWN}

    def _render(self, lead):
        seq = ", ".join(map(str, self.terms[:self.known]))
        needed = SHOWN + self.to_predict - self.known
        return (
            f"{lead}\nSequence: {seq}, ?\n"
            f"Predict term number {self.known + 1}. Right predictions still needed: {needed}.\n"
            "Reply with \\boxed{N}, a single integer.\n"
            f"Turns left: {self.max_turns - self.turn}."
        )

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        info = {"turn": self.turn, "known": self.known}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        move = _boxed(action)
        if move is None or not re.fullmatch(r"[-+]?\d{1,12}", move.replace(" ", "")):
            lead = "I could not read a number. Reply with a single integer, e.g. \\boxed{N}."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        guess, truth = int(move.replace(" ", "")), self.terms[self.known]
        if guess != truth:
            lead = f"{guess} is too {'high' if guess > truth else 'low'} for term {self.known + 1}."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        self.known += 1
        if self.known == SHOWN + self.to_predict:
            return self._finish(f"{guess} is right. You have extended the sequence. You win!", 1.0, True, False)
        return self._finish(self._render(f"{guess} is right."), 0.0, False, out_of_turns)

    def solution(self):
        """The remaining hidden terms, in order (computed by the rule at reset)."""
        return [f"\\boxed{{{t}}}" for t in self.terms[self.known:]]

    def hint(self):
        return f"The rule: {self.rule}. Compare consecutive differences before guessing."

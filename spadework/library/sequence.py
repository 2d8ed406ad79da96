"""Sequence continuation: find the rule and extend the sequence.

The start of an integer sequence is shown. You predict the next term; a right prediction is
revealed and you go on to the one after, a wrong one is answered "too high" or "too low". Enough
right predictions win (never more than max_turns allows).

Levels (the same rules and moves, longer sequences with harder rules):

1. five terms of a sequence that adds the same small step (2 to 5) each time, and the task
   states the step ("each number is 3 more than the one before"); predict one term;
2. five terms of a sequence that adds the same small step (2 to 6) each time, and the task says
   so without giving the step: it is read off two neighbours; predict one term (the rung
   between the stated step and an unstated rule);
3. six terms; the rule adds a constant step (it may be negative), repeats a cycle of three steps
   or has steps that grow by a constant; predict two terms;
4. seven terms; the rule comes from seven families (the three above, ratios, two-term
   recurrences, two interleaved sequences, alternating operations); predict three terms (the
   original game).

Every deal is redrawn until the terms shown decide the rule: :func:`predict`, a fixed list of
rules tried in order against the visible terms, gives every hidden term from the terms before
it, so ``solution()`` plays it from what the agent sees. No hidden term is printed in the first
observation (17 inside -17 counts).

Action: ``\\boxed{N}``, an integer (for instance ``\\boxed{12}``). Reward 1.0 after the last right
prediction; truncated after max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import re

from gameenv import GameEnv

ENV_CLASS = "SequenceEnv"
SETTING = "games"
SKILL = "pattern recognition"

#: Level: (terms shown, terms to predict, rule families drawn from).
LEVEL_SPECS = {1: (5, 1, (7,)), 2: (5, 1, (8,)), 3: (6, 2, (0, 1, 2)),
               4: (7, 3, (0, 1, 2, 3, 4, 5, 6))}
_NUMBER = re.compile(r"[-+]?\d{1,12}")


def _steps(rng, n, step_of):
    """x0 plus cumulative steps: x_{i+1} = x_i + step_of(i)."""
    x = [rng.randint(-20, 30)]
    for i in range(n - 1):
        x.append(x[-1] + step_of(i))
    return x


def make_sequence(rng, n, family):
    """(terms, description of the rule) for one family with random parameters."""
    if family == 7:  # level 1: a small constant step
        d, x0 = rng.randint(2, 5), rng.randint(1, 9)
        return [x0 + d * i for i in range(n)], "the same step is added each time"
    if family == 8:  # level 2: a small constant step, not stated
        d, x0 = rng.randint(2, 6), rng.randint(1, 15)
        return [x0 + d * i for i in range(n)], "the same step is added each time"
    if family == 0:
        d = rng.choice([-1, 1]) * rng.randint(3, 17)
        return _steps(rng, n, lambda i: d), "the same step is added each time"
    if family == 1:
        cycle = [rng.randint(-6, 12) for _ in range(3)]
        while sum(cycle) < 4 or len(set(cycle)) < 2:
            cycle = [rng.randint(-6, 12) for _ in range(3)]
        return _steps(rng, n, lambda i: cycle[i % 3]), "the steps repeat in a cycle of three"
    if family == 2:
        a, b = rng.randint(1, 4), rng.randint(-5, 8)
        return _steps(rng, n, lambda i: a * i + b), "the steps themselves grow by a constant"
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


def _constant(xs):
    return len(set(xs)) == 1


def predict(x):
    """The next term by the first rule, in a fixed order, that fits every term of x (at least
    five), or None. The rules a reader would try: a constant step, steps growing by a constant,
    a cycle of three steps, steps in a constant ratio, x_n = x_(n-1) + p x_(n-2), two
    interleaved constant-step sequences, and alternating "times m" and "plus k"."""
    d = [b - a for a, b in zip(x, x[1:])]
    dd = [b - a for a, b in zip(d, d[1:])]
    if _constant(d):
        return x[-1] + d[0]
    if _constant(dd):
        return x[-1] + d[-1] + dd[0]
    if len(d) >= 4 and all(d[i] == d[i - 3] for i in range(3, len(d))):
        return x[-1] + d[-3]
    if d[0] and d[1] % d[0] == 0:
        r = d[1] // d[0]
        if r not in (0, 1) and all(b == r * a for a, b in zip(d, d[1:])):
            return x[-1] + r * d[-1]
    for p in (1, 2):
        if all(x[i] == x[i - 1] + p * x[i - 2] for i in range(2, len(x))):
            return x[-1] + p * x[-2]
    even, odd = x[0::2], x[1::2]
    if len(odd) >= 2 and _constant([b - a for a, b in zip(even, even[1:])]) and \
            _constant([b - a for a, b in zip(odd, odd[1:])]):
        same = even if len(x) % 2 == 0 else odd
        return same[-1] + same[-1] - same[-2]
    if x[0] and x[1] % x[0] == 0:
        m, k = x[1] // x[0], x[2] - x[1]
        if all(x[i] == (x[i - 1] * m if i % 2 else x[i - 1] + k) for i in range(1, len(x))):
            return x[-1] * m if len(x) % 2 else x[-1] + k
    return None


class SequenceEnv(GameEnv):
    """Predict the next terms of an integer sequence, one at a time."""

    LEVELS = 4

    def setup(self, rng):
        shown, count, families = LEVEL_SPECS[self.level]
        self.shown, self.to_predict = shown, max(1, min(count, self.max_turns))
        end = shown + self.to_predict
        while True:
            terms, rule = make_sequence(rng, end, rng.choice(families))
            self.terms, self.rule, self.known = terms, rule, shown
            hidden = terms[shown:]
            if len(set(terms)) < shown or any(predict(terms[:k]) != terms[k] for k in range(shown, end)):
                continue
            # no hidden term may be readable in the first observation (17 inside -17 counts)
            printed = set(re.findall(r"\d+", f"{self.task()} {self.max_turns} {self.example()}"))
            if not {str(abs(t)) for t in hidden} & printed:
                break

    def info(self):
        return {"turn": self.turn, "level": self.level, "known": self.known}

    def task(self):
        shown = f"Sequence: {', '.join(map(str, self.terms[:self.known]))}, ?\n"
        if self.level == 1:  # the rule is stated: one addition, a one-step question
            step = self.terms[1] - self.terms[0]
            return (f"{shown}Each number is {step} more than the one before. What is the next "
                    "number?\nWrite a move as one whole number.")
        if self.level == 2:  # the kind of rule is stated, not its step
            return (f"{shown}The same number is added each time: subtract a number from the one "
                    "after it to find it. What is the next number?\n"
                    "Write a move as one whole number.")
        needed = self.shown + self.to_predict - self.known
        return (f"{shown}Find the rule of this sequence of whole numbers and predict the next "
                "term. A right prediction is added to the sequence and you go on to the term "
                "after it; after a wrong one you hear whether it was too high or too low. Right "
                f"predictions still needed: {needed}.\n"
                "Write a move as one whole number (it may be negative).")

    def example(self):
        if self.level == 1:  # the first term: plainly not the next one
            return str(self.terms[0])
        return str(self.terms[self.known - 1])

    def judge(self, move):
        text = move.replace(" ", "").replace(",", "")
        if not _NUMBER.fullmatch(text):
            return self.INVALID, "That is not a move: write the next term as one whole number."
        guess, truth = int(text), self.terms[self.known]
        if guess != truth:
            return self.CONTINUE, f"{guess} is too {'high' if guess > truth else 'low'}."
        self.known += 1
        if self.known == len(self.terms):
            return self.WIN, f"{guess} is right; you have extended the sequence."
        return self.CONTINUE, f"{guess} is right."

    def solution(self):
        """Each remaining term predicted from the terms before it (see :func:`predict`)."""
        return [self.box(predict(self.terms[:k])) for k in range(self.known, len(self.terms))]

    def hint(self):
        return f"The rule: {self.rule}. Compare consecutive differences before guessing."

"""Number builder: combine numbers with arithmetic to reach a target.

Numbers and a target are dealt. Each turn you combine two of your numbers with +, -, * or /;
both are replaced by the result, which must be a positive whole number. You win as soon as the
target is among your numbers. ``undo`` takes back the last operation (it costs a turn).

Levels (the same rules, a longer route each time; never longer than max_turns allows):

1. three numbers from 1 to 9, and the target is the sum of two of them, as the task says: one
   addition. The example adds two numbers that miss the target, and an operation that misses is
   told and not applied, so each turn is a fresh try (the base 0.5B agent won 0 of 10 when the
   example was not a move and a missed operation had to be undone);
2. four numbers (three small, one large); the target needs two operations, no single one
   reaches it;
3. six numbers (four small, two large); the target needs three operations and no one or two
   reach it, so the route has to be planned (the original game).

Every deal is built from a hidden chain of operations; ``solution()`` does not replay it but
searches for a shortest route from the numbers shown (taking back earlier operations first when
the numbers left cannot reach the target in the moves left), as an agent could.

Actions: ``\\boxed{a op b}`` with two of your numbers and one of + - * / (``x`` counts as ``*``;
a trailing ``= c`` is ignored), for instance ``\\boxed{3 + 4}``, and ``\\boxed{undo}``. Reward 1.0
when the target appears; truncated after max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import re

from gameenv import GameEnv

ENV_CLASS = "CountdownEnv"
SETTING = "games"
SKILL = "mathematical reasoning"

_OPS = {"+": "+", "-": "-", "*": "*", "x": "*", "×": "*", "/": "/", "÷": "/", ":": "/"}
_MOVE = re.compile(r"^(\d+)\s*([-+*/x×÷:])\s*(\d+)(?:\s*=\s*-?\d*)?$")
#: Operations needed at each level (fewer when max_turns is smaller).
STEPS = {1: 1, 2: 2, 3: 3}


def apply(a, op, b):
    """a op b when it is a positive whole number, else None."""
    if op == "+":
        return a + b
    if op == "*":
        return a * b
    if op == "-":
        return a - b if a > b else None
    return a // b if b and a % b == 0 else None


def combine(pool, i, j, op):
    """The pool after replacing pool[i] and pool[j] by pool[i] op pool[j] (None if invalid)."""
    result = apply(pool[i], op, pool[j])
    if result is None:
        return None
    return sorted([x for k, x in enumerate(pool) if k not in (i, j)] + [result])


def operations(pool):
    """(a, op, b, pool after) for the useful operations on a sorted pool, in a fixed order:
    each pair once, the larger number first for - and /, no * or / by 1 (that only drops a 1)."""
    n = len(pool)
    for i in range(n):
        for j in range(i + 1, n):
            a, b = pool[i], pool[j]
            rest = pool[:i] + pool[i + 1:j] + pool[j + 1:]
            for x, op, y in ((b, "+", a), (b, "*", a), (b, "-", a), (b, "/", a)):
                if op in "*/" and a == 1:
                    continue
                value = apply(x, op, y)
                if value is not None:
                    yield x, op, y, tuple(sorted(rest + (value,)))


def one_step(pool, target):
    """An operation (a, op, b) on pool whose result is target, else None."""
    n = len(pool)
    for i in range(n):
        for j in range(i + 1, n):
            a, b = pool[i], pool[j]
            if a + b == target:
                return b, "+", a
            if a > 1 and a * b == target:
                return b, "*", a
            if b - a == target:
                return b, "-", a
            if a > 1 and b == a * target:
                return b, "/", a
    return None


def route(pool, target, depth):
    """A shortest list of operations that puts target among the numbers, within depth
    operations (deterministic: the same numbers always give the same route); None if none."""
    pool = tuple(sorted(pool))
    if target in pool:
        return []
    failed = set()

    def search(state, d):
        if d == 1:
            move = one_step(state, target)
            return None if move is None else [move]
        if (state, d) in failed:
            return None
        for a, op, b, after in operations(state):
            rest = search(after, d - 1)
            if rest is not None:
                return [(a, op, b)] + rest
        failed.add((state, d))
        return None

    for d in range(1, depth + 1):
        found = search(pool, d)
        if found is not None:
            return found
    return None


def reachable(pool, depth):
    """Every number on the table after at most depth (0, 1 or 2) operations from pool."""
    seen = set(pool)
    if depth >= 1:
        for _, _, _, after in operations(tuple(sorted(pool))):
            seen.update(after)
            if depth >= 2:
                for _, _, _, later in operations(after):
                    seen.update(later)
    return seen


class CountdownEnv(GameEnv):
    """Reach a target by combining numbers two at a time."""

    LEVELS = 3

    def setup(self, rng):
        self.steps = max(1, min(STEPS[self.level], self.max_turns))
        while True:
            if self.level == 1:
                pool = sorted(rng.sample(range(1, 10), 3))
            elif self.level == 2:
                pool = sorted(rng.sample(range(1, 11), 3) + [rng.choice([12, 15, 20, 25])])
            else:
                pool = sorted(rng.sample(range(1, 11), 4) + rng.sample([12, 15, 20, 25, 50, 75, 100], 2))
            chain, work, result = [], list(pool), None
            for _ in range(self.steps):
                i, j = rng.sample(range(len(work)), 2)
                op = "+" if self.level == 1 else rng.choice("+-*/")
                a, b = work[i], work[j]
                new = combine(work, i, j, op)
                if new is None or (op in "*/" and 1 in (a, b)):
                    break
                chain.append((a, op, b))
                work, result = new, apply(a, op, b)
            else:
                low = {1: 2, 2: 10, 3: 30}[self.level]
                if low <= result <= 999 and result not in reachable(pool, self.steps - 1):
                    break
        self.start, self.chain, self.target = pool, chain, result
        self.pool, self.history = list(pool), []

    def info(self):
        return {"turn": self.turn, "level": self.level, "numbers": list(self.pool),
                "target": self.target}

    def task(self):
        if self.level == 1:  # the numbers never change at level 1 (a miss is not applied)
            return (f"Your numbers: {', '.join(map(str, self.pool))}\nTarget: {self.target}\n"
                    f"Two of your numbers add up to {self.target}. Which two? Write them with + "
                    "between them.")
        return (f"Your numbers: {', '.join(map(str, self.pool))}\n"
                f"Target: {self.target}\n"
                "Rules: pick two of your numbers and add, subtract, multiply or divide them. Both "
                "are replaced by the result, which must be a positive whole number. You win as soon "
                "as the target is one of your numbers.\n"
                "Write a move as two of your numbers with +, -, * or / between them, or write undo "
                "to take back your last operation.")

    def example(self):
        if self.level == 1:  # two of the numbers that miss the target: copying it is told so
            a, b, c = self.start
            return f"{b} + {a}" if a + b != self.target else f"{c} + {a}"
        for i in range(len(self.pool)):
            for j in range(i + 1, len(self.pool)):
                a, b = self.pool[j], self.pool[i]
                for op in "+*-":
                    value = apply(a, op, b)
                    if value is not None and value != self.target:
                        return f"{a} {op} {b}"
        return "undo"

    def judge(self, move):
        text = move.lower().replace("\\times", "*").replace("\\div", "/").replace("\\cdot", "*")
        text = " ".join(text.split())
        if text == "undo":
            if not self.history:
                return self.INVALID, "There is nothing to undo yet."
            self.pool = self.history.pop()
            return self.CONTINUE, "Your last operation was taken back."
        found = _MOVE.match(text)
        if found is None:
            return self.INVALID, ("That is not a move: write two of your numbers with +, -, * or / "
                                  "between them.")
        a, op, b = int(found.group(1)), _OPS[found.group(2)], int(found.group(3))
        if a not in self.pool:
            return self.INVALID, f"{a} is not one of your numbers."
        i = self.pool.index(a)
        j = next((k for k, x in enumerate(self.pool) if x == b and k != i), None)
        if j is None:
            extra = " (you have only one)" if b == a else ""
            return self.INVALID, f"{b} is not one of your numbers{extra}."
        new = combine(self.pool, i, j, op)
        if new is None:
            return self.INVALID, f"{a} {op} {b} is not a positive whole number."
        value = apply(a, op, b)
        if self.level == 1 and self.target not in new:  # level 1 keeps the numbers: try again
            return self.CONTINUE, (f"{a} {op} {b} = {value}, not {self.target}. Your numbers are "
                                   "unchanged: try two other numbers.")
        self.history.append(self.pool)
        self.pool = new
        if self.target in self.pool:
            return self.WIN, f"{a} {op} {b} = {value}, the target."
        return self.CONTINUE, f"{a} {op} {b} = {value}. The target is still {self.target}."

    def solution(self):
        """A shortest route from the numbers on the table; when they cannot reach the target in
        the moves left, undo every operation and take a shortest route from the deal."""
        left = max(1, self.max_turns - self.turn)
        path = route(self.pool, self.target, min(self.steps, left))
        if not path:
            path = ["undo"] * len(self.history) + route(self.start, self.target, self.steps)
        return [self.box(m if isinstance(m, str) else f"{m[0]} {m[1]} {m[2]}") for m in path]

    def hint(self):
        return (f"The target {self.target} can be reached from the dealt numbers in "
                f"{self.steps} operation(s). Work backwards: which two numbers give the target, "
                "and can you build them?")

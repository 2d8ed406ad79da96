"""Number builder: combine numbers with arithmetic to reach a target.

Six numbers and a target are dealt. Each turn you combine two of your numbers with +, -, * or /;
they are replaced by the result, which must be a positive whole number. You win as soon as the
target is among your numbers. Every deal is built from a hidden chain of three or four
operations, and deals that can be finished in one or two operations are redrawn, so the route
has to be planned. ``undo`` takes back the last operation (it costs a turn).

Actions: ``\\boxed{a op b}`` (for instance two of your numbers joined by ``*``) and
``\\boxed{undo}``. Reward 1.0 when the target appears; truncated after max_turns replies.
``reset(seed=None)`` plays seed 0.
"""

import random
import re

ENV_CLASS = "CountdownEnv"
SETTING = "games"
SKILL = "mathematical reasoning"

_OPS = {"+": "+", "-": "-", "*": "*", "x": "*", "×": "*", "/": "/", "÷": "/"}
_MOVE = re.compile(r"^(\d+)\s*([-+*/x×÷])\s*(\d+)$")


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


def within_two(pool):
    """Every number on the table after at most two operations from pool.

    A second operation that ignores the first result only yields a one-operation value, so it
    suffices to combine each first result with each number left over (both orders).
    """
    seen = set(pool)
    for i in range(len(pool)):
        for j in range(len(pool)):
            if i == j:
                continue
            rest = [x for k, x in enumerate(pool) if k not in (i, j)]
            for op in "+-*/":
                first = apply(pool[i], op, pool[j])
                if first is None:
                    continue
                seen.add(first)
                for x in rest:
                    for op2 in "+-*/":
                        for value in (apply(first, op2, x), apply(x, op2, first)):
                            if value is not None:
                                seen.add(value)
    return seen


class CountdownEnv:
    """Reach a target by combining numbers two at a time."""

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        while True:
            pool = sorted(rng.sample(range(1, 11), 4) + rng.sample([12, 15, 20, 25, 50, 75, 100], 2))
            chain, work = [], list(pool)
            for _ in range(rng.randint(3, 4 if self.max_turns >= 4 else 3)):
                i, j = rng.sample(range(len(work)), 2)
                op = rng.choice("+-*/")
                a, b = work[i], work[j]
                new = combine(work, i, j, op)
                if new is None or (op in "*/" and 1 in (a, b)):
                    break
                chain.append((a, op, b))
                work, result = new, apply(a, op, b)
            else:
                if 30 <= result <= 999 and result not in within_two(pool):
                    break
        self.start, self.chain, self.target = pool, chain, result
        self.pool, self.history = list(pool), []
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("A new deal."), {"numbers": list(pool), "target": result}

    def _render(self, lead):
        return (
            f"{lead}\nYour numbers: {' '.join(map(str, self.pool))}\nTarget: {self.target}\n"
            "Combine two of your numbers with + - * or /; both are replaced by the result, which "
            "must be a positive whole number. Win when the target is among your numbers.\n"
            "Reply with \\boxed{a op b} using two of your numbers, or \\boxed{undo} to take back "
            "the last operation.\n"
            f"Turns left: {self.max_turns - self.turn}."
        )

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        return obs, float(reward), bool(terminated), bool(truncated), {"turn": self.turn,
                                                                     "numbers": list(self.pool)}

    def _operate(self, move):
        """(lead text, won) after applying one parsed operation."""
        a, op, b = int(move.group(1)), _OPS[move.group(2)], int(move.group(3))
        i = self.pool.index(a) if a in self.pool else None
        j = next((k for k, x in enumerate(self.pool) if x == b and k != i), None)
        if i is None or j is None:
            return f"You do not have both {a} and {b} among your numbers.", False
        new = combine(self.pool, i, j, op)
        if new is None:
            return f"{a} {op} {b} is not a positive whole number.", False
        self.history.append(self.pool)
        self.pool = new
        return f"{a} {op} {b} = {apply(a, op, b)}.", apply(a, op, b) == self.target

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        text = (_boxed(action) or "").lower()
        move = _MOVE.match(text)
        if text == "undo":
            if self.history:
                self.pool = self.history.pop()
                lead = "The last operation was taken back."
            else:
                lead = "There is nothing to undo."
        elif move is None:
            lead = "I could not read an operation. Use \\boxed{a + b}, \\boxed{a * b} and so on."
        else:
            lead, won = self._operate(move)
            if won:
                return self._finish(f"{lead} That is the target. You win!", 1.0, True, False)
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """Undo any operations made so far, then replay the hidden chain that built the target."""
        undo = ["\\boxed{undo}"] * len(self.history)
        return undo + [f"\\boxed{{{a} {op} {b}}}" for a, op, b in self.chain]

    def hint(self):
        a, op, b = self.chain[0]
        return (f"The target can be reached in {len(self.chain)} operations; the first combines {a} and "
                f"{b}. Work backwards from the target towards numbers you can build.")

"""The counterfeit coin: find the odd coin with a balance scale.

Between 16 and 30 coins look identical; exactly one is counterfeit and is either heavier or
lighter than the others (which one is also unknown). Each weighing compares two equal-sized,
disjoint groups of coins and reports which side is heavier, or that they balance. Every result
splits the remaining (coin, heavier/lighter) possibilities, and a good weighing splits them into
three near-equal parts: four weighings always suffice.

Actions: ``\\boxed{weigh 1 2 3 vs 4 5 6}`` and, once, ``\\boxed{answer C heavy}`` or
``\\boxed{answer C light}``. Reward 1.0 for the right coin and direction; a wrong answer ends the
game with 0.0. Blind guessing wins at most 1 time in 32. ``reset(seed=None)`` plays seed 0.
"""

import random
import re

ENV_CLASS = "CoinBalanceEnv"
SETTING = "games"
SKILL = "logical deduction"

_WEIGH = re.compile(r"^weigh\s+([\d\s,]+?)\s+(?:vs\.?|versus|against)\s+([\d\s,]+)$", re.IGNORECASE)
_ANSWER = re.compile(r"^answer\s*:?\s*(\d+)\s*,?\s*(heavy|heavier|light|lighter)$", re.IGNORECASE)


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


class CoinBalanceEnv:
    """One counterfeit among n coins, heavier or lighter; weigh groups, then name it."""

    def __init__(self, max_turns=8, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self.n = rng.randint(16, 30)
        self.fake = rng.randint(1, self.n)
        self.heavy = rng.random() < 0.5
        self.log = []
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render(f"{self.n} coins lie before you."), {"coins": self.n}

    def _render(self, lead):
        lines = [
            lead,
            f"Coins are numbered 1 to {self.n}. Exactly one is counterfeit: heavier or lighter than "
            "the rest, you do not know which. Find the coin and whether it is heavy or light.",
        ]
        if self.log:
            lines.append("Weighings so far:")
            lines.extend(f"  {entry}" for entry in self.log)
        lines += [
            "Actions: \\boxed{weigh A B ... vs C D ...} compares two disjoint groups of the same "
            "size; \\boxed{answer C heavy} or \\boxed{answer C light} names the counterfeit "
            "(one answer only; a wrong answer loses).",
            f"Turns left: {self.max_turns - self.turn}.",
        ]
        return "\n".join(lines)

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        info = {"turn": self.turn, "weighings": len(self.log)}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _weigh(self, left, right):
        """Which side is heavier: 'left', 'right' or 'balance'."""
        if self.fake in left:
            return "left" if self.heavy else "right"
        if self.fake in right:
            return "right" if self.heavy else "left"
        return "balance"

    def _groups(self, match):
        left = [int(x) for x in re.findall(r"\d+", match.group(1))]
        right = [int(x) for x in re.findall(r"\d+", match.group(2))]
        coins = left + right
        if not left or len(left) != len(right):
            return None, "Both pans need the same number of coins (at least one each)."
        if len(set(coins)) != len(coins):
            return None, "A coin can be in only one pan, once."
        if not all(1 <= c <= self.n for c in coins):
            return None, f"Coins are numbered 1 to {self.n}."
        return (left, right), ""

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        move = _boxed(action) or ""
        weigh, answer = _WEIGH.match(move), _ANSWER.match(move)
        if answer:
            coin, heavy = int(answer.group(1)), answer.group(2).lower().startswith("heav")
            if coin == self.fake and heavy == self.heavy:
                return self._finish(f"Correct: coin {coin} is the counterfeit. You win!", 1.0, True, False)
            kind = "heavy" if heavy else "light"
            return self._finish(f"Wrong: coin {coin} is not a {kind} counterfeit. You lose.", 0.0, True, False)
        if not weigh:
            lead = "I could not read that. Use \\boxed{weigh 1 2 vs 3 4} or \\boxed{answer 5 light}."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        groups, problem = self._groups(weigh)
        if groups is None:
            return self._finish(self._render(problem + " The scale was not used."), 0.0, False, out_of_turns)
        left, right = groups
        result = self._weigh(set(left), set(right))
        said = {"left": "the left pan is heavier", "right": "the right pan is heavier",
                "balance": "the pans balance"}[result]
        self.log.append(f"{' '.join(map(str, left))} vs {' '.join(map(str, right))}: {said}")
        return self._finish(self._render(f"Result: {said}."), 0.0, False, out_of_turns)

    def solution(self):
        """The answer itself (computed from the hidden coin)."""
        return f"\\boxed{{answer {self.fake} {'heavy' if self.heavy else 'light'}}}"

    def hint(self):
        rng = random.Random(self.n * 1000 + self.fake)
        suspects = {self.fake}
        while len(suspects) < min(6, self.n):
            suspects.add(rng.randint(1, self.n))
        listed = ", ".join(map(str, sorted(suspects)))
        return (f"The counterfeit is one of coins {listed}. Split the suspects into three groups per "
                "weighing, using a coin already known to be genuine to even out the pans.")

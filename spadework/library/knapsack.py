"""Knapsack packing: improve a selection until it is optimal.

Ten items, each with a weight and a value, and a bag with a weight capacity. You propose a set of
items; the reply gives its total weight and value, whether it fits, and how far its value is
below the best possible one. Deals where the greedy value-per-weight choice is optimal are
redrawn, so the best packing takes real trade-offs; so are deals whose best packing is a run of
consecutive item numbers (``1 2 3 4``), the selection a lazy guesser types first.

Action: ``\\boxed{i j k ...}``, item numbers separated by spaces. Reward 1.0 when the selection fits
and reaches the best possible value; truncated after max_turns replies. ``reset(seed=None)``
plays seed 0.
"""

import random
import re

ENV_CLASS = "KnapsackEnv"
SETTING = "games"
SKILL = "optimization"

N_ITEMS = 10


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


def best_packing(weights, values, capacity):
    """(best value, item indices) by dynamic programming over capacities."""
    best = [(0, ())] * (capacity + 1)
    for i, (w, v) in enumerate(zip(weights, values)):
        for c in range(capacity, w - 1, -1):
            cand = best[c - w][0] + v
            if cand > best[c][0]:
                best[c] = (cand, best[c - w][1] + (i,))
    return best[capacity]


def greedy_value(weights, values, capacity):
    """Value of taking items by value per weight while they fit."""
    total_w = total_v = 0
    for i in sorted(range(len(weights)), key=lambda k: -values[k] / weights[k]):
        if total_w + weights[i] <= capacity:
            total_w += weights[i]
            total_v += values[i]
    return total_v


class KnapsackEnv:
    """0/1 knapsack with feedback on weight, value and the gap to the optimum."""

    def __init__(self, max_turns=8, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        while True:
            weights = [rng.randint(3, 20) for _ in range(N_ITEMS)]
            values = [max(1, w + rng.randint(-4, 14)) for w in weights]
            capacity = sum(weights) * rng.randint(35, 50) // 100
            best, items = best_packing(weights, values, capacity)
            contiguous = any(
                sum(weights[a:b]) <= capacity and sum(values[a:b]) == best
                for a in range(N_ITEMS) for b in range(a + 1, N_ITEMS + 1))
            if greedy_value(weights, values, capacity) < best and len(items) >= 3 and not contiguous:
                break
        self.weights, self.values, self.capacity = weights, values, capacity
        self.best, self.best_items = best, items
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("Pack the bag."), {"capacity": capacity, "items": N_ITEMS}

    def _render(self, lead):
        rows = "\n".join(f"  item {i + 1:2d}: weight {w:2d}, value {v:2d}"
                         for i, (w, v) in enumerate(zip(self.weights, self.values)))
        return (
            f"{lead}\nItems:\n{rows}\nCapacity: {self.capacity}.\n"
            "Choose items (each at most once) with total weight at most the capacity and the "
            "largest possible total value.\n"
            "Reply with \\boxed{i j k ...}: the item numbers you pack, separated by spaces.\n"
            f"Turns left: {self.max_turns - self.turn}."
        )

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        return obs, float(reward), bool(terminated), bool(truncated), {"turn": self.turn}

    def _parse(self, text):
        if text is None or not re.fullmatch(r"[\d\s,]+", text):
            return None, "Reply with item numbers only, e.g. \\boxed{i j k}."
        chosen = [int(x) for x in re.findall(r"\d+", text)]
        if len(set(chosen)) != len(chosen):
            return None, "Each item can be packed only once."
        if not all(1 <= i <= N_ITEMS for i in chosen):
            return None, f"Items are numbered 1 to {N_ITEMS}."
        return sorted(chosen), ""

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        chosen, problem = self._parse(_boxed(action))
        if chosen is None:
            return self._finish(self._render("I could not read that. " + problem), 0.0, False, out_of_turns)
        weight = sum(self.weights[i - 1] for i in chosen)
        value = sum(self.values[i - 1] for i in chosen)
        packed = " ".join(map(str, chosen))
        if weight > self.capacity:
            lead = (f"Items {packed} weigh {weight}, over the capacity of {self.capacity} by "
                    f"{weight - self.capacity}. Nothing was packed.")
        elif value == self.best:
            return self._finish(f"Items {packed} fit (weight {weight}) with value {value}, the best "
                                "possible. You win!", 1.0, True, False)
        else:
            lead = (f"Items {packed} fit (weight {weight} of {self.capacity}) with value {value}; "
                    f"the best possible value is {self.best - value} higher.")
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """An optimal packing, by dynamic programming."""
        return "\\boxed{" + " ".join(str(i + 1) for i in self.best_items) + "}"

    def hint(self):
        heaviest = max(self.best_items, key=lambda i: self.weights[i])
        return (f"An optimal packing uses {len(self.best_items)} items and includes item "
                f"{heaviest + 1}. Compare swaps, not just value per weight.")

"""Knapsack packing: improve a selection until it is optimal.

Items, each with a weight and a value, and a bag with a weight capacity. You propose a set of
items; the reply gives its total weight and value, whether it fits, and how far its value is
below the best possible one.

Levels (the same rules and moves, more items and harder trade-offs):

1. three items; any one fits the bag but no two do, so the best packing is the single most
   valuable item;
2. six items; the best packing holds at least two items and is not a run of consecutive item
   numbers (``1 2 3``, the selection a lazy guesser types first);
3. ten items; as level 2 with at least three items, and deals where the greedy value-per-weight
   choice is optimal are redrawn, so the best packing takes real trade-offs (the original game).

Everything the answer depends on is printed; ``solution()`` packs optimally by dynamic
programming over the weights and values shown. One right reply wins, so every level fits any
max_turns.

Action: ``\\boxed{i j k}``, item numbers separated by spaces (for instance ``\\boxed{1 3}``).
Reward 1.0 when the selection fits and reaches the best possible value; truncated after
max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import re

from gameenv import GameEnv

ENV_CLASS = "KnapsackEnv"
SETTING = "games"
SKILL = "optimization"

#: Items at each level.
ITEMS = {1: 3, 2: 6, 3: 10}


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


def deal(rng, level):
    """(weights, values, capacity) for one level, or None to redraw."""
    n = ITEMS[level]
    if level == 1:
        weights = [rng.randint(4, 9) for _ in range(n)]
        values = rng.sample(range(2, 20), n)
        lightest_pair = sum(sorted(weights)[:2])
        if max(weights) >= lightest_pair:
            return None
        return weights, values, rng.randint(max(weights), lightest_pair - 1)
    weights = [rng.randint(3, 20) for _ in range(n)]
    values = [max(1, w + rng.randint(-4, 14)) for w in weights]
    capacity = sum(weights) * rng.randint(35, 50) // 100
    best, items = best_packing(weights, values, capacity)
    contiguous = any(sum(weights[a:b]) <= capacity and sum(values[a:b]) == best
                     for a in range(n) for b in range(a + 1, n + 1))
    if contiguous or len(items) < level:
        return None
    if level == 3 and greedy_value(weights, values, capacity) == best:
        return None
    return weights, values, capacity


class KnapsackEnv(GameEnv):
    """0/1 knapsack with feedback on weight, value and the gap to the optimum."""

    LEVELS = 3

    def setup(self, rng):
        found = None
        while found is None:
            found = deal(rng, self.level)
        self.weights, self.values, self.capacity = found
        self.best, self.best_items = best_packing(*found)

    def info(self):
        return {"turn": self.turn, "level": self.level, "capacity": self.capacity,
                "items": len(self.weights)}

    def task(self):
        rows = "\n".join(f"Item {i + 1}: weight {w}, value {v}"
                         for i, (w, v) in enumerate(zip(self.weights, self.values)))
        return (f"Items:\n{rows}\nBag capacity: {self.capacity}.\n"
                "Pack items (each at most once) whose total weight is at most the capacity and whose "
                "total value is as large as possible.\n"
                "Write a move as the numbers of the items you pack, separated by spaces.")

    def example(self):
        """The two lightest items when they fit together and are not a best packing (a move of
        several items shows the format), else the lightest single item that is not."""
        light = sorted(range(len(self.weights)), key=lambda k: (self.weights[k], k))
        pair = sorted(light[:2])
        if (sum(self.weights[i] for i in pair) <= self.capacity
                and sum(self.values[i] for i in pair) < self.best):
            return " ".join(str(i + 1) for i in pair)
        for i in light:
            if self.weights[i] <= self.capacity and self.values[i] < self.best:
                return str(i + 1)
        return " ".join(str(i + 1) for i in range(len(self.weights)))

    def judge(self, move):
        text = move.replace("and", " ").replace("items", " ").replace("item", " ")
        if not re.fullmatch(r"[\d\s,;+]+", text) or not re.search(r"\d", text):
            return self.INVALID, ("That is not a move: write the numbers of the items you pack, "
                                  "separated by spaces.")
        chosen = [int(x) for x in re.findall(r"\d+", text)]
        n = len(self.weights)
        wrong = [i for i in chosen if not 1 <= i <= n]
        if wrong:
            return self.INVALID, f"There is no item {wrong[0]}: the items are numbered 1 to {n}."
        if len(set(chosen)) != len(chosen):
            return self.INVALID, "Each item can be packed only once."
        chosen.sort()
        weight = sum(self.weights[i - 1] for i in chosen)
        value = sum(self.values[i - 1] for i in chosen)
        packed = f"Item{'s' if len(chosen) > 1 else ''} {' '.join(map(str, chosen))}"
        if weight > self.capacity:
            return self.CONTINUE, (f"{packed} weigh{'' if len(chosen) > 1 else 's'} {weight}, over "
                                   f"the capacity of {self.capacity} by {weight - self.capacity}.")
        if value == self.best:
            return self.WIN, f"{packed} fit (weight {weight}) with value {value}, the best possible."
        return self.CONTINUE, (f"{packed} fit (weight {weight} of {self.capacity}) with value "
                               f"{value}; the best possible value is {self.best - value} higher.")

    def solution(self):
        """An optimal packing, by dynamic programming."""
        return self.box(" ".join(str(i + 1) for i in self.best_items))

    def hint(self):
        if len(self.best_items) == 1:
            return "No two items fit together: pack the single item worth the most."
        heaviest = max(self.best_items, key=lambda i: self.weights[i])
        return (f"An optimal packing uses {len(self.best_items)} items and includes item "
                f"{heaviest + 1}. Compare swaps, not just value per weight.")

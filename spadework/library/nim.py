"""Nim against a perfect opponent.

Piles of stones lie on the table. On each turn you take one or more stones from a single pile;
then the opponent, who plays perfectly, does the same. Whoever takes the last stone wins. Every
deal is a winning position for you, but only the right moves keep it winning: one careless move
and the opponent never lets go.

Levels (the same rules, more piles; every deal is won by perfect play within max_turns moves):

1. one pile of 1 to 3 stones: take them all (the task asks how many to take; the example takes
   none, which is not a move, so copying it costs a turn but not the game);
2. two unequal piles of 1 to 6 stones: make them equal, then copy the opponent;
3. three or four piles of 1 to 7 stones (9 to 20 in all): the nim-sum strategy, move so that the
   XOR of the pile sizes becomes zero (the original game; up to 12 stones a pile when max_turns
   is below 4, where only a few small deals would fit).

The opponent is deterministic: from a winning position it makes the winning move that removes
the most stones, from a losing one it takes a single stone from the largest pile. Its moves are
shown, so ``solution()`` plays perfect Nim from the piles on the table, as an agent could.

Action: ``\\boxed{P N}`` takes N stones from pile P (``pile P take N`` and ``P, N`` are read too).
Reward 1.0 when you take the last stone, 0.0 (terminated) when the opponent does, truncated when
max_turns replies are used. ``reset(seed=None)`` plays seed 0.
"""

import re

from gameenv import GameEnv

ENV_CLASS = "NimEnv"
SETTING = "games"
SKILL = "mathematical reasoning"

_MOVE = re.compile(r"^(?:pile\s*)?(\d+)\s*(?:[,:;]\s*|\s+)(?:take\s*)?(\d+)(?:\s*stones?)?$",
                   re.IGNORECASE)


def nim_sum(piles):
    total = 0
    for p in piles:
        total ^= p
    return total


def best_move(piles):
    """A winning move (pile index, count) when one exists, else a stalling move (take 1 from the
    largest pile). Among winning moves the one that removes the most stones, to end sooner."""
    s = nim_sum(piles)
    if s:
        options = [(p - (p ^ s), i) for i, p in enumerate(piles) if (p ^ s) < p]
        take, i = max(options, key=lambda o: (o[0], -o[1]))
        return i, take
    i = max(range(len(piles)), key=lambda k: (piles[k], -k))
    return i, 1


def perfect_play(piles):
    """Your moves (pile index, count) under perfect play against the opponent's replies."""
    piles, moves = list(piles), []
    while sum(piles):
        i, k = best_move(piles)
        moves.append((i, k))
        piles[i] -= k
        if sum(piles):
            j, m = best_move(piles)
            piles[j] -= m
    return moves


def deal(rng, level, max_turns):
    """Pile sizes for one level (a winning position for the player to move), or None to redraw.
    Level 3 within three moves is mostly "take the big pile" deals, so there piles grow to 12
    stones (7 to 30 in all), else the few deals that fit repeat too often to need reading."""
    if level == 1:
        return [rng.randint(1, 3)]
    if level == 2:
        a, b = rng.sample(range(1, 7), 2)
        return [a, b]
    most, low, high = (12, 7, 30) if max_turns <= 3 else (7, 9, 20)
    piles = [rng.randint(1, most) for _ in range(rng.randint(3, 4))]
    if nim_sum(piles) and low <= sum(piles) <= high and max(piles) >= 3:
        return piles
    return None


class NimEnv(GameEnv):
    """Normal-play Nim, you move first from a position with a non-zero nim-sum."""

    LEVELS = 3

    def setup(self, rng):
        """Deal piles whose perfect play wins within max_turns moves (the shortest deal found
        when none does)."""
        shortest = None
        for _ in range(20000):
            piles = deal(rng, self.level, self.max_turns)
            if piles is None:
                continue
            moves = len(perfect_play(piles))
            if moves <= self.max_turns:
                break
            if shortest is None or moves < shortest[0]:
                shortest = (moves, piles)
        else:
            piles = shortest[1]
        self.piles = piles
        self.last_answer = perfect_play(piles)[-1]  # the example move never prints the answer

    def info(self):
        return {"turn": self.turn, "level": self.level, "piles": list(self.piles)}

    def task(self):
        if len(self.piles) == 1:
            p = self.piles[0]
            many = f"any number of stones from 1 to {p}" if p > 1 else "the 1 stone"
            return (f"There is one pile of {p} stone{'s' if p > 1 else ''}. Whoever takes the last "
                    f"stone wins. You may take {many}. How many do you take? Write the pile number "
                    "1 and how many stones you take.")
        rows = "\n".join(f"Pile {i + 1}: {p} stone{'s' if p != 1 else ''} {'|' * p}"
                         for i, p in enumerate(self.piles))
        many = len(self.piles) > 1
        return (f"{rows}\n"
                f"It is your move. Rules: on your turn take one or more stones from "
                f"{'a single pile' if many else 'the pile'}; then the opponent does the same. "
                "Whoever takes the last stone wins. The opponent never makes a mistake.\n"
                "Write a move as two numbers: the pile, then how many stones you take from it.")

    def example(self):
        """The first move (piles in order, fewest stones first) that neither wins the game nor
        is the last move of the solution, so the first observation never prints the answer.
        With one pile every such move loses, so the example takes no stone (not a move)."""
        if len(self.piles) == 1:
            return "1 0"
        for i, p in enumerate(self.piles):
            for k in range(1, p + 1):
                after = self.piles[:i] + [p - k] + self.piles[i + 1:]
                if nim_sum(after) and (i, k) != self.last_answer:
                    return f"{i + 1} {k}"
        return f"{len(self.piles)} 1"

    def judge(self, move):
        found = _MOVE.match(" ".join(move.split()))
        if found is None:
            return self.INVALID, ("That is not a move: write the pile number and how many stones "
                                  "to take, two whole numbers.")
        pile, take = int(found.group(1)), int(found.group(2))
        if not 1 <= pile <= len(self.piles):
            return self.INVALID, (f"There is no pile {pile}: the piles are numbered 1 to "
                                  f"{len(self.piles)}." if len(self.piles) > 1 else
                                  f"There is no pile {pile}: there is only pile 1.")
        have = self.piles[pile - 1]
        if have == 0:
            return self.INVALID, f"Pile {pile} is empty; take from a pile that has stones."
        if not 1 <= take <= have:
            return self.INVALID, f"You can take 1 to {have} stones from pile {pile}, not {take}."
        self.piles[pile - 1] -= take
        if sum(self.piles) == 0:
            return self.WIN, f"You took the last {take} stone{'s' if take > 1 else ''} from pile {pile}."
        i, k = best_move(self.piles)
        self.piles[i] -= k
        done = f"You took {take} from pile {pile}. The opponent took {k} from pile {i + 1}"
        if sum(self.piles) == 0:
            return self.LOSE, f"{done}, the last stone{'s' if k > 1 else ''}, and wins."
        return self.CONTINUE, f"{done}."

    def solution(self):
        """Perfect play against the (deterministic, visible) opponent from the current piles."""
        return [self.box(f"{i + 1} {k}") for i, k in perfect_play(self.piles)]

    def hint(self):
        if len(self.piles) == 1:
            return "Taking every stone of the only pile wins at once."
        if len(self.piles) == 2:
            return ("Make the two piles equal; after that, whatever the opponent takes from one "
                    "pile, take the same number from the other.")
        sizes = ", ".join(format(p, "03b") for p in self.piles)
        return (f"Write the pile sizes in binary ({sizes}) and XOR them. Always move so that "
                "the XOR of all piles becomes 0; then the opponent can never win.")

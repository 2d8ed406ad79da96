"""Nim against a perfect opponent.

A few piles of stones lie on the table. On each turn you take one or more stones from a single
pile; then the opponent, who plays perfectly, does the same. Whoever takes the last stone wins.
Every deal is a winning position for you, but only the nim-sum strategy (move so that the XOR of
the pile sizes becomes zero) keeps it winning: one careless move and the opponent never lets go.

Action: ``\\boxed{P N}`` takes N stones from pile P. Reward 1.0 when you take the last stone,
0.0 (terminated) when the opponent does, truncated when max_turns replies are used.
``reset(seed=None)`` plays seed 0, so an unseeded reset is reproducible too.
"""

import random
import re

ENV_CLASS = "NimEnv"
SETTING = "games"
SKILL = "mathematical reasoning"

_MOVE = re.compile(r"^\s*(?:pile\s*)?(\d+)\s*[,:\s]\s*(?:take\s*)?(\d+)\s*$", re.IGNORECASE)


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


def _nim_sum(piles):
    total = 0
    for p in piles:
        total ^= p
    return total


def _best_move(piles):
    """A winning move (pile index, count) when one exists, else a stalling move (take 1 from the
    largest pile). Among winning moves the one that removes the most stones, to end sooner."""
    s = _nim_sum(piles)
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
        i, k = _best_move(piles)
        moves.append((i, k))
        piles[i] -= k
        if sum(piles):
            j, m = _best_move(piles)
            piles[j] -= m
    return moves


class NimEnv:
    """Normal-play Nim, you move first from a position with a non-zero nim-sum."""

    def __init__(self, max_turns=12, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        """Deal piles whose perfect play wins within max_turns moves (always possible from
        max_turns=2 on; below that the shortest deal found is used)."""
        rng = random.Random(0 if seed is None else seed)
        shortest = None
        for _ in range(20000):
            piles = [rng.randint(1, 7) for _ in range(rng.randint(3, 4))]
            if not (_nim_sum(piles) and 9 <= sum(piles) <= 20 and max(piles) >= 3):
                continue
            moves = len(perfect_play(piles))
            if moves <= self.max_turns:
                break
            if shortest is None or moves < shortest[0]:
                shortest = (moves, piles)
        else:
            piles = shortest[1]
        self.piles = piles
        self.turn = 0
        self.done = False
        self.won = False
        self.truncated = False
        return self._render("A new game of Nim begins. You move first."), {"piles": list(piles)}

    def _render(self, lead):
        rows = "\n".join(f"  Pile {i + 1}: {p:2d} {'|' * p}" for i, p in enumerate(self.piles))
        left = self.max_turns - self.turn
        return (
            f"{lead}\n{rows}\n"
            "Rules: on your turn take one or more stones from a single pile; the opponent then "
            "does the same. Whoever takes the last stone wins. The opponent never makes a mistake.\n"
            "Answer with \\boxed{P N} to take N stones from pile P.\n"
            f"Turns left: {left}."
        )

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        info = {"piles": list(self.piles), "turn": self.turn, "won": self.won}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        move = _boxed(action)
        match = _MOVE.match(move) if move is not None else None
        if match is None:
            lead = "I could not read a move. Reply with \\boxed{P N}, two whole numbers."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        pile, take = int(match.group(1)), int(match.group(2))
        if not 1 <= pile <= len(self.piles) or self.piles[pile - 1] == 0:
            lead = f"Pile {pile} has no stones to take. Choose a non-empty pile."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        if not 1 <= take <= self.piles[pile - 1]:
            lead = f"You can take between 1 and {self.piles[pile - 1]} stones from pile {pile}."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        self.piles[pile - 1] -= take
        if sum(self.piles) == 0:
            self.won = True
            return self._finish(f"You took the last stone from pile {pile}. You win!", 1.0, True, False)
        i, k = _best_move(self.piles)
        self.piles[i] -= k
        if sum(self.piles) == 0:
            return self._finish(
                f"You took {take} from pile {pile}. The opponent took the last {k} from pile "
                f"{i + 1} and wins.", 0.0, True, False)
        lead = f"You took {take} from pile {pile}. The opponent took {k} from pile {i + 1}."
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """Perfect play against the (deterministic) opponent from the current piles."""
        return [f"\\boxed{{{i + 1} {k}}}" for i, k in perfect_play(self.piles)]

    def hint(self):
        sizes = ", ".join(format(p, "03b") for p in self.piles)
        return (f"Write the pile sizes in binary ({sizes}) and XOR them. Always move so that "
                "the XOR of all piles becomes 0; then the opponent can never win.")

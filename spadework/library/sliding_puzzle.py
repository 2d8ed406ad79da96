"""The eight puzzle: slide numbered tiles back into order.

A 3x3 tray holds tiles 1 to 8 and one empty square. A move slides a tile that is next to the empty
square (above, below, left or right of it) into it. The tray starts scrambled, at least ten moves
from the goal order, and must be solved within the turn budget, so moves have to be planned
rather than tried.

Action: ``\\boxed{T}`` slides tile T into the empty square. Reward 1.0 when the tray reads
1 2 3 / 4 5 6 / 7 8 _; truncated after max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import heapq
import random
import re

ENV_CLASS = "SlidingPuzzleEnv"
SETTING = "games"
SKILL = "spatial reasoning"

GOAL = (1, 2, 3, 4, 5, 6, 7, 8, 0)
MIN_DEPTH, MAX_DEPTH = 10, 14


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


def neighbours(state):
    """(tile moved, next state) for every legal slide."""
    blank = state.index(0)
    r, c = divmod(blank, 3)
    out = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        nr, nc = r + dr, c + dc
        if 0 <= nr < 3 and 0 <= nc < 3:
            k = nr * 3 + nc
            nxt = list(state)
            nxt[blank], nxt[k] = nxt[k], 0
            out.append((state[k], tuple(nxt)))
    return out


def distance(state):
    """Sum of every tile's Manhattan distance to its goal square (a lower bound on slides)."""
    total = 0
    for k, tile in enumerate(state):
        if tile:
            total += abs(k // 3 - (tile - 1) // 3) + abs(k % 3 - (tile - 1) % 3)
    return total


def solve(state, limit=31):
    """Tiles to slide, in order, on a shortest route to GOAL; None when it is more than limit
    slides away. A* search with the Manhattan bound, which never overestimates, so the first
    time GOAL is taken from the queue its route is a shortest one (31 is the eight puzzle's
    diameter: the default always finds a route for a solvable tray)."""
    parent, cost = {state: None}, {state: 0}
    queue = [(distance(state), 0, state)]
    while queue:
        _, g, cur = heapq.heappop(queue)
        if cur == GOAL:
            moves = []
            while parent[cur] is not None:
                cur, tile = parent[cur]
                moves.append(tile)
            return moves[::-1]
        if g > cost[cur]:
            continue
        for tile, nxt in neighbours(cur):
            f = g + 1 + distance(nxt)
            if f <= limit and g + 1 < cost.get(nxt, limit + 1):
                cost[nxt], parent[nxt] = g + 1, (cur, tile)
                heapq.heappush(queue, (f, g + 1, nxt))
    return None


class SlidingPuzzleEnv:
    """3x3 sliding-tile puzzle scrambled 10 to 14 optimal moves from the goal."""

    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        """Scramble to 10-14 slides from the goal, and never more than max_turns (down to 4
        slides for small budgets), so the tray can always be solved in time."""
        rng = random.Random(0 if seed is None else seed)
        most = max(4, min(MAX_DEPTH, self.max_turns))
        least = min(MIN_DEPTH, most)
        while True:
            state, previous = GOAL, None
            for _ in range(rng.randint(least, most + 10)):
                options = [s for _, s in neighbours(state) if s != previous]
                previous, state = state, rng.choice(options)
            plan = solve(state, most)
            if plan is not None and len(plan) >= least:
                break
        self.state = state
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("The tiles have been scrambled."), {"tray": list(state)}

    def _render(self, lead):
        rows = [" ".join(str(t) if t else "_" for t in self.state[r * 3:r * 3 + 3]) for r in range(3)]
        movable = sorted(tile for tile, _ in neighbours(self.state))
        return (
            f"{lead}\nTray (_ is the empty square):\n  " + "\n  ".join(rows) + "\n"
            "Goal:\n  1 2 3\n  4 5 6\n  7 8 _\n"
            "Reply with \\boxed{T} to slide tile T into the empty square; only tiles next to it "
            f"can move (now: {', '.join(map(str, movable))}).\n"
            f"Turns left: {self.max_turns - self.turn}."
        )

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        info = {"turn": self.turn, "tray": list(self.state)}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        move = _boxed(action)
        if move is None or not re.fullmatch(r"(?:tile\s*)?\d", move, re.IGNORECASE):
            lead = "I could not read a move. Reply with one tile number, e.g. \\boxed{T} for tile T."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        tile = int(move[-1])
        slides = dict(neighbours(self.state))
        if tile not in slides:
            lead = f"Tile {tile} is not next to the empty square and cannot move."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        self.state = slides[tile]
        if self.state == GOAL:
            return self._finish("The tiles are in order. You win!", 1.0, True, False)
        return self._finish(self._render(f"You slid tile {tile}."), 0.0, False, out_of_turns)

    def solution(self):
        """A shortest sequence of slides from the current tray (breadth-first search)."""
        return [f"\\boxed{{{t}}}" for t in solve(self.state)]

    def hint(self):
        plan = solve(self.state)
        first = " then ".join(f"tile {t}" for t in plan[:2]) or "nothing: it is solved"
        return (f"The tray can be solved in {len(plan)} slides; begin with {first}. Place the top "
                "row first, then the left column.")

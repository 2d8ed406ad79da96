"""The eight puzzle: slide numbered tiles back into order.

A 3x3 tray holds tiles 1 to 8 and one empty square. A move slides a tile that is next to the empty
square (above, below, left or right of it) into it. The goal is shown beside the tray: tiles 1 to
8 in reading order with the empty square at a place drawn for each deal (the bottom-right corner
in the classic puzzle). The tray starts scrambled a number of slides away from the goal, and must
be solved within the turn budget, so at the higher levels moves have to be planned rather than
tried.

Levels (the same rules; the tray is scrambled further as the level rises):

- 1: one slide from the goal (slide the tile that sits where the goal has the empty square, as
  the task points out; the example is a tile that cannot move, so copying it costs a turn only);
- 2: two slides from the goal, and the task says where the first tile to slide is (then, one
  slide away, it points out the last as at level 1): the rung between one slide shown and a
  scramble planned;
- 3: 2 or 3 slides;
- 4: 5 to 7 slides;
- 5: 10 to 14 slides, as the classic starter.

The scramble is never more slides than ``max_turns`` (down to 1), so solution() solves it in time.

Action: ``\\boxed{T}`` slides tile T into the empty square, e.g. ``\\boxed{5}``. Reward 1.0 when
the tray matches the goal; truncated after max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import heapq
import re

from gameenv import GameEnv

ENV_CLASS = "SlidingPuzzleEnv"
SETTING = "games"
SKILL = "spatial reasoning"

#: Per level: (fewest, most) slides of a shortest solution.
LEVEL_DEPTHS = {1: (1, 1), 2: (2, 2), 3: (2, 3), 4: (5, 7), 5: (10, 14)}
SIDES = {(-1, 0): "up", (1, 0): "down", (0, -1): "left", (0, 1): "right"}  # gap minus tile


def goal_with_blank(k):
    """Tiles 1 to 8 in reading order with the empty square (0) at index k."""
    tiles = list(range(1, 9))
    return tuple(tiles[:k] + [0] + tiles[k:])


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


def distance(state, goal):
    """Sum of every tile's Manhattan distance to its goal square (a lower bound on slides)."""
    where = {tile: k for k, tile in enumerate(goal)}
    total = 0
    for k, tile in enumerate(state):
        if tile:
            g = where[tile]
            total += abs(k // 3 - g // 3) + abs(k % 3 - g % 3)
    return total


def solve(state, goal, limit=31):
    """Tiles to slide, in order, on a shortest route to goal; None when it is more than limit
    slides away. A* search with the Manhattan bound, which never overestimates, so the first
    time goal is taken from the queue its route is a shortest one (31 is the eight puzzle's
    diameter: the default always finds a route for a solvable tray)."""
    parent, cost = {state: None}, {state: 0}
    queue = [(distance(state, goal), 0, state)]
    while queue:
        _, g, cur = heapq.heappop(queue)
        if cur == goal:
            moves = []
            while parent[cur] is not None:
                cur, tile = parent[cur]
                moves.append(tile)
            return moves[::-1]
        if g > cost[cur]:
            continue
        for tile, nxt in neighbours(cur):
            f = g + 1 + distance(nxt, goal)
            if f <= limit and g + 1 < cost.get(nxt, limit + 1):
                cost[nxt], parent[nxt] = g + 1, (cur, tile)
                heapq.heappush(queue, (f, g + 1, nxt))
    return None


def rows(state):
    return "\n".join("  " + " ".join(str(t) if t else "_" for t in state[r * 3:r * 3 + 3])
                     for r in range(3))


class SlidingPuzzleEnv(GameEnv):
    """3x3 sliding-tile puzzle scrambled a level's number of optimal slides from the goal."""

    LEVELS = 5

    def setup(self, rng):
        """Draw where the goal's empty square is, then scramble by a random walk of the empty
        square until a shortest solution has the level's number of slides (never more than
        max_turns)."""
        least, most = LEVEL_DEPTHS[self.level]
        most = max(1, min(most, self.max_turns))
        least = min(least, most)
        self.goal = goal_with_blank(rng.randrange(9))
        while True:
            state, previous = self.goal, None
            for _ in range(rng.randint(least, most + 10)):
                options = [s for _, s in neighbours(state) if s != previous]
                previous, state = state, rng.choice(options)
            plan = solve(state, self.goal, most)
            if plan is not None and len(plan) >= least:
                self.state = state
                return

    def movable(self):
        return sorted(tile for tile, _ in neighbours(self.state))

    def task(self):
        return (
            "Slide the tiles of the tray until it matches the goal.\n"
            f"Tray now (_ is the empty square):\n{rows(self.state)}\n"
            f"Goal:\n{rows(self.goal)}\n"
            "A move slides one tile that is next to the empty square (above, below, left or right "
            "of it) into the empty square; the tile's old place becomes empty. Tiles you can "
            f"slide now: {', '.join(map(str, self.movable()))}. A move is the tile's number."
            + self._pointer()
        )

    def _pointer(self):
        """Levels 1 and 2: where the tile to slide is, while one slide (level 1 and 2) or two
        (level 2) reach the goal: the square of the first tile of two, or the goal's empty square
        for the last."""
        if self.level > 2 or self.state == self.goal:
            return ""
        plan = solve(self.state, self.goal, self.level)
        if not plan:
            return ""
        if len(plan) == 2:
            r, c = divmod(self.state.index(plan[0]), 3)
            return (f"\nTwo slides solve it. First slide the tile at row {r + 1}, column {c + 1} "
                    f"of the tray; then one slide is left. Which tile is at row {r + 1}, column "
                    f"{c + 1} of the tray?")
        r, c = divmod(self.goal.index(0), 3)
        return (f"\nOne slide solves it: slide the tile that is now where the goal has its empty "
                f"square, at row {r + 1}, column {c + 1}. Which tile is at row {r + 1}, column "
                f"{c + 1} of the tray?")

    def example(self):
        """A movable tile that is not the first slide of a shortest solution."""
        plan = solve(self.state, self.goal) or []
        if self.level == 1:  # a tile that cannot move: copying it changes nothing
            stuck = [t for t in range(1, 9) if t not in self.movable()]
            return str(stuck[0])
        others = [t for t in self.movable() if not plan or t != plan[0]]
        return str(others[0])

    def judge(self, move):
        found = re.fullmatch(r"(?:tile\s*)?(\d+)", move.strip(), re.IGNORECASE)
        if not found:
            return self.INVALID, "That is not a move: write the number of one tile."
        tile = int(found.group(1))
        slides = dict(neighbours(self.state))
        if tile not in slides:
            return self.CONTINUE, (f"Tile {tile} is not next to the empty square, so it cannot "
                                   "move; the tray is unchanged.")
        before = self.state.index(tile)
        way = SIDES[(self.state.index(0) // 3 - before // 3, self.state.index(0) % 3 - before % 3)]
        self.state = slides[tile]
        if self.state == self.goal:
            return self.WIN, f"You slid tile {tile} {way}. The tray matches the goal."
        return self.CONTINUE, f"You slid tile {tile} {way}."

    def solution(self):
        """A shortest sequence of slides from the current tray (A* search)."""
        return [self.box(t) for t in solve(self.state, self.goal)]

    def hint(self):
        plan = solve(self.state, self.goal)
        if not plan:
            return "The tray already matches the goal."
        return (f"The tray can be solved in {len(plan)} slide(s). Compare each square of the tray "
                "with the goal, and move the empty square toward where the goal has it.")

    def info(self):
        return {"turn": self.turn, "level": self.level, "tray": list(self.state)}

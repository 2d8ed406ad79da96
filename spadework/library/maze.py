"""Maze runner: reach the goal through a walled maze shown as a map.

A perfect maze (exactly one route between any two squares) is carved at reset on a grid of
rooms. The whole map is visible: ``#`` walls, ``.`` floor, ``@`` you, ``G`` the goal. A move
names a direction and a number of squares; you walk until you have gone that far or a wall stops
you, and the feedback says how far you got. The route bends many times, so the map must be read,
not guessed.

Action: ``\\boxed{DIRECTION N}`` with DIRECTION one of up, down, left, right (N defaults to 1).
Reward 1.0 on reaching G; truncated after max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import random
import re
from collections import deque

ENV_CLASS = "MazeEnv"
SETTING = "games"
SKILL = "spatial reasoning"

ROOMS_W, ROOMS_H = 6, 5
DIRECTIONS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_ALIASES = {"u": "up", "n": "up", "north": "up", "d": "down", "s": "down", "south": "down",
            "l": "left", "w": "left", "west": "left", "r": "right", "e": "right", "east": "right"}
_MOVE = re.compile(r"^([a-z]+)\s*(\d*)$")


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


def carve(rng, rooms_w, rooms_h):
    """A perfect maze as a list of strings (randomised depth-first carving)."""
    grid = [["#"] * (2 * rooms_w + 1) for _ in range(2 * rooms_h + 1)]
    stack, seen = [(0, 0)], {(0, 0)}
    grid[1][1] = "."
    while stack:
        r, c = stack[-1]
        options = [(r + dr, c + dc) for dr, dc in DIRECTIONS.values()
                   if 0 <= r + dr < rooms_h and 0 <= c + dc < rooms_w and (r + dr, c + dc) not in seen]
        if not options:
            stack.pop()
            continue
        nr, nc = rng.choice(options)
        grid[r + nr + 1][c + nc + 1] = "."
        grid[2 * nr + 1][2 * nc + 1] = "."
        seen.add((nr, nc))
        stack.append((nr, nc))
    return ["".join(row) for row in grid]


def shortest_path(grid, start, goal):
    """Squares from start to goal inclusive, by breadth-first search (None if unreachable)."""
    parent, queue = {start: None}, deque([start])
    while queue:
        cur = queue.popleft()
        if cur == goal:
            path = []
            while cur is not None:
                path.append(cur)
                cur = parent[cur]
            return path[::-1]
        for dr, dc in DIRECTIONS.values():
            nxt = (cur[0] + dr, cur[1] + dc)
            if grid[nxt[0]][nxt[1]] != "#" and nxt not in parent:
                parent[nxt] = cur
                queue.append(nxt)
    return None


def runs(path):
    """Compress a path into (direction, squares) runs."""
    out = []
    for a, b in zip(path, path[1:]):
        name = next(k for k, v in DIRECTIONS.items() if v == (b[0] - a[0], b[1] - a[1]))
        if out and out[-1][0] == name:
            out[-1][1] += 1
        else:
            out.append([name, 1])
    return [(d, n) for d, n in out]


class MazeEnv:
    """Walk from @ to G through a perfect maze with moves of several squares."""

    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        """Carve a maze whose shortest route has 7 to 14 straight legs, and never more than
        max_turns (down to 3 legs for small budgets), so it can always be walked in time."""
        rng = random.Random(0 if seed is None else seed)
        rooms = [(2 * r + 1, 2 * c + 1) for r in range(ROOMS_H) for c in range(ROOMS_W)]
        most = max(3, min(14, self.max_turns))
        least = min(7, most)
        while True:
            grid = carve(rng, ROOMS_W, ROOMS_H)
            start, goal = rng.sample(rooms, 2)
            legs = runs(shortest_path(grid, start, goal))
            if least <= len(legs) <= most:
                break
        self.grid, self.pos, self.goal = grid, start, goal
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("You stand at @ in a maze."), {"position": start, "goal": goal}

    def _render(self, lead):
        rows = []
        for r, row in enumerate(self.grid):
            cells = list(row)
            if r == self.goal[0]:
                cells[self.goal[1]] = "G"
            if r == self.pos[0]:
                cells[self.pos[1]] = "@"
            rows.append("  " + "".join(cells))
        return (
            f"{lead}\n" + "\n".join(rows) + "\n"
            "Legend: # wall, . floor, @ you, G goal. Reach G.\n"
            "Reply with \\boxed{DIRECTION N}: DIRECTION is up, down, left or right and N the number "
            "of squares to walk (default 1); a wall stops you early.\n"
            f"Turns left: {self.max_turns - self.turn}."
        )

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        info = {"turn": self.turn, "position": self.pos}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        match = _MOVE.match((_boxed(action) or "").lower())
        name = _ALIASES.get(match.group(1), match.group(1)) if match else None
        if name not in DIRECTIONS:
            lead = "I could not read a move. Use \\boxed{up 2}, \\boxed{left}, and so on."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        want = int(match.group(2)) if match.group(2) else 1
        dr, dc = DIRECTIONS[name]
        walked = 0
        while walked < want and self.grid[self.pos[0] + dr][self.pos[1] + dc] != "#":
            self.pos = (self.pos[0] + dr, self.pos[1] + dc)
            walked += 1
            if self.pos == self.goal:
                return self._finish("You reach the goal. You win!", 1.0, True, False)
        stopped = " before a wall stopped you" if walked < want else ""
        lead = f"You walked {walked} square(s) {name}{stopped}."
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """The shortest route from the current square, one action per straight leg."""
        return [f"\\boxed{{{d} {n}}}" for d, n in runs(shortest_path(self.grid, self.pos, self.goal))]

    def hint(self):
        legs = runs(shortest_path(self.grid, self.pos, self.goal))
        first = f"{legs[0][0]} {legs[0][1]}" if legs else "none: you are there"
        return (f"The shortest route has {len(legs)} straight legs; the first is {first}. Trace it "
                "backwards from G before you move.")

"""Maze runner: reach the goal through a walled maze shown as a map.

A perfect maze (exactly one route between any two squares) is carved at reset on a grid of
rooms. The whole map is visible: ``#`` walls, ``.`` floor, ``@`` you, ``G`` the goal, and the
task states both positions as row and column. A move names a direction and a number of squares;
you walk until you have gone that far or a wall stops you, and the feedback says where you
stopped.

Levels (the same rules; a bigger maze and a longer route as the level rises):

- 1: 3x3 rooms (a 7x7 map); the goal is 2 squares away (the next room) in a straight open line,
  which the task points out, asking which way it is: one move (the example walks into a wall,
  so copying it costs a turn only);
- 2: 4x3 rooms; the shortest route has 2 or 3 straight legs;
- 3: 5x4 rooms; 4 to 6 legs;
- 4: 6x5 rooms (13x11 map); 7 to 14 legs, the route bends many times.

The route never has more legs than ``max_turns`` (down to 1 leg), so solution() walks it in time.

Action: ``\\boxed{DIRECTION N}`` with DIRECTION one of up, down, left, right and N the squares to
walk (N defaults to 1), e.g. ``\\boxed{right 2}``. Reward 1.0 on reaching G; truncated after
max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import re
from collections import deque

from gameenv import GameEnv

ENV_CLASS = "MazeEnv"
SETTING = "games"
SKILL = "spatial reasoning"

#: Per level: (rooms wide, rooms high, fewest legs, most legs) of the shortest route.
LEVEL_SHAPES = {1: (3, 3, 1, 1), 2: (4, 3, 2, 3), 3: (5, 4, 4, 6), 4: (6, 5, 7, 14)}
DIRECTIONS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_ALIASES = {"u": "up", "n": "up", "north": "up", "d": "down", "s": "down", "south": "down",
            "l": "left", "w": "left", "west": "left", "r": "right", "e": "right", "east": "right"}
_MOVE = re.compile(r"^(?:go\s+|walk\s+|move\s+)?([a-z]+)\s*(\d*)(?:\s*squares?)?$")


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


class MazeEnv(GameEnv):
    """Walk from @ to G through a perfect maze with moves of several squares."""

    LEVELS = 4

    def setup(self, rng):
        """Carve a maze of the level's size whose shortest route has the level's number of
        straight legs, never more than max_turns, so it can always be walked in time. The route
        is at least twice the level's fewest legs long in squares (as far as its legs allow):
        a level cut short by max_turns keeps long legs, so another maze's route replayed here
        rarely passes G by chance."""
        rooms_w, rooms_h, least, most = LEVEL_SHAPES[self.level]
        most = max(1, min(most, self.max_turns))
        squares = min(2 * least, 4 * most)
        least = min(least, most)
        rooms = [(2 * r + 1, 2 * c + 1) for r in range(rooms_h) for c in range(rooms_w)]
        while True:
            grid = carve(rng, rooms_w, rooms_h)
            for _ in range(20):
                start, goal = rng.sample(rooms, 2)
                path = shortest_path(grid, start, goal)
                legs = runs(path)
                if (least <= len(legs) <= most and len(path) > squares
                        and (len(legs) > 1 or legs[0][1] <= (2 if self.level == 1 else 4))):
                    self.grid, self.pos, self.goal = grid, start, goal
                    return

    # -- what the agent sees ------------------------------------------------------------------

    @staticmethod
    def _where(square):
        return f"row {square[0] + 1}, column {square[1] + 1}"

    def _map(self):
        rows = []
        for r, row in enumerate(self.grid):
            cells = list(row)
            if r == self.goal[0]:
                cells[self.goal[1]] = "G"
            if r == self.pos[0]:
                cells[self.pos[1]] = "@"
            rows.append("  " + "".join(cells))
        return "\n".join(rows)

    def task(self):
        if self.level == 1 and len(runs(shortest_path(self.grid, self.pos, self.goal))) == 1:
            line = "row" if self.pos[0] == self.goal[0] else "column"
            return ("Walk from @ to the goal G.\n" + self._map() + "\n"
                    f"You are at {self._where(self.pos)}; the goal is at {self._where(self.goal)}, "
                    f"in the same {line} with no wall between. Which way is the goal: up, down, "
                    "left or right? Write that direction and the number of squares to walk.")
        return (
            "Walk through the maze from @ to the goal G.\n" + self._map() + "\n"
            "Legend: # wall, . floor, @ you, G goal. Rows are counted from 1 at the top line of "
            "the map, columns from 1 at its left edge.\n"
            f"You are at {self._where(self.pos)}; the goal is at {self._where(self.goal)}.\n"
            "A move is a direction (up, down, left or right) and the number of squares to walk, "
            "such as: left 3. You walk until you have gone that far or a wall stops you; you win "
            "as soon as you step on G."
        )

    def example(self):
        """One square in an open direction that is not where the shortest route starts (a
        legal move that never wins: a route's legs always cover an even number of squares from
        a room, and G is never one square away at reset)."""
        legs = runs(shortest_path(self.grid, self.pos, self.goal))
        first = legs[0][0] if legs else None
        r, c = self.pos
        open_ = [d for d, (dr, dc) in DIRECTIONS.items() if self.grid[r + dr][c + dc] != "#"]
        walls = [d for d in DIRECTIONS if d not in open_]
        if self.level == 1 and walls:  # into a wall: copying it changes nothing
            return f"{walls[0]} 1"
        others = [d for d in open_ if d != first] or open_ or ["up"]
        return f"{others[0]} 1"

    def judge(self, move):
        match = _MOVE.match(move.lower().strip())
        name = _ALIASES.get(match.group(1), match.group(1)) if match else None
        if name not in DIRECTIONS:
            return self.INVALID, ("That is not a move: write a direction (up, down, left or right) "
                                  "and a number of squares.")
        want = int(match.group(2)) if match.group(2) else 1
        if want < 1:
            return self.INVALID, "Walk at least 1 square."
        dr, dc = DIRECTIONS[name]
        walked = 0
        while walked < want and self.grid[self.pos[0] + dr][self.pos[1] + dc] != "#":
            self.pos = (self.pos[0] + dr, self.pos[1] + dc)
            walked += 1
            if self.pos == self.goal:
                return self.WIN, f"You walked {walked} square(s) {name} and reached the goal."
        if walked == 0:
            return self.CONTINUE, f"A wall blocks the way {name}; you stay at {self._where(self.pos)}."
        stopped = f"; a wall stopped you after {walked}" if walked < want else ""
        return self.CONTINUE, (f"You walked {walked} square(s) {name}{stopped}. You are now at "
                               f"{self._where(self.pos)}.")

    def solution(self):
        """The shortest route from the current square, one move per straight leg."""
        return [self.box(f"{d} {n}") for d, n in runs(shortest_path(self.grid, self.pos, self.goal))]

    def hint(self):
        legs = runs(shortest_path(self.grid, self.pos, self.goal))
        if not legs:
            return "You are on the goal."
        return (f"The shortest route has {len(legs)} straight leg(s) and starts by going "
                f"{legs[0][0]}. Trace it backwards from G before you move.")

    def info(self):
        return {"turn": self.turn, "level": self.level, "position": self.pos}

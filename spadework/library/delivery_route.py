"""Delivery route: find the shortest route from the depot through every stop.

A courier leaves the depot and must visit every stop once; the day ends at the last stop (there
is no way back to count). Stops sit on a city grid, travel is measured in blocks (Manhattan
distance), and the task lists the blocks between every two places. You propose a visiting order;
the reply gives its length and how much longer it is than the shortest possible route.

Levels (the same rules; more stops on a bigger map as the level rises):

- 1: 2 stops on a 6x6 map: visit the one nearer the depot first (exactly one order wins); the
  task gives the stops' distances from the depot and says so, without the map;
- 2: 3 stops on a 6x6 map, deals where going on to the nearest stop not yet visited is the one
  shortest route; the task gives the blocks between places and says so, without the map (the
  rung between a rule stated for two stops and a route found);
- 3: 3 stops on an 8x8 map;
- 4: 5 stops on a 10x10 map;
- 5: 7 stops on a 10x10 map (5040 orders).

From level 2 on, deals where the stops' own numbering is a shortest route are redrawn, so the
order 1 2 3 ... (the example move) never wins.

Action: ``\\boxed{a b c}``, every stop number once in visiting order, separated by spaces, e.g.
``\\boxed{1 2 3}``. Reward 1.0 for a shortest route; truncated after max_turns replies. One
move wins at every level, so the instance does not depend on max_turns. ``reset(seed=None)``
plays seed 0.
"""

import itertools
import re

from gameenv import GameEnv

ENV_CLASS = "DeliveryRouteEnv"
SETTING = "games"
SKILL = "optimization"

#: Per level: (stops, side of the square map).
LEVEL_SHAPES = {1: (2, 6), 2: (3, 6), 3: (3, 8), 4: (5, 10), 5: (7, 10)}


def blocks(a, b):
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _blocks_text(k):
    return f"{k} block" if k == 1 else f"{k} blocks"


def route_length(points, order):
    """Blocks travelled from the depot (points[0]) through points[order...], ending there."""
    route = [0] + list(order)
    return sum(blocks(points[a], points[b]) for a, b in zip(route, route[1:]))


def shortest_routes(points):
    """(length, every order of that length), by trying every order of the stops."""
    best, orders = None, []
    for order in itertools.permutations(range(1, len(points))):
        length = route_length(points, order)
        if best is None or length < best:
            best, orders = length, [order]
        elif length == best:
            orders.append(order)
    return best, orders


def nearest_first(points):
    """The order that goes on from the depot to the nearest stop not yet visited each time, or
    None when two stops tie at some step (the rule would not say which)."""
    here, left, order = 0, set(range(1, len(points))), []
    while left:
        gaps = sorted((blocks(points[here], points[j]), j) for j in left)
        if len(gaps) > 1 and gaps[0][0] == gaps[1][0]:
            return None
        here = gaps[0][1]
        order.append(here)
        left.remove(here)
    return tuple(order)


class DeliveryRouteEnv(GameEnv):
    """Shortest open route from a depot through every stop on a grid, with the gap to the
    optimum as feedback."""

    LEVELS = 5

    def setup(self, rng):
        n, side = LEVEL_SHAPES[self.level]
        cells = [(x, y) for x in range(side) for y in range(side)]
        plain = tuple(range(1, n + 1))
        while True:
            points = rng.sample(cells, n + 1)
            best, orders = shortest_routes(points)
            if self.level == 2 and (len(orders) != 1 or nearest_first(points) != orders[0]):
                continue
            if n == 2 and len(orders) == 1 or n > 2 and plain not in orders:
                break
        self.points, self.best, self.order = points, best, orders[0]
        self.stops = n

    def _map(self):
        side = LEVEL_SHAPES[self.level][1]
        grid = [["."] * side for _ in range(side)]
        for i, (x, y) in enumerate(self.points):
            grid[y][x] = "D" if i == 0 else str(i)
        return "\n".join("  " + "".join(row) for row in grid)

    def task(self):
        if self.stops == 2:
            return self._task_two()
        if self.level == 2:
            return self._task_nearest()
        n = self.stops
        names = ["the depot"] + [f"stop {i}" for i in range(1, n + 1)]
        stops = "1 and 2" if n == 2 else f"1 to {n}"
        where = "; ".join(f"{names[i]} at x={x}, y={y}" for i, (x, y) in enumerate(self.points))
        pts = self.points
        table = "\n".join(
            f"  from {names[i]}: " + ", ".join(f"{_blocks_text(blocks(pts[i], pts[j]))} to {names[j]}"
                                               for j in range(i + 1, n + 1))
            for i in range(n))
        return (
            f"A courier leaves the depot D and must visit each of the stops {stops} once. The "
            "route ends at the last stop visited (there is no return trip). Find a shortest "
            "route.\n"
            f"City map (D depot, digits are stops, x grows to the right, y grows downwards):\n"
            f"{self._map()}\n{where[0].upper()}{where[1:]}.\n"
            "Distance is in blocks, |x1-x2| + |y1-y2|. Blocks between places:\n"
            f"{table}\n"
            f"A move is the {n} stop numbers in visiting order, separated by spaces, each stop "
            "exactly once."
        )

    def _task_two(self):
        """Level 1: two stops; the nearer one first is the shortest route, as the task says."""
        pts = self.points
        return (f"A courier visits stop 1 and stop 2. Stop 1 is "
                f"{_blocks_text(blocks(pts[0], pts[1]))} from the depot and stop 2 is "
                f"{_blocks_text(blocks(pts[0], pts[2]))} from the depot. The shortest route visits "
                "the nearer stop first. Which stop is nearer the depot? Write the 2 stop numbers in "
                "visiting order.")

    def _task_nearest(self):
        """Level 2: three stops, the blocks between places, and the nearest-first rule, which
        gives the one shortest route of these deals."""
        pts, n = self.points, self.stops
        names = ["the depot"] + [f"stop {i}" for i in range(1, n + 1)]
        legs = "\n".join(f"  {names[i]} to {names[j]}: {_blocks_text(blocks(pts[i], pts[j]))}"
                         for i in range(n) for j in range(i + 1, n + 1))
        return (f"A courier leaves the depot and visits stops 1 to {n}, each once; the route ends "
                f"at the last stop. Blocks between places:\n{legs}\n"
                "Here the shortest route goes to the stop nearest the depot first, then each "
                f"time to the nearest stop not yet visited. Write the {n} stop numbers in visiting "
                "order.")

    def example(self):
        """The numbering order (never a shortest route from level 2 on), or at level 1 the
        order that is not the shortest."""
        if self.stops == 2:
            return " ".join(map(str, self.order[::-1]))
        return " ".join(str(i) for i in range(1, self.stops + 1))

    def judge(self, move):
        if not re.fullmatch(r"[\d\s,>-]+", move):
            return self.INVALID, (f"That is not a route: write the stop numbers 1 to {self.stops} "
                                  "in visiting order, separated by spaces.")
        order = [int(x) for x in re.findall(r"\d+", move)]
        if sorted(order) != list(range(1, self.stops + 1)):
            return self.INVALID, f"A route lists each of the stops 1 to {self.stops} exactly once."
        length = route_length(self.points, order)
        route = " ".join(map(str, order))
        if length == self.best:
            return self.WIN, f"Route {route} takes {length} blocks, the shortest possible."
        return self.CONTINUE, (f"Route {route} takes {length} blocks; the shortest route is "
                               f"{length - self.best} blocks shorter.")

    def solution(self):
        """A shortest route, by exhaustive search over visiting orders of the shown stops."""
        return self.box(" ".join(map(str, self.order)))

    def hint(self):
        return (f"A shortest route takes {self.best} blocks. Start with a stop near the depot, "
                "go on to the nearest stop not yet visited, and avoid legs that cross.")

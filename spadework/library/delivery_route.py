"""Delivery route: find the shortest round trip through seven stops.

A courier leaves the depot, must visit seven stops once each, and return. Stops sit on a city
grid, and travel is measured in blocks (Manhattan distance). You propose a visiting order; the
reply gives its length and how much longer it is than the shortest possible tour. Deals where
the stops' numbering (or its reverse) is already optimal are redrawn.

Action: ``\\boxed{a b c d e f g}``, the seven stop numbers in visiting order (each once). Reward
1.0 for a shortest tour (either direction); truncated after max_turns replies.
``reset(seed=None)`` plays seed 0.
"""

import itertools
import random
import re

ENV_CLASS = "DeliveryRouteEnv"
SETTING = "games"
SKILL = "optimization"

N_STOPS = 7
GRID = 10


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


def tour_length(points, order):
    """Blocks travelled from the depot (points[0]) through points[order...] and back."""
    route = [0] + list(order) + [0]
    return sum(abs(points[a][0] - points[b][0]) + abs(points[a][1] - points[b][1])
               for a, b in zip(route, route[1:]))


def shortest_tour(points):
    """(length, order) of a shortest tour, by trying every order of the stops."""
    best = None
    for order in itertools.permutations(range(1, len(points))):
        if order[0] > order[-1]:
            continue  # a tour and its reverse have the same length
        length = tour_length(points, order)
        if best is None or length < best[0]:
            best = (length, order)
    return best


class DeliveryRouteEnv:
    """Seven-stop travelling-salesman tour on a grid, with the gap to the optimum as feedback."""

    def __init__(self, max_turns=6, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        cells = [(x, y) for x in range(GRID) for y in range(GRID)]
        while True:
            points = rng.sample(cells, N_STOPS + 1)
            best, order = shortest_tour(points)
            plain = tuple(range(1, N_STOPS + 1))
            if tour_length(points, plain) > best:
                break
        self.points, self.best, self.order = points, best, order
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("A new delivery run."), {"stops": N_STOPS}

    def _render(self, lead):
        grid = [["." for _ in range(GRID)] for _ in range(GRID)]
        for i, (x, y) in enumerate(self.points):
            grid[y][x] = "D" if i == 0 else str(i)
        rows = "\n".join("  " + " ".join(row) for row in grid)
        where = ", ".join(f"{i}=({x},{y})" for i, (x, y) in enumerate(self.points) if i)
        dx, dy = self.points[0]
        return (
            f"{lead}\nCity map (D depot, 1-{N_STOPS} stops, x to the right, y downwards):\n{rows}\n"
            f"Depot at ({dx},{dy}); stops: {where}.\n"
            "Distance is in blocks: |x1-x2| + |y1-y2|. Start and end at the depot and visit every "
            "stop once; find a shortest tour.\n"
            f"Reply with \\boxed{{...}} holding all {N_STOPS} stop numbers in visiting order, "
            "separated by spaces.\n"
            f"Turns left: {self.max_turns - self.turn}."
        )

    def _finish(self, obs, reward, terminated, truncated):
        self.done = terminated or truncated
        self.truncated = truncated
        return obs, float(reward), bool(terminated), bool(truncated), {"turn": self.turn}

    def step(self, action):
        if self.done:
            return self._finish("The game is over; call reset() to play again.", 0.0,
                                not self.truncated, self.truncated)
        self.turn += 1
        out_of_turns = self.turn >= self.max_turns
        move = _boxed(action)
        order = [int(x) for x in re.findall(r"\d+", move)] if move and re.fullmatch(r"[\d\s,>-]+", move) else []
        if sorted(order) != list(range(1, N_STOPS + 1)):
            lead = f"A route lists each of the stops 1 to {N_STOPS} exactly once, e.g. in \\boxed{{...}}."
            return self._finish(self._render(lead), 0.0, False, out_of_turns)
        length = tour_length(self.points, order)
        route = " ".join(map(str, order))
        if length == self.best:
            return self._finish(f"Route {route} takes {length} blocks, the shortest possible. You win!",
                                1.0, True, False)
        lead = f"Route {route} takes {length} blocks; the shortest tour is {length - self.best} blocks shorter."
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """A shortest tour, by exhaustive search over visiting orders."""
        return "\\boxed{" + " ".join(map(str, self.order)) + "}"

    def hint(self):
        return (f"A shortest tour takes {self.best} blocks and visits stop {self.order[0]} or stop "
                f"{self.order[-1]} first. Avoid routes whose legs cross.")

"""Grid walk: where does a robot end after a few moves? Levels add moves."""

from gameenv import GameEnv

ENV_CLASS = "GridWalkEnv"
SETTING = "games"
SKILL = "spatial reasoning"

STEPS = {"right": (1, 0), "left": (-1, 0), "up": (0, 1), "down": (0, -1)}


class GridWalkEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.start = (rng.randint(3, 6), rng.randint(3, 6))
        self.moves = [(rng.choice(sorted(STEPS)), rng.randint(1, 3)) for _ in range(self.level + 1)]
        x, y = self.start
        for way, n in self.moves:
            x, y = x + n * STEPS[way][0], y + n * STEPS[way][1]
        self.end = (x, y)

    def task(self):
        walk = ", then ".join(f"{n} {way}" for way, n in self.moves)
        return (f"A robot stands at x={self.start[0]}, y={self.start[1]}. Right adds to x, up adds "
                f"to y. It moves {walk}. Where does it end? Answer as x y, two numbers.")

    def example(self):
        return f"{self.start[0]} {self.start[1] + 10}"

    def judge(self, move):
        parts = move.replace(",", " ").split()
        if len(parts) != 2 or not all(p.lstrip("-").isdigit() for p in parts):
            return self.INVALID, f"{move} is not two numbers x y."
        x, y = int(parts[0]), int(parts[1])
        if (x, y) == self.end:
            return self.WIN, "The robot ends there."
        right = [name for name, got, want in (("x", x, self.end[0]), ("y", y, self.end[1]))
                 if got == want]
        return self.CONTINUE, (f"Not there; {' and '.join(right)} is right." if right
                               else "Not there; both x and y are wrong.")

    def solution(self):
        return self.box(f"{self.end[0]} {self.end[1]}")

    def hint(self):
        return "Apply the moves one at a time and keep track of x and y."

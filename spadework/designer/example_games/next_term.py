"""Next term: continue a number pattern. Levels go from a fixed step to a growing one."""

from gameenv import GameEnv

ENV_CLASS = "NextTermEnv"
SETTING = "games"
SKILL = "pattern recognition"


class NextTermEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        term, step = rng.randint(1, 20), rng.randint(2, 9)
        self.terms = []
        for _ in range(5):
            self.terms.append(term)
            term += step
            if self.level == 2:
                step += 1
            if self.level == 3:
                step *= 2
        self.answer = term

    def task(self):
        shown = ", ".join(str(t) for t in self.terms)
        return f"What number comes next: {shown}, ...? Answer with a whole number."

    def example(self):
        return str(self.terms[-1])

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.answer:
            return self.WIN, "That continues the pattern."
        if int(move) > self.answer:
            return self.CONTINUE, f"{move} is too high."
        return self.CONTINUE, f"{move} is too low."

    def solution(self):
        return self.box(self.answer)

    def hint(self):
        return "Look at the differences between neighbouring numbers."

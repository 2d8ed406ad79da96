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

    def hint(self):
        return "Look at the differences between neighbouring numbers."

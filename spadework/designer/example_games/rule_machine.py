"""Rule machine: find the rule from input/output pairs and apply it. Levels make the rule harder."""

from gameenv import GameEnv

ENV_CLASS = "RuleMachineEnv"
SETTING = "games"
SKILL = "causal inference"


class RuleMachineEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.times = 1 if self.level == 1 else rng.randint(2, 3 + self.level)
        self.plus = rng.randint(1, 9)
        self.inputs = rng.sample(range(1, 10), 3)
        self.answer = self.times * self.inputs[-1] + self.plus

    def task(self):
        seen = ", ".join(f"{x} gives {self.times * x + self.plus}" for x in self.inputs[:2])
        return (f"A machine turns each number it gets into another by one fixed rule: {seen}. "
                f"What does {self.inputs[-1]} give? Answer with a whole number.")

    def hint(self):
        return "Compare how much the outputs differ with how much the inputs differ."

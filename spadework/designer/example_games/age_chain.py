"""Age chain: follow older/younger statements from one known age. Levels make the chain longer."""

from gameenv import GameEnv

ENV_CLASS = "AgeChainEnv"
SETTING = "games"
SKILL = "logical deduction"


class AgeChainEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.people = rng.sample(["Ann", "Ben", "Cara", "Dev", "Eli", "Fay"], self.level + 1)
        self.ages = [rng.randint(20, 40)]
        self.facts = []
        for older, younger in zip(self.people[1:], self.people):
            gap = rng.randint(2, 9)
            if rng.random() < 0.5:
                gap = -gap
            self.ages.append(self.ages[-1] + gap)
            word = "older" if gap > 0 else "younger"
            self.facts.append(f"{older} is {abs(gap)} years {word} than {younger}.")
        self.answer = self.ages[-1]

    def task(self):
        return (f"{self.people[0]} is {self.ages[0]} years old. " + " ".join(self.facts)
                + f" How old is {self.people[-1]}? Answer with a whole number.")

    def hint(self):
        return "Go through the statements in order: add the years for older, subtract for younger."

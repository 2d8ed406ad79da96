"""Age chain: follow older/younger statements from one known age. Levels make the chain longer."""

from gameenv import GameEnv

ENV_CLASS = "AgeChainEnv"
SETTING = "games"
SKILL = "logical deduction"

NAMES = ("Ann", "Ben", "Cara", "Dev", "Eli", "Fay")


class AgeChainEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.people = rng.sample(NAMES, self.level + 1)
        self.ages = [rng.randint(20, 40)]
        self.facts = []
        for older, younger in zip(self.people[1:], self.people):
            gap = rng.randint(2, 9)
            if rng.random() < 0.5:
                gap = -gap
            self.ages.append(self.ages[-1] + gap)
            word = "older" if gap > 0 else "younger"
            self.facts.append(f"{older} is {abs(gap)} years {word} than {younger}.")

    def task(self):
        return (f"{self.people[0]} is {self.ages[0]} years old. " + " ".join(self.facts)
                + f" How old is {self.people[-1]}? Answer with a whole number.")

    def example(self):
        first = self.ages[0]
        return str(first if first != self.ages[-1] else first + 1)

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.ages[-1]:
            return self.WIN, f"{self.people[-1]} is {move}."
        if int(move) > self.ages[-1]:
            return self.CONTINUE, f"{move} is too old."
        return self.CONTINUE, f"{move} is too young."

    def solution(self):
        return self.box(self.ages[-1])

    def hint(self):
        return "Go through the statements in order: add the years for older, subtract for younger."

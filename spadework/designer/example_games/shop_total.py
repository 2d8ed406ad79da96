"""Shop total: add up a short bill. Levels add items and raise the prices."""

from gameenv import GameEnv

ENV_CLASS = "ShopTotalEnv"
SETTING = "games"
SKILL = "mathematical reasoning"


class ShopTotalEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        names = rng.sample(["apples", "pears", "eggs", "rolls", "lemons", "plums"], self.level + 1)
        self.bill = [(name, rng.randint(2, 5), rng.randint(1, 4 * self.level)) for name in names]
        self.answer = sum(count * price for _, count, price in self.bill)

    def task(self):
        items = ", ".join(f"{count} {name} at {price} coins each" for name, count, price in self.bill)
        return f"You buy {items}. How many coins do you pay in all? Answer with a whole number."

    def hint(self):
        return "Multiply each count by its price, then add the results."

"""Ride tickets: the cheapest way to pay for a number of rides. Levels add ticket kinds."""

from gameenv import GameEnv

ENV_CLASS = "RideTicketsEnv"
SETTING = "games"
SKILL = "optimization"


class RideTicketsEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.rides = rng.randint(3, 6 * self.level)
        single = rng.randint(2, 5)
        self.tickets = [(1, single), (5, 5 * single - rng.randint(1, 5))]
        if self.level == 3:
            self.tickets.append((10, 2 * self.tickets[1][1] - rng.randint(1, 5)))
        if self.level == 1:
            self.tickets = [(1, single), (3, 3 * single - rng.randint(1, 2))]
        best = [0] + [None] * self.rides
        for n in range(1, self.rides + 1):
            best[n] = min(price + best[max(0, n - size)] for size, price in self.tickets)
        self.answer = best[self.rides]

    def task(self):
        kinds = "; ".join(f"a ticket for {size} ride{'s' if size > 1 else ''} costs {price} coins"
                          for size, price in self.tickets)
        return (f"You need {self.rides} rides. {kinds}. You may buy any tickets and need not use "
                "every ride. What is the least you can pay? Answer with a whole number.")

    def example(self):
        return str(self.rides * self.tickets[0][1] + 1)

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.answer:
            return self.WIN, "That is the least you can pay."
        if int(move) > self.answer:
            return self.CONTINUE, f"You can pay less than {move}."
        return self.CONTINUE, f"No tickets for {self.rides} rides cost as little as {move}."

    def solution(self):
        return self.box(self.answer)

    def hint(self):
        return "Compare the price per ride of each ticket, then check what is left over."

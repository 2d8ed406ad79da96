"""Garden trial: measure causal effects by experiment, not from a confounded log.

Plant growth depends on a few treatments (drawn from water, fertilizer, compost and music), each
on or off, and in the open garden also on sunshine, which nobody recorded. A gardener's log of
past beds is shown, but on sunny days the gardener liked to switch one treatment on, so the log
credits it with the sun's work (half the time that treatment does nothing at all). In the
greenhouse the sun is held constant, and each experiment you run there reports the growth of a
bed treated exactly as you say; the control bed (nothing on) has already been grown. Find the
effect of each treatment: how much growth changes when it alone is switched on. One answer only
(above level 1).

Levels (the same rules; more treatments to measure as the level rises):

- 1: one treatment that helps (an effect of 1 to 9), and its greenhouse bed has been grown too:
  the effect is the difference of the two greenhouse beds, as the task says (one move; no log
  is shown). The example move is an answer (0, never the effect), a wrong answer is told which
  way it is off and may be tried again, and a worked difference (``11 - 8 = 3``) is read as
  answering its result: the base 0.5B agent copied the former example, ``test 0``, every turn
  (0 wins in 20 plays);
- 2: two treatments; 3: three; 4: all four (four experiments, then the answer).

The number of treatments is capped so that their experiments and the answer fit in max_turns
(two treatments at max_turns 3, three at 4).

Actions: ``\\boxed{test 1 0}`` with one 0/1 flag per treatment, in the order listed, grows a
greenhouse bed; ``\\boxed{answer 3 -2}`` gives the effects in the same order (whole numbers,
possibly zero or negative). Reward 1.0 for the right effects, 0.0 (terminated) for wrong ones;
truncated after max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import re

from gameenv import GameEnv

ENV_CLASS = "GardenTrialEnv"
SETTING = "games"
SKILL = "causal inference"

TREATMENTS = ("water", "fertilizer", "compost", "music")
#: Per level: (treatments, rows of the gardener's log).
LEVEL_SHAPES = {1: (1, 0), 2: (2, 4), 3: (3, 5), 4: (4, 6)}
EFFECTS = [e for e in range(-5, 13) if e]
_TEST = re.compile(r"test\s*:?\s*([01](?:[\s,]*[01])*)")
_ANSWER = re.compile(r"(?:answer\s*:?\s*)?([-+]?\d+(?:[\s,]+[-+]?\d+)*)")
_WORKED = re.compile(r"(?:answer\s*:?\s*)?\d+\s*-\s*\d+\s*=\s*([-+]?\d+)")


class GardenTrialEnv(GameEnv):
    """Linear model with a hidden confounder; greenhouse experiments identify the effects."""

    LEVELS = 4

    def setup(self, rng):
        wanted, log_rows = LEVEL_SHAPES[self.level]
        # Level 1 (and any level at max_turns 1) shows the treatment's bed too: answer at once.
        shown = self.level == 1 or self.max_turns < 2
        n = 1 if shown else max(1, min(wanted, self.max_turns - 1))
        picked = set(rng.sample(range(len(TREATMENTS)), n))
        self.treatments = [t for k, t in enumerate(TREATMENTS) if k in picked]
        self.decoy = rng.randrange(n)
        # The decoy is often useless (the log credits it with the sun's work); with one
        # treatment it always has an effect, so the answer is never a given 0.
        self.effects = [rng.choice(EFFECTS if self.level > 1 else range(1, 10)) for _ in range(n)]
        if n > 1 and rng.random() < 0.5:
            self.effects[self.decoy] = 0
        self.base = rng.randint(5, 12)
        self.sun_effect = rng.randint(4, 8)
        self.log = []
        for _ in range(log_rows):
            sunny = rng.random() < 0.5
            flags = [rng.random() < 0.5 for _ in range(n)]
            flags[self.decoy] = sunny if rng.random() < 0.85 else not sunny
            self.log.append((flags, self.growth(flags) + (self.sun_effect if sunny else 0)))
        beds = [[False] * n] + ([[True]] if shown else [])
        self.tests = [(flags, self.growth(flags)) for flags in beds]

    def growth(self, flags):
        return self.base + sum(e for e, on in zip(self.effects, flags) if on)

    # -- what the agent sees ------------------------------------------------------------------

    def _table(self, rows):
        header = "  " + " ".join(self.treatments) + " -> growth"
        lines = ["  " + " ".join(f"{int(f):>{len(t)}}" for f, t in zip(flags, self.treatments))
                 + f" -> {growth}" for flags, growth in rows]
        return "\n".join([header] + lines)

    def task(self):
        if self.level == 1:
            return self._task_one()
        n = len(self.treatments)
        order = ", ".join(self.treatments)
        flags = " ".join(["0"] * (n - 1) + ["1"])
        if n == 1:
            what = (f"Plant growth depends on one treatment, {order}, switched on (1) or off (0). "
                    "Find its effect: how much the growth changes when it is switched on.")
            moves = (f"test followed by one 0/1 flag (such as: test {flags}) grows one more "
                     "greenhouse bed; answer followed by one whole number gives the effect.")
        else:
            names = ", ".join(self.treatments[:-1]) + " and " + self.treatments[-1]
            what = (f"Plant growth depends on {n} treatments, {names}, each switched on (1) or "
                    "off (0). Find each treatment's effect: how much the growth changes when "
                    "that treatment alone is switched on.")
            moves = (f"test followed by one 0/1 flag per treatment in the order {order} (such "
                     f"as: test {flags}) grows one more greenhouse bed; answer followed by one "
                     f"whole number per treatment in the order {order} gives the effects.")
        return (
            f"{what}\n"
            "In the open garden growth also depends on sunshine, which nobody recorded, and the "
            "gardener chose treatments by the weather, so the log can mislead. In the greenhouse "
            "the sun is the same for every bed: a bed there grows by exactly the effects of the "
            "treatments it gets.\n"
            f"Gardener's log (open garden, sunshine not recorded):\n{self._table(self.log)}\n"
            f"Greenhouse beds so far:\n{self._table(self.tests)}\n"
            f"Moves: {moves} You may answer only once: a wrong answer loses."
        )

    def _task_one(self):
        """Level 1: one treatment, both greenhouse beds grown; the effect is their difference."""
        name = self.treatments[0]
        on = next(g for f, g in self.tests if f[0])
        off = next(g for f, g in self.tests if not f[0])
        return (f"In the greenhouse a bed with {name} grew {on} and a bed without {name} grew "
                f"{off}. The effect of {name} is how much more the bed with it grew: {on} minus "
                f"{off}. What is {on} minus {off}? Write answer and that number.")

    def example(self):
        if self.level == 1:  # the answer's form, not the answer (the effect is never 0)
            return "answer 0"
        return "test " + " ".join(["1"] + ["0"] * (len(self.treatments) - 1))

    def judge(self, move):
        n = len(self.treatments)
        text = move.lower().strip()
        worked = _WORKED.fullmatch(text)
        if worked and n == 1:  # "8 - 7 = 1": the difference worked out, read as answering it
            text = "answer " + worked.group(1)
        test, answer = _TEST.fullmatch(text), _ANSWER.fullmatch(text)
        if answer:
            named = [int(x) for x in re.findall(r"[-+]?\d+", answer.group(1))]
            if len(named) != n:
                return self.INVALID, (f"An answer gives {n} effect(s), one per treatment, not "
                                      f"{len(named)}.")
            if named == self.effects:
                return self.WIN, "Those are the effects."
            if self.level == 1:
                on, off = (next(g for f, g in self.tests if f[0] == lit) for lit in (True, False))
                more = "more" if named[0] < self.effects[0] else "less"
                return self.CONTINUE, (f"{named[0]} is not the effect: {on} minus {off} is {more} "
                                       f"than {named[0]}.")
            return self.LOSE, "Those are not the effects."
        if test:
            flags = [f == "1" for f in re.findall(r"[01]", test.group(1))]
            if len(flags) != n:
                return self.INVALID, (f"A test gives {n} flag(s) of 0 or 1, one per treatment, "
                                      f"not {len(flags)}.")
            self.tests.append((flags, self.growth(flags)))
            on = [t for t, f in zip(self.treatments, flags) if f]
            return self.CONTINUE, (f"The greenhouse bed with {' and '.join(on) or 'nothing'} on "
                                   f"grew {self.tests[-1][1]}.")
        return self.INVALID, ("That is not a move: write test and the 0/1 flags, or answer and "
                              "the effects.")

    def solution(self):
        """Play as an agent would from the greenhouse beds shown so far: grow the control bed
        and a bed with each treatment alone, when not yet grown, then answer the differences
        (the beds' growth is what the greenhouse would report, so every move follows from what
        the agent has seen)."""
        n = len(self.treatments)
        known = {tuple(flags): growth for flags, growth in self.tests}
        beds = [tuple([False] * n)] + [tuple(k == i for k in range(n)) for i in range(n)]
        moves = []
        for bed in beds:
            if bed not in known:
                known[bed] = self.growth(bed)
                moves.append(self.box("test " + " ".join(str(int(f)) for f in bed)))
        control = known[beds[0]]
        effects = [known[bed] - control for bed in beds[1:]]
        return moves + [self.box("answer " + " ".join(map(str, effects)))]

    def hint(self):
        return (f"The log is confounded: {self.treatments[self.decoy]} was mostly switched on "
                "when the sun shone. Compare greenhouse beds that differ in one treatment only.")

    def info(self):
        return {"turn": self.turn, "level": self.level, "treatments": list(self.treatments)}

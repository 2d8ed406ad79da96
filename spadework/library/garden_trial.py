"""Garden trial: measure causal effects by experiment, not from a confounded log.

Plant growth depends on four treatments (water, fertilizer, compost, music), each on or off, and
in the open garden also on sunshine, which nobody recorded. A gardener's log of past beds is shown,
but on sunny days the gardener liked to switch one treatment on, so the log credits it with the
sun's work. In the greenhouse the sun is held constant, and each experiment you run there reports
the growth of a bed treated exactly as you say. Find the effect of each treatment: how much
growth changes when it alone is switched on. One answer only.

Actions: ``\\boxed{test w f c m}`` with four 0/1 flags runs a greenhouse bed;
``\\boxed{answer ew ef ec em}`` gives the four effects (integers, possibly zero or negative).
Reward 1.0 for the right effects, 0.0 (terminated) for wrong ones; truncated after max_turns
replies. ``reset(seed=None)`` plays seed 0.
"""

import random
import re

ENV_CLASS = "GardenTrialEnv"
SETTING = "games"
SKILL = "causal inference"

TREATMENTS = ("water", "fertilizer", "compost", "music")
LOG_ROWS = 6


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


class GardenTrialEnv:
    """Linear structural model with a hidden confounder; interventions identify the effects."""

    def __init__(self, max_turns=8, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        while True:
            effects = [rng.choice([0, 0, -3, -2, -1, 1, 2, 3, 4, 5]) for _ in TREATMENTS]
            if 2 <= sum(e != 0 for e in effects) <= 3:
                break
        self.effects = effects
        self.base = rng.randint(5, 12)
        self.sun_effect = rng.randint(4, 8)
        self.decoy = rng.choice([k for k, e in enumerate(effects) if e == 0])
        self.log = []
        for _ in range(LOG_ROWS):
            sunny = rng.random() < 0.5
            flags = [rng.random() < 0.5 for _ in TREATMENTS]
            flags[self.decoy] = sunny if rng.random() < 0.85 else not sunny
            growth = self._growth(flags) + (self.sun_effect if sunny else 0)
            self.log.append((flags, growth))
        self.tests = []
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("The trial begins."), {"treatments": list(TREATMENTS)}

    def _growth(self, flags):
        return self.base + sum(e for e, on in zip(self.effects, flags) if on)

    @staticmethod
    def _row(flags, growth):
        return "  " + " ".join(f"{int(f):>{len(n)}}" for f, n in zip(flags, TREATMENTS)) + f"  -> {growth}"

    def _render(self, lead):
        header = "  " + " ".join(TREATMENTS) + "  -> growth"
        lines = [lead, "Gardener's log (open garden; sunshine not recorded):", header]
        lines += [self._row(f, g) for f, g in self.log]
        if self.tests:
            lines += ["Your greenhouse experiments:", header]
            lines += [self._row(f, g) for f, g in self.tests]
        lines += [
            "Find each treatment's effect: the change in growth when it alone is switched on.",
            "Actions: \\boxed{test w f c m} with four 0/1 flags (water, fertilizer, compost, music) "
            "runs a greenhouse bed; \\boxed{answer ew ef ec em} gives the four effects as integers "
            "(one answer only; a wrong answer loses).",
            f"Turns left: {self.max_turns - self.turn}.",
        ]
        return "\n".join(lines)

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
        move = (_boxed(action) or "").lower()
        test = re.fullmatch(r"test\s*:?\s*([01])[\s,]*([01])[\s,]*([01])[\s,]*([01])", move)
        answer = re.fullmatch(r"answer\s*:?\s*([-+]?\d+(?:[\s,]+[-+]?\d+){3})", move)
        if answer:
            named = [int(x) for x in re.findall(r"[-+]?\d+", answer.group(1))]
            if named == self.effects:
                return self._finish("Those are the effects. You win!", 1.0, True, False)
            return self._finish("Those are not the effects. You lose.", 0.0, True, False)
        if test:
            flags = [g == "1" for g in test.groups()]
            self.tests.append((flags, self._growth(flags)))
            lead = f"The greenhouse bed grew {self.tests[-1][1]}."
        else:
            lead = "I could not read that. Use \\boxed{test 1 0 0 1} or \\boxed{answer a b c d}."
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """The four effects themselves (computed from the hidden model)."""
        return "\\boxed{answer " + " ".join(map(str, self.effects)) + "}"

    def hint(self):
        return (f"The log is confounded: {TREATMENTS[self.decoy]} was mostly switched on when the sun "
                "shone. Run a bed with nothing on, then switch on one treatment at a time.")

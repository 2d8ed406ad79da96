"""The wiring closet: infer which switch drives each lamp by intervening.

Five switches and four lamps (A to D). Each lamp is wired to exactly one switch, either directly
(on when the switch is up) or inverted (on when it is down); several lamps may share a switch and
some switches drive nothing. The starting positions are a single observation and cannot separate
cause from coincidence: only flipping a switch and watching which lamps change does. Name every
lamp's switch to win; one answer only.

Actions: ``\\boxed{toggle S}`` flips switch S; ``\\boxed{answer a b c d}`` names the switches of
lamps A, B, C, D in order. Reward 1.0 for the right wiring, 0.0 (terminated) for a wrong one;
blind guessing wins about 1 time in 400. ``reset(seed=None)`` plays seed 0.
"""

import random
import re

ENV_CLASS = "LightSwitchEnv"
SETTING = "games"
SKILL = "causal inference"

N_SWITCHES = 5
LAMPS = "ABCD"


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


class LightSwitchEnv:
    """Hidden lamp-to-switch wiring with polarity, revealed only by interventions."""

    def __init__(self, max_turns=8, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        while True:
            drivers = [rng.randint(1, N_SWITCHES) for _ in LAMPS]
            if len(set(drivers)) >= 3:
                break
        self.drivers = drivers
        self.inverted = [rng.random() < 0.5 for _ in LAMPS]
        self.switches = [rng.random() < 0.5 for _ in range(N_SWITCHES)]
        self.flips = []
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("You enter the wiring closet."), {"switches": N_SWITCHES, "lamps": len(LAMPS)}

    def lamps(self):
        """Current lamp states: the driver's position, flipped where the wire is inverted."""
        return [self.switches[d - 1] != inv for d, inv in zip(self.drivers, self.inverted)]

    def _render(self, lead):
        sw = "  ".join(f"{i + 1}:{'up' if s else 'down'}" for i, s in enumerate(self.switches))
        lp = "  ".join(f"{name}:{'on' if on else 'off'}" for name, on in zip(LAMPS, self.lamps()))
        lines = [
            lead,
            f"Switches: {sw}",
            f"Lamps:    {lp}",
            f"Each lamp is wired to one of the {N_SWITCHES} switches, directly or inverted; lamps may "
            "share a switch. Find the switch of every lamp.",
        ]
        if self.flips:
            lines.append("Your flips so far (lamps that changed): " + "; ".join(self.flips))
        lines += [
            "Actions: \\boxed{toggle S} flips switch S; \\boxed{answer a b c d} names the switches of "
            "lamps A, B, C and D in order (one answer only; a wrong answer loses).",
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
        toggle = re.fullmatch(r"(?:toggle|flip)\s*(\d+)", move)
        answer = re.fullmatch(r"answer\s*:?\s*([\d\s,]+)", move)
        if answer:
            named = [int(x) for x in re.findall(r"\d+", answer.group(1))]
            if named == self.drivers:
                return self._finish("That is the wiring. You win!", 1.0, True, False)
            if len(named) == len(LAMPS):
                return self._finish("That is not the wiring. You lose.", 0.0, True, False)
            lead = f"An answer names {len(LAMPS)} switches, one per lamp, e.g. \\boxed{{answer a b c d}}."
        elif toggle and 1 <= int(toggle.group(1)) <= N_SWITCHES:
            s = int(toggle.group(1))
            before = self.lamps()
            self.switches[s - 1] = not self.switches[s - 1]
            changed = [name for name, b, a in zip(LAMPS, before, self.lamps()) if a != b]
            self.flips.append(f"switch {s}: {', '.join(changed) or 'none'}")
            lead = f"You flip switch {s}. Lamps that changed: {', '.join(changed) or 'none'}."
        else:
            lead = (f"I could not read that. Use \\boxed{{toggle S}} with S from 1 to {N_SWITCHES}, "
                    "or \\boxed{answer a b c d}.")
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """The wiring itself (computed from the hidden state)."""
        return "\\boxed{answer " + " ".join(map(str, self.drivers)) + "}"

    def hint(self):
        k = sum(self.drivers) % len(LAMPS)
        return (f"Lamp {LAMPS[k]} is wired to switch {self.drivers[k]}. Flip one switch at a time "
                "and note exactly which lamps change.")

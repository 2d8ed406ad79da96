"""The wiring closet: infer which switch drives each lamp by intervening.

Numbered switches and lettered lamps. Each lamp is wired to exactly one switch, either directly
(on when the switch is up) or inverted (on when it is down); several lamps may share a switch and
some switches may drive nothing. The starting positions are a single observation and cannot
separate cause from coincidence: only flipping a switch and watching which lamps change does.
The task shows every flip so far and the lamps it changed. Name every lamp's switch to win; one
answer only.

Levels (a bigger instance of the same rules at each):

1. 2 switches, 1 lamp, and one switch has already been flipped: the answer is read from what
   that flip did (one move; the example answers with a switch that does not exist, so copying
   it costs a turn, not the game);
2. 3 switches, 2 lamps;
3. 4 switches, 3 lamps;
4. 5 switches, 4 lamps (the former starter's size).

Finding every lamp takes at most one flip per switch but the last, plus the answer, so under a
tighter ``max_turns`` the closet has ``min(switches, max_turns)`` switches (the lamps stay).

Actions: ``\\boxed{toggle 2}`` flips switch 2; ``\\boxed{answer 2 1 3}`` names the switches of
lamps A, B, C in order. Reward 1.0 for the right wiring, 0.0 (terminated) for a wrong one.
``solution()`` flips as an agent could: the lowest switch that could still drive a lamp whose
switch is not yet known, until every lamp is known.
"""

import re
from gameenv import GameEnv

ENV_CLASS = "LightSwitchEnv"
SETTING = "games"
SKILL = "causal inference"

LAMPS = "ABCD"
# level -> (switches, lamps)
SIZES = {1: (2, 1), 2: (3, 2), 3: (4, 3), 4: (5, 4)}


def _listed(items):
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


class LightSwitchEnv(GameEnv):
    """Hidden lamp-to-switch wiring with polarity, revealed only by interventions."""

    LEVELS = 4

    def setup(self, rng):
        switches, lamps = SIZES[self.level]
        self.n_switches = max(1, min(switches, self.max_turns))
        self.names = LAMPS[:lamps]
        self.drivers = [rng.randint(1, self.n_switches) for _ in self.names]
        self.inverted = [rng.random() < 0.5 for _ in self.names]
        self.switches = [rng.random() < 0.5 for _ in range(self.n_switches)]
        self.flips = []  # (switch, names of the lamps that changed)
        if self.level == 1:  # the flip that settles it is already made: read the answer off it
            self._toggle(rng.randint(1, self.n_switches))

    def lamps(self):
        """Current lamp states: the driver's position, flipped where the wire is inverted."""
        return [self.switches[d - 1] != inv for d, inv in zip(self.drivers, self.inverted)]

    # -- what the agent sees ----------------------------------------------------------------------

    def task(self):
        if self.level == 1:
            return self._task_one()
        numbers = list(range(1, self.n_switches + 1))
        lines = [
            f"A closet has {self.n_switches} switch{'es' if self.n_switches > 1 else ''} "
            f"({_listed(numbers)}) and {len(self.names)} lamp{'s' if len(self.names) > 1 else ''} "
            f"({_listed(self.names)}).",
            "Switches now: " + ", ".join(f"{i + 1} {'up' if s else 'down'}"
                                         for i, s in enumerate(self.switches)) + ".",
            "Lamps now: " + ", ".join(f"{n} {'on' if on else 'off'}"
                                      for n, on in zip(self.names, self.lamps())) + ".",
            "Each lamp is wired to exactly one switch, directly or inverted, so flipping a lamp's "
            "switch always changes that lamp. Lamps may share a switch; a switch may drive no lamp. "
            "Find the switch of every lamp.",
            "To flip a switch, write toggle and its number (for example toggle 1); I say which "
            "lamps changed.",
        ]
        if len(self.names) == 1:
            lines.append("To answer, write answer and the number of lamp A's switch.")
        else:
            lines.append("To answer, write answer and then the switch number of each lamp, in the "
                         f"order {_listed(self.names)}, separated by spaces.")
        lines[-1] += " You may answer only once: a wrong answer loses."
        if self.flips:
            lines.append("Your flips so far:")
            lines += [f"  toggle {s}: {self._changed(names)}" for s, names in self.flips]
        else:
            lines.append("No flips yet.")
        return "\n".join(lines)

    def _task_one(self):
        """Level 1: one lamp, a flip already made; one step to answer."""
        n = self.n_switches
        lines = [f"Lamp A is wired to one of {n} switches ({_listed(range(1, n + 1))}): flipping "
                 "that switch changes lamp A, flipping another changes nothing."]
        for s, names in self.flips:
            lines.append(f"Flipping switch {s} {'changed' if names else 'did not change'} lamp A.")
        lines.append("Which switch is lamp A wired to? Write answer and the switch number. You may "
                     "answer only once.")
        return "\n".join(lines)

    @staticmethod
    def _changed(names):
        if not names:
            return "no lamp changed"
        return f"lamp {names[0]} changed" if len(names) == 1 else f"lamps {_listed(names)} changed"

    def example(self):
        if self.level == 1:  # the answer's form, with a switch that does not exist: not a move
            return f"answer {self.n_switches + 1}"
        return "toggle 1"

    def judge(self, move):
        move = move.strip().lower()
        toggle = re.fullmatch(r"(?:toggle|flip|switch)\s*:?\s*(?:switch\s*)?(\d+)", move)
        answer = re.fullmatch(r"(?:answer\s*:?\s*)?([\d\s,]+)", move)
        forms = (f"Write toggle and a switch number from 1 to {self.n_switches}, or answer and "
                 f"{len(self.names)} switch number{'s' if len(self.names) > 1 else ''}.")
        if answer:
            named = [int(x) for x in re.findall(r"\d+", answer.group(1))]
            if len(named) != len(self.names) or not all(1 <= s <= self.n_switches for s in named):
                return self.INVALID, (f"An answer names one switch from 1 to {self.n_switches} for "
                                      f"each lamp, in the order {_listed(self.names)}. {forms}")
            if named == self.drivers:
                return self.WIN, "That is the wiring."
            return self.LOSE, "That is not the wiring."
        if not toggle or not 1 <= int(toggle.group(1)) <= self.n_switches:
            return self.INVALID, f"That is not a move. {forms}"
        s = int(toggle.group(1))
        changed = self._toggle(s)
        return self.CONTINUE, f"You flip switch {s}: {self._changed(changed)}."

    def _toggle(self, s):
        """Flip switch s and record which lamps changed."""
        changed = self._flip(s)
        self.switches[s - 1] = not self.switches[s - 1]
        self.flips.append((s, changed))
        return changed

    def _flip(self, s):
        """The lamps that change when switch s flips (the feedback an agent sees)."""
        return [n for n, d in zip(self.names, self.drivers) if d == s]

    def hint(self):
        if len(self.names) > 1:
            k = sum(self.drivers) % len(self.names)
            return (f"Lamp {self.names[k]} is wired to switch {self.drivers[k]}. Flip one switch "
                    "at a time and note exactly which lamps change.")
        return "Flip one switch and see whether the lamp changes."

    def info(self):
        return {"turn": self.turn, "level": self.level, "switches": self.n_switches,
                "lamps": len(self.names), "flips": len(self.flips)}

    # -- the solution: flips chosen from the changes seen so far ----------------------------------

    def solution(self):
        flips, moves = list(self.flips), []
        while True:
            options = self._options(flips)
            open_lamps = [o for o in options if len(o) > 1]
            if not open_lamps:
                moves.append(self.box("answer " + " ".join(str(min(o)) for o in options)))
                return moves
            s = min(min(o) for o in open_lamps)
            moves.append(self.box(f"toggle {s}"))
            flips.append((s, self._flip(s)))  # what the agent would see

    def _options(self, flips):
        """For each lamp, the switches that could drive it given the flips seen."""
        options = []
        for name in self.names:
            drove = {s for s, changed in flips if name in changed}
            ruled_out = {s for s, changed in flips if name not in changed}
            options.append(drove or set(range(1, self.n_switches + 1)) - ruled_out)
        return options

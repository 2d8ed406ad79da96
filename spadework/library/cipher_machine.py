"""The cipher machine: infer a hidden word transformation from examples and experiments.

A machine turns lowercase words into code words by a hidden rule made of simple steps (shift
every letter along the alphabet, reverse the word, move its first letters to the end, swap
neighbouring letters, mirror the alphabet a<->z). The task names the steps the rule may use and
shows some example pairs; you may feed the machine words of your own choice to test a theory
(not the challenge word itself), then must give the code of the challenge word. One answer only
(above level 1). Every encoding seen so far is shown each turn.

Levels (a bigger instance of the same rules at each):

1. a 3-letter word; the rule shifts every letter 1 to 3 places, and the task says how many and
   where each letter of the challenge goes, with one example pair: answer at once. The example
   move is an answer (a wrong one), a wrong answer is told and may be tried again, and the task
   lists the new letters to write together. The base 0.5B agent copied the former example, a
   probe, every turn (0 wins in 20 plays); it now wins 1 in 20, mostly writing the example's
   letters instead;
2. a 4- or 5-letter word; the rule is one step of any kind; one example pair;
3. a 6- or 7-letter word; the rule is two steps of different kinds; two example pairs (the
   former starter).

One well-chosen probe as long as the challenge word always settles the rule, so a level needs two
turns whatever ``max_turns`` is (at least 2); level 1 needs one.

Actions: ``\\boxed{encode WORD}`` runs the machine on WORD (3 to 12 letters);
``\\boxed{answer CODE}`` answers. Reward 1.0 for the right code, 0.0 (terminated) for a wrong
one; truncated after max_turns replies. ``solution()`` plays as an agent could: it keeps the
rules that agree with every encoding seen, probes with the word that best tells the remaining
ones apart, and answers once they all agree on the challenge word.
"""

import re
from gameenv import GameEnv

ENV_CLASS = "CipherMachineEnv"
SETTING = "games"
SKILL = "pattern recognition"

WORDS = {
    1: ("cat", "dog", "sun", "hat", "map", "pen", "cup", "box", "fox", "jam", "kit", "log", "net",
        "owl", "pig", "rug", "toy", "van", "web", "zip", "bus", "egg", "ink", "oak"),
    2: ("frog", "lamp", "bird", "cake", "ship", "moon", "tree", "milk", "rope", "star", "wolf",
        "desk", "bread", "chair", "river", "stone", "plant", "cloud", "horse", "apple", "tiger",
        "ocean", "grape", "sheep"),
    3: ("planet", "garden", "bridge", "silver", "rocket", "window", "marble", "forest", "castle",
        "button", "dragon", "pencil", "meadow", "anchor", "lantern", "harvest", "compass",
        "thunder", "journey", "crystal", "blanket", "orchard", "whistle", "kitchen"),
}
# level -> (steps in the rule, examples shown)
SIZES = {1: (1, 1), 2: (1, 1), 3: (2, 2)}
KINDS = ("shift", "reverse", "rotate", "swap", "mirror")
SAY = {
    "shift": "every letter moves forward the same number of places along the alphabet (z wraps "
             "around to a)",
    "reverse": "the word is reversed",
    "rotate": "its first 1 to 3 letters move to the end",
    "swap": "neighbouring letters swap in pairs (1st with 2nd, 3rd with 4th, ...)",
    "mirror": "the alphabet is mirrored (a becomes z, b becomes y, ...)",
}
PROBES = ("abcdefghijkl", "bdhmqwaeryuz", "qwertyuiopas", "zmxnbcvlkajh", "pxgtwlbqenmr",
          "hkuvrmdoyfzs")


def apply_step(step, word):
    kind, k = step
    if kind == "shift":
        return "".join(chr((ord(c) - 97 + k) % 26 + 97) for c in word)
    if kind == "reverse":
        return word[::-1]
    if kind == "rotate":
        k %= len(word)
        return word[k:] + word[:k]
    if kind == "swap":
        chars = list(word)
        for i in range(0, len(chars) - 1, 2):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        return "".join(chars)
    return "".join(chr(219 - ord(c)) for c in word)


def encode(rule, word):
    for step in rule:
        word = apply_step(step, word)
    return word


def rules(level):
    """Every rule a level may draw: tuples of (kind, amount) steps."""
    if level == 1:
        return [(("shift", k),) for k in (1, 2, 3)]
    steps = ([("shift", k) for k in range(1, 26)] + [("reverse", 0)]
             + [("rotate", k) for k in (1, 2, 3)] + [("swap", 0), ("mirror", 0)])
    if level == 2:
        return [(s,) for s in steps]
    return [(a, b) for a in steps for b in steps if a[0] != b[0]]


class CipherMachineEnv(GameEnv):
    """Composed word cipher; examples, chosen-plaintext queries, one answer."""

    LEVELS = 3

    def setup(self, rng):
        n_steps, n_examples = SIZES[self.level]
        options = rules(self.level)
        while True:
            rule = rng.choice(options)
            words = rng.sample(WORDS[self.level], n_examples + 1)
            if all(encode(rule, w) != w for w in words):
                break
        self.rule = rule
        self.examples = [(w, encode(rule, w)) for w in words[:-1]]
        self.challenge, self.answer = words[-1], encode(rule, words[-1])
        self.queries = []

    # -- what the agent sees ----------------------------------------------------------------------

    def task(self):
        if self.level == 1:
            return self._task_one()
        else:
            steps = "; ".join(SAY[k] for k in KINDS)
            how = (f"The machine encodes a word by a hidden rule: "
                   + ("one step" if len(self.rule) == 1 else
                      f"{len(self.rule)} steps of different kinds, one after the other")
                   + f", each one of these: {steps}.")
        seen = self.examples + self.queries
        lines = [how]
        if seen:
            lines.append("Encodings seen so far:")
            lines += [f"  {w} -> {c}" for w, c in seen]
        else:
            lines.append("No encodings seen yet.")
        lines += [
            f"Challenge: what does the machine output for '{self.challenge}'?",
            "To test the machine, write encode and a word of 3 to 12 lowercase letters (not the "
            f"challenge word), for example {self.example()}. To answer, write answer and the code "
            f"word for '{self.challenge}'. You may answer only once: a wrong answer loses.",
        ]
        return "\n".join(lines)

    def _task_one(self):
        """Level 1: the shift is stated, with where each letter of the challenge goes; one step
        to answer (put those letters together)."""
        k = self.rule[0][1]
        goes = ", ".join(f"{c} becomes {encode(self.rule, c)}" for c in self.challenge)
        seen = "".join(f" It turns '{w}' into '{c}'." for w, c in self.examples + self.queries)
        return (f"A machine moves every letter of a word {k} place{'s' if k > 1 else ''} forward "
                f"in the alphabet.{seen}\n"
                f"What does it make of '{self.challenge}'? In '{self.challenge}', {goes}. The new "
                f"word is those {len(self.challenge)} new letters ({', '.join(self.answer)}) "
                "written together. Write answer and the new word.")

    def example(self):
        if self.level == 1:  # the answer's form with letters that are not the answer
            return "answer " + ("xyz" if self.answer == "abc" else "abc")
        return "encode " + self._probes()[0]

    def _probes(self):
        n = len(self.challenge)
        return [p[:n] for p in PROBES if p[:n] != self.challenge]

    def judge(self, move):
        move = move.strip()
        answer = re.fullmatch(r"(?:answer\s*:?\s*)?([A-Za-z]+)", move, re.IGNORECASE)
        if answer and answer.group(1).lower() == "encode":  # "encode" alone: a probe without a word
            answer = None
        probe = re.fullmatch(r"encode\s*:?\s*([A-Za-z]+)", move, re.IGNORECASE)
        forms = f"Write encode and a word, such as {self.example()}, or answer and a code word."
        if answer:
            if answer.group(1).lower() == self.answer:
                return self.WIN, f"Correct: '{self.challenge}' encodes to '{self.answer}'."
            if self.level == 1:
                return self.CONTINUE, (f"Wrong: '{answer.group(1).lower()}' is not what the "
                                       f"machine makes of '{self.challenge}'.")
            return self.LOSE, f"Wrong: that is not the code of '{self.challenge}'."
        if not probe:
            return self.INVALID, f"That is not a move. {forms}"
        word = probe.group(1).lower()
        if not 3 <= len(word) <= 12:
            return self.INVALID, f"Words fed to the machine must have 3 to 12 letters. {forms}"
        if word == self.challenge:
            return self.INVALID, f"The machine refuses to encode the challenge word itself. {forms}"
        self.queries.append((word, encode(self.rule, word)))
        return self.CONTINUE, f"The machine outputs '{self.queries[-1][1]}'."

    def hint(self):
        kind = self.rule[0][0]
        return (f"One step of the rule: {SAY[kind].split(' (')[0]}. Feed the machine a word as "
                "long as the challenge word, such as the example, to see where each position and "
                "letter goes.")

    def info(self):
        return {"turn": self.turn, "level": self.level, "steps": len(self.rule),
                "probes": len(self.queries)}

    # -- the solution: probes chosen from the encodings seen so far -------------------------------

    def solution(self):
        seen, moves = self.examples + self.queries, []
        left = [r for r in rules(self.level) if all(encode(r, w) == c for w, c in seen)]
        if self.level == 1:  # the task states the rule
            left = [self.rule]
        while True:
            outputs = {encode(r, self.challenge) for r in left}
            if len(outputs) == 1:
                moves.append(self.box(f"answer {outputs.pop()}"))
                return moves
            probe = min(self._probes(), key=lambda p: self._worst(left, p))
            moves.append(self.box(f"encode {probe}"))
            out = encode(self.rule, probe)  # what the machine would output
            left = [r for r in left if encode(r, probe) == out]

    def _worst(self, left, probe):
        """The most challenge codes still possible after probing, over the probe's outputs."""
        groups = {}
        for r in left:
            groups.setdefault(encode(r, probe), set()).add(encode(r, self.challenge))
        return max(len(g) for g in groups.values())

"""The cipher machine: infer a hidden word transformation from examples and experiments.

A machine turns lowercase words into code words by a hidden composition of two simple steps
(shift every letter along the alphabet, reverse the word, rotate it, swap neighbouring letters,
mirror the alphabet a<->z). Two example pairs are shown. You may feed the machine words of your own
choice to test a theory (not the challenge word itself), then must give the code of the challenge
word. One answer only.

Actions: ``\\boxed{encode WORD}`` runs the machine on WORD (3 to 12 letters);
``\\boxed{answer CODE}`` answers. Reward 1.0 for the right code, 0.0 (terminated) for a wrong
one; truncated after max_turns replies. ``reset(seed=None)`` plays seed 0.
"""

import random
import re

ENV_CLASS = "CipherMachineEnv"
SETTING = "games"
SKILL = "pattern recognition"

WORDS = ("planet", "garden", "bridge", "silver", "rocket", "window", "marble", "forest", "castle",
         "button", "dragon", "pencil", "meadow", "anchor", "lantern", "harvest", "compass", "thunder",
         "journey", "crystal", "blanket", "orchard", "whistle", "kitchen")


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


def _shift(word, k):
    return "".join(chr((ord(c) - 97 + k) % 26 + 97) for c in word)


def _rotate(word, k):
    k %= len(word)
    return word[k:] + word[:k]


def _swap_pairs(word):
    chars = list(word)
    for i in range(0, len(chars) - 1, 2):
        chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return "".join(chars)


def _mirror(word):
    return "".join(chr(219 - ord(c)) for c in word)


def make_step(rng):
    """One random primitive as (name, function of a word, description for the hint)."""
    kind = rng.randrange(5)
    if kind == 0:
        k = rng.randint(1, 25)
        return f"shift{k}", lambda w: _shift(w, k), f"every letter moves {k} places along the alphabet"
    if kind == 1:
        return "reverse", lambda w: w[::-1], "the word is reversed"
    if kind == 2:
        k = rng.randint(1, 3)
        return f"rotate{k}", lambda w: _rotate(w, k), f"the first {k} letter(s) move to the end"
    if kind == 3:
        return "swap", _swap_pairs, "neighbouring letters swap in pairs"
    return "mirror", _mirror, "the alphabet is mirrored (a<->z, b<->y, ...)"


class CipherMachineEnv:
    """Composed word cipher; examples, chosen-plaintext queries, one answer."""

    def __init__(self, max_turns=6, **kwargs):
        self.max_turns = int(max_turns)
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        while True:
            steps = [make_step(rng), make_step(rng)]
            words = rng.sample(WORDS, 3)
            code = [self._apply(steps, w) for w in words]
            kinds = {name.rstrip("0123456789") for name, _, _ in steps}
            if len(kinds) == 2 and all(c != w for c, w in zip(code, words)):
                break
        self.steps = steps
        self.examples = list(zip(words[:2], code[:2]))
        self.challenge, self.answer = words[2], code[2]
        self.queries = []
        self.turn = 0
        self.done = False
        self.truncated = False
        return self._render("The machine hums."), {"challenge": self.challenge}

    @staticmethod
    def _apply(steps, word):
        for _, fn, _ in steps:
            word = fn(word)
        return word

    def _render(self, lead):
        seen = self.examples + self.queries
        pairs = "\n".join(f"  {w} -> {c}" for w, c in seen)
        return (
            f"{lead}\nThe machine encodes words by a fixed hidden rule. Known encodings:\n{pairs}\n"
            f"Challenge: what does the machine output for '{self.challenge}'?\n"
            "Actions: \\boxed{encode WORD} runs the machine on a word of 3 to 12 lowercase letters "
            "(not the challenge word); \\boxed{answer CODE} gives your final answer (one answer "
            "only; a wrong answer loses).\n"
            f"Turns left: {self.max_turns - self.turn}."
        )

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
        move = (_boxed(action) or "").strip()
        answer = re.fullmatch(r"answer\s*:?\s*([A-Za-z]+)", move, re.IGNORECASE)
        encode = re.fullmatch(r"encode\s*:?\s*([A-Za-z]+)", move, re.IGNORECASE)
        if answer:
            if answer.group(1).lower() == self.answer:
                return self._finish(f"Correct: '{self.challenge}' encodes to '{self.answer}'. You win!",
                                    1.0, True, False)
            return self._finish(f"Wrong: that is not the code of '{self.challenge}'. You lose.",
                                0.0, True, False)
        if not encode:
            lead = "I could not read that. Use \\boxed{encode WORD} or \\boxed{answer CODE}."
        else:
            word = encode.group(1).lower()
            if not 3 <= len(word) <= 12:
                lead = "Words fed to the machine must have 3 to 12 letters."
            elif word == self.challenge:
                lead = "The machine refuses to encode the challenge word itself."
            else:
                self.queries.append((word, self._apply(self.steps, word)))
                lead = f"The machine outputs '{self.queries[-1][1]}'."
        return self._finish(self._render(lead), 0.0, False, out_of_turns)

    def solution(self):
        """The code of the challenge word (computed by running the hidden rule)."""
        return f"\\boxed{{answer {self.answer}}}"

    def hint(self):
        return (f"One of the two steps: {self.steps[0][2]}. Feed the machine a word like "
                "'abcdef' to see where each position and letter goes.")

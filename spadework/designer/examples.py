"""The complete example module a fresh games design is shown when memory has none to show.

Why: a design prompt states the contract as signatures and rules, and small models (0.5B-1.5B)
copy that skeleton and fill it with placeholders, dict observations and episodes that never
end (``benchmarks/designer_validity.py``: at iteration 0 of a run the archive holds no played
environment, so the memory shows nothing). One short module that passes the checker shows every
rule at work. It subclasses the games base class (``from gameenv import GameEnv``), which does
the turns, the parsing of the box, truncation and the readable feedback, so the designer writes
only the game: three levels drawn in ``setup()``, a task that shows every number its answer
depends on (the checker's ``visible`` stage), a concrete example move that is not the answer,
a judge with informative feedback and a ``solution()`` computed from the state. It is short on
purpose: the model's module must fit in ``DesignConfig.max_tokens``, and an example sets the
length it imitates. It needs no ``re``: the 1.5B model, rewriting an earlier example, kept
``re.search`` and dropped ``import re`` (4 of the 7 design attempts of a cpu-qwen run's first
iteration, repairs included, raised ``NameError: name 're' is not defined``).

The example is also in the designer's novelty index (:func:`prompt_examples`, used by
:class:`spadework.designer.run.DesignRun`), so a copy of it is rejected as a near-duplicate
rather than accepted as a design. Tests check the example
against the checker under several turn limits (tests/test_design_prompts.py).
"""

from __future__ import annotations

GAMES_EXAMPLE = '''\
import random
from gameenv import GameEnv


class CompoundInterestEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.deposit = rng.randint(1, 9) * 100
        self.rate = rng.choice([10, 20, 50])
        self.years = self.level
        self.answer = self.deposit
        for _ in range(self.years):
            self.answer += self.answer * self.rate // 100

    def task(self):
        return (f"A deposit of {self.deposit} coins earns {self.rate}% interest a year, "
                f"added at the end of each year and rounded down. What is the balance "
                f"after {self.years} year(s)? Answer with a whole number.")

    def example(self):
        return str(self.deposit)

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.answer:
            return self.WIN, "That is the balance."
        if int(move) > self.answer:
            return self.CONTINUE, f"{move} is too high."
        return self.CONTINUE, f"{move} is too low."

    def solution(self):
        return self.box(self.answer)

    def hint(self):
        return f"Each year the balance grows by {self.rate}% of itself."
'''


def prompt_examples(setting: str) -> tuple[str, ...]:
    """The code of the example modules a prompt of ``setting`` may show, for the novelty index.

    Games: the fallback example. Tool use: none yet, although the ToolEnv guide shows
    ``PantryEnv``: tests/test_loop.py's tool-use run designs exactly that module and expects it
    accepted, so indexing it waits for that test to design another module.

    >>> [len(prompt_examples(s)) for s in ("games", "tool-use")]
    [1, 0]
    """
    return (GAMES_EXAMPLE,) if setting == "games" else ()

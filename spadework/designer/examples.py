"""The complete example module a fresh games design is shown when memory has none to show.

Why: a design prompt states the contract as signatures and rules, and small models (0.5B-1.5B)
copy that skeleton and fill it with placeholders, dict observations and episodes that never
end (``benchmarks/designer_validity.py``: at iteration 0 of a run the archive holds no played
environment, so the memory shows nothing). One short module that passes the checker shows every
rule at work: a string observation with the action format, a seeded instance built in
``reset()``, a turn count that truncates at ``max_turns``, a format reminder, informative
feedback and a ``solution()`` computed from the state. It is short on purpose: the model's
module must fit in ``DesignConfig.max_tokens``, and an example sets the length it imitates.
Everything it needs besides its one import is inside the class, and it parses the reply with
string methods, not ``re``: the 1.5B model, rewriting earlier versions, kept the class and
dropped a module-level regex (3 of 8 tune attempts failed on that NameError), then kept
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


class CompoundInterestEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.deposit = rng.randint(100, 900)
        self.rate = rng.choice([2, 3, 5, 10])
        self.years = rng.randint(2, 4)
        balance = self.deposit
        for _ in range(self.years):
            balance += balance * self.rate // 100
        self.answer = balance
        self.turn = 0
        return self.task(), {}

    def task(self):
        return (f"A deposit of {self.deposit} coins earns {self.rate}% interest a year, "
                f"rounded down each year. What is the balance after {self.years} years? "
                f"Answer with \\\\boxed{{number}}. Turns left: {self.max_turns - self.turn}.")

    def step(self, action):
        self.turn += 1
        truncated = self.turn >= self.max_turns
        reply = action.rsplit("\\\\boxed{", 1)[-1].split("}")[0].strip()
        if "\\\\boxed{" not in action or not reply.isdigit():
            return "Reply with a whole number in \\\\boxed{}. " + self.task(), 0.0, False, truncated, {}
        guess = int(reply)
        if guess == self.answer:
            return "Correct!", 1.0, True, False, {}
        feedback = "too high" if guess > self.answer else "too low"
        return f"{guess} is {feedback}. " + self.task(), 0.0, False, truncated, {}

    def solution(self):
        return f"\\\\boxed{{{self.answer}}}"
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

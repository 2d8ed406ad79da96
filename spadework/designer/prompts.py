"""Every text the designer is shown: the system prompt, the task parts, and the fresh-design,
mutation and repair prompts, built from the contract (:func:`spadework.env.contract.
render_contract`, one source of truth) and, for tool use, the guide to subclassing ``ToolEnv``.

A fresh design is grounded in a document and a skill, with memory from the archive: positives
(environments at the edge of the agent's ability, shown with their code) and negatives (too easy
or too hard, shown with the reason and an excerpt). A mutation shows an archived parent and asks
for a harder, easier or varied child. A repair turn carries the checker's stage and reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spadework.archive.records import MemoryNegative
from spadework.designer.parents import Parent
from spadework.env.contract import render_contract
from spadework.errors import ConfigError
from spadework.skills import Skill

DIFFICULTIES = ("easy", "medium", "hard")

SYSTEM = (
    "You design interactive text environments that train an AI agent. You write one complete, "
    "self-contained Python module per request, following the contract exactly."
)

#: How to write a ToolEnv subclass, for the tool-use designer prompt. The example is executed by
#: the tests (tests/env/test_toolenv.py), so it stays true to ``spadework.env.toolenv``.
SUBCLASS_GUIDE = '''\
Write the environment as a subclass of ToolEnv (`from toolenv import Instruction, ToolEnv,
ToolError, render_record, render_records`). The base class parses replies, checks arguments
against your schemas, runs the calls, reveals instructions step by step, counts turns and judges
the <answer>; you write only the domain:

- declare_tools(self) -> {name: {"description": str, "parameters": JSON schema object}} with
  "required", "enum", "minimum" etc. where they apply; each tool is a method tool_<name>(**args)
  returning a string (render_record / render_records format records compactly). Raise
  ToolError("reason") for a failure the agent should read (not found, not allowed).
- reset(self, seed=None): build 10-50 records from random.Random(seed) and end with
  `return self.start(intro, [Instruction(text, done), ...])`; done() is a zero-argument callable
  that checks the STATE (or self.called(tool, **args)), and must be False at reset.
- expected_answer(self): the final answer computed from the state (default "done").
- solution(self): the replies that win, computed from the state, written with
  self.reply_call(tool, **args) and self.reply_answer(value); return self.fit_turns(replies).

Example:

import random
from toolenv import Instruction, ToolEnv, ToolError

class PantryEnv(ToolEnv):
    def declare_tools(self):
        item = {"type": "string", "enum": sorted(self.stock)}
        return {
            "count": {"description": "Units of an item in stock.", "parameters": {
                "type": "object", "required": ["item"], "properties": {"item": item}}},
            "use": {"description": "Take units of an item out of stock.", "parameters": {
                "type": "object", "required": ["item", "units"],
                "properties": {"item": item, "units": {"type": "integer", "minimum": 1}}}},
            "weather": {"description": "Today's weather.", "parameters": {}},
        }

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.stock = {f"item{i}": rng.randint(3, 9) for i in range(12)}
        self.target = rng.choice(sorted(self.stock))
        self.used = []
        return self.start("You keep a pantry.", [
            Instruction(f"Check how many {self.target} are in stock.",
                        lambda: self.called("count", item=self.target)),
            Instruction(f"Use half of the {self.target} (rounded down).",
                        lambda: self.used == [(self.target, self.half)]),
            Instruction(f"Use 1 more {self.target}, then answer with how many are left.",
                        lambda: self.used[1:] == [(self.target, 1)])])

    @property
    def half(self):
        return (self.stock[self.target] + sum(u for _, u in self.used)) // 2

    def tool_count(self, item):
        return f"{item}: {self.stock[item]}"

    def tool_use(self, item, units):
        if units > self.stock[item]:
            raise ToolError(f"only {self.stock[item]} {item} left")
        self.stock[item] -= units
        self.used.append((item, units))
        return f"{item}: {self.stock[item]} left"

    def tool_weather(self):
        return "sunny"

    def expected_answer(self):
        return str(self.stock[self.target])

    def solution(self):
        n = self.stock[self.target]
        return self.fit_turns([self.reply_call("count", item=self.target),
                               self.reply_call("use", item=self.target, units=n // 2),
                               self.reply_call("use", item=self.target, units=1),
                               self.reply_answer(n - n // 2 - 1)])
'''

SETTING_RULES = {
    "games": (
        "The agent plays over several turns and answers each turn with \\boxed{...}. Keep hidden "
        "state that is revealed through feedback; the first observation lists the valid actions."
    ),
    "tool-use": (
        "Give the ToolEnv subclass stateful mock data of 10 to 50 records built from the seed, "
        "query tools and mutation tools, one tool that is never needed, and an instruction "
        "sequence of at least three dependent steps.\n\n" + SUBCLASS_GUIDE
    ),
}

_STEPS = {"easy": 2, "medium": 3, "hard": 4}

_ASK = {
    "harder": "The agent wins this environment too often. Make it harder: deeper reasoning, more "
              "hidden state or tighter limits, so that it takes more well-reasoned turns to win.",
    "easier": "The agent almost never wins this environment. Make it easier: clearer feedback, "
              "smaller instances or more turns, while random guessing still does not win.",
    "varied": "The agent wins this environment sometimes. Write a variation of similar "
              "difficulty: change the mechanics or the rules, not just names and numbers.",
}


@dataclass(frozen=True)
class MemoryExample:
    """An archived environment shown to the designer, with how it played (e.g. its win rate)."""

    code: str
    note: str


def task_parts(skill: Skill, difficulty: str) -> list[str]:
    """The skill, difficulty, setting and contract paragraphs every design prompt states (fresh
    designs and mutations alike, so both modes state the same contract).

    >>> from spadework.skills import skill_named
    >>> parts = task_parts(skill_named("optimization"), "hard")
    >>> "at least 4" in parts[1], parts[-1].startswith("The contract:")
    (True, True)
    """
    if difficulty not in DIFFICULTIES:
        raise ConfigError(f"unknown difficulty {difficulty!r}: use one of {', '.join(DIFFICULTIES)}")
    return [
        f"Skill to exercise: {skill.name}: {skill.description} "
        f"(ideas, not requirements: {'; '.join(skill.ideas)}).",
        f"Difficulty: {difficulty}: winning should take at least {_STEPS[difficulty]} "
        "well-reasoned turns, and random guessing should almost never win.",
        SETTING_RULES[skill.setting],
        "The contract:\n" + render_contract(),
    ]


def build_design_prompt(
    document: str,
    skill: Skill,
    *,
    difficulty: str = "medium",
    memory: Sequence[MemoryExample] = (),
    negatives: Sequence[MemoryNegative] = (),
) -> list[dict[str, str]]:
    """Chat messages asking the designer for one environment grounded in ``document``.

    >>> from spadework.skills import skill_named
    >>> msgs = build_design_prompt("Tides rise twice a day.", skill_named("causal inference"))
    >>> [m["role"] for m in msgs], "Tides rise" in msgs[1]["content"], "def step" in msgs[1]["content"]
    (['system', 'user'], True, True)
    """
    if not document.strip():
        raise ConfigError("the grounding document is empty: sample another document")
    parts = [
        "Read the document, pick one concept or technique from it, and build a multi-turn "
        "environment around it. Do not quote the document in the environment.",
        f"<document>\n{document.strip()}\n</document>",
        *task_parts(skill, difficulty),
    ]
    for i, ex in enumerate(memory, 1):
        parts.append(f"Example {i} of a well-calibrated earlier design ({ex.note}); use it for "
                     f"structure, but design a different game:\n```python\n{ex.code.strip()}\n```")
    for neg in negatives:
        parts.append(f"Avoid designs like this one, which was {neg.note}:\n```python\n"
                     f"{neg.excerpt.strip()}\n```")
    parts.append("Reply with the complete module in one ```python block.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def build_mutation_prompt(parent: Parent, skill: Skill, *,
                          difficulty: str = "medium") -> list[dict[str, str]]:
    """Chat messages asking for a changed module derived from ``parent``, in the direction its
    win rate calls for, with the same task parts as a fresh design.

    >>> from spadework.skills import skill_named
    >>> p = Parent("ab" * 32, "class A: ...", "A", 0.95)
    >>> msgs = build_mutation_prompt(p, skill_named("optimization"))
    >>> "harder" in msgs[1]["content"] and "class A: ..." in msgs[1]["content"]
    True
    """
    rate = "not played yet" if parent.win_rate is None else f"win rate {parent.win_rate:.2f}"
    parts = [
        f"Here is an existing environment for the skill {skill.name} ({rate}):\n```python\n"
        f"{parent.code.strip()}\n```",
        _ASK[parent.direction],
        *task_parts(skill, difficulty),
        "Reply with the complete new module in one ```python block; give its class a new name.",
    ]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def repair_messages(messages: Sequence[dict[str, str]], reply: str, stage: str,
                    reason: str) -> list[dict[str, str]]:
    """The conversation of a repair turn: the attempt, its reply, and the checker's verdict.

    >>> m = repair_messages([{"role": "user", "content": "design"}], "code", "static", "bad import")
    >>> [x["role"] for x in m], "static" in m[-1]["content"] and "bad import" in m[-1]["content"]
    (['user', 'assistant', 'user'], True)
    """
    return [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": (
        f"The module failed validation at the {stage} stage: {reason}\n\nReturn the complete, "
        "corrected module in one ```python block. Keep the same idea, fix the problem, and "
        "follow the contract.")}]

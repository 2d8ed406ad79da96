"""Designer prompts: a grounding document, a skill, a difficulty and the contract, as chat messages.

The contract text comes from :func:`spadework.env.contract.render_contract` (one source of truth);
memory examples, when given, are archived environments shown with a note on how they played.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spadework.env.contract import render_contract
from spadework.errors import ConfigError
from spadework.skills import Skill

DIFFICULTIES = ("easy", "medium", "hard")

_SYSTEM = (
    "You design interactive text environments that train an AI agent. You write one complete, "
    "self-contained Python module per request, following the contract exactly."
)

_SETTING_RULES = {
    "games": (
        "The agent plays over several turns and answers each turn with \\boxed{...}. Keep hidden "
        "state that is revealed through feedback; the first observation lists the valid actions."
    ),
    "tool-use": (
        "Subclass ToolEnv (from toolenv import ToolEnv). Give it stateful mock data of 10 to 50 "
        "records built from the seed, query tools and mutation tools, one tool that is never "
        "needed, and an instruction sequence of at least three dependent steps."
    ),
}

_STEPS = {"easy": 2, "medium": 3, "hard": 4}


@dataclass(frozen=True)
class MemoryExample:
    """An archived environment shown to the designer, with how it played (e.g. its win rate)."""

    code: str
    note: str


def build_design_prompt(
    document: str,
    skill: Skill,
    *,
    difficulty: str = "medium",
    memory: Sequence[MemoryExample] = (),
) -> list[dict[str, str]]:
    """Chat messages asking the designer for one environment grounded in ``document``.

    >>> from spadework.skills import skill_named
    >>> msgs = build_design_prompt("Tides rise twice a day.", skill_named("causal inference"))
    >>> [m["role"] for m in msgs], "Tides rise" in msgs[1]["content"], "def step" in msgs[1]["content"]
    (['system', 'user'], True, True)
    """
    if difficulty not in DIFFICULTIES:
        raise ConfigError(f"unknown difficulty {difficulty!r}: use one of {', '.join(DIFFICULTIES)}")
    if not document.strip():
        raise ConfigError("the grounding document is empty: sample another document")
    parts = [
        "Read the document, pick one concept or technique from it, and build a multi-turn "
        "environment around it. Do not quote the document in the environment.",
        f"<document>\n{document.strip()}\n</document>",
        f"Skill to exercise: {skill.name}: {skill.description} "
        f"(ideas, not requirements: {'; '.join(skill.ideas)}).",
        f"Difficulty: {difficulty}: winning should take at least {_STEPS[difficulty]} "
        "well-reasoned turns, and random guessing should almost never win.",
        _SETTING_RULES[skill.setting],
        "The contract:\n" + render_contract(),
    ]
    for i, ex in enumerate(memory, 1):
        parts.append(f"Example {i} from earlier designs ({ex.note}):\n```python\n{ex.code.strip()}\n```")
    parts.append("Reply with the complete module in one ```python block.")
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]

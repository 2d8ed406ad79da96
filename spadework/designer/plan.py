"""The designer's plan turn (``DesignConfig.plan``): before a fresh games module, the designer
states its game in three lines (the values drawn, the question, the answer as an expression),
and the module turn that follows asks for that game's code in the same conversation.
"""

from __future__ import annotations

from collections.abc import Sequence

from spadework.designer.guides import SYSTEM
from spadework.designer.prompts import (  # noqa: F401 (build_design_prompt: the doctests)
    CONCEPT,
    DIFFICULTIES,
    PLAN,
    build_design_prompt,
)
from spadework.errors import ConfigError
from spadework.skills import Skill

#: The most tokens a plan reply may take (``DesignConfig.plan``): three short lines.
PLAN_TOKENS = 96

#: What a plan turn asks for, in the order the module then uses it (setup, task, answer).
PLAN_ASK = (
    "Before any code, plan one game for this skill around a concept from the document. Answer "
    "in exactly three short lines, no code block:\n"
    "Values: the numbers or items drawn at random, with their names and ranges.\n"
    "Question: what the agent is asked, using those values.\n"
    "Answer: how the answer is computed from the values, as one Python expression.")

#: How the module turn after a plan asks (it replaces :data:`PLAN`).
AFTER_PLAN = (
    "Now write the GameEnv module for the game you planned: a new class name; setup() draws "
    "your Values from rng and sets self.answer with your Answer expression; task() asks your "
    "Question and shows every value. Do not reuse any example's values, question or "
    "computation.")


def plan_messages(document: str, skill: Skill, difficulty: str = "medium") -> list[dict[str, str]]:
    """The plan turn of a fresh games design (``DesignConfig.plan``): the document and the skill,
    and a request for the game in three lines (values, question, answer expression) before any
    code. Why: the 1.5B designer keeps the example module's setup and computation and changes
    only its words. Measured (docs/results.md, "A plan turn, and no example"): its plans are on
    topic, but its module after one is still the example module (5 of 8 held-out slots copied
    it, as without a plan; 0 of 8 accepted either way), and with no example it copies nothing
    but its modules do not load (0 of 8). Off by default; kept for larger designers and for
    measuring.

    >>> from spadework.skills import skill_named
    >>> m = plan_messages("Tides rise twice a day.", skill_named("causal inference"))
    >>> [x["role"] for x in m], "Tides rise" in m[1]["content"], m[1]["content"].endswith(PLAN_ASK)
    (['system', 'user'], True, True)
    """
    if not document.strip():
        raise ConfigError("the grounding document is empty: sample another document")
    if difficulty not in DIFFICULTIES:
        raise ConfigError(f"unknown difficulty {difficulty!r}: use one of {', '.join(DIFFICULTIES)}")
    parts = [
        "Read the document. You will design a multi-turn text game that exercises a skill.",
        f"<document>\n{document.strip()}\n</document>",
        f"Skill to exercise: {skill.name}: {skill.description} "
        f"(ideas, not requirements: {'; '.join(skill.ideas)}).",
        "The agent must be able to work out the answer from the question alone, so the question "
        "shows every value the answer depends on.",
        PLAN_ASK,
    ]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def after_plan(planned: Sequence[dict[str, str]], plan: str,
               design: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """The module turn after a plan: the plan conversation, its reply, then the design prompt
    ``design`` (:func:`build_design_prompt`) without its document (the plan turn showed it) and
    with :data:`AFTER_PLAN` in place of its lead (:data:`PLAN`, or :data:`CONCEPT` when it
    shows no example).

    >>> from spadework.skills import skill_named
    >>> sk = skill_named("causal inference")
    >>> d = build_design_prompt("Tides rise twice a day.", sk, examples=["class A: ..."])
    >>> m = after_plan(plan_messages("Tides rise twice a day.", sk), "Values: h", d)
    >>> [x["role"] for x in m], "Tides rise" in m[3]["content"], AFTER_PLAN in m[3]["content"]
    (['system', 'user', 'assistant', 'user'], False, True)
    """
    text = design[-1]["content"]
    start, end = text.find("Read the document, pick one concept"), text.find("</document>")
    if start >= 0 and end > start:
        text = text[:start] + text[end + len("</document>"):].lstrip("\n")
    text = text.replace(PLAN, AFTER_PLAN, 1) if PLAN in text else text.replace(CONCEPT, AFTER_PLAN, 1)
    return [*planned, {"role": "assistant", "content": plan.strip() or "(no plan)"},
            {"role": "user", "content": text}]

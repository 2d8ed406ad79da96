"""The skills the designer is asked to exercise, in our own words.

Six cognitive skills for games and six for tool use (the reference's split, spade-reference.md
§4 and §1.6). Each has a description and example ideas that steer the designer without dictating
a design. Which subset is active, and how it rotates across iterations, is curriculum state.
"""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError


@dataclass(frozen=True)
class Skill:
    name: str
    setting: str
    description: str
    ideas: tuple[str, ...]


SKILLS: tuple[Skill, ...] = (
    Skill(
        "mathematical reasoning",
        "games",
        "Work out quantities through several dependent calculation steps.",
        (
            "find a hidden number from divisibility and remainder clues",
            "balance a ledger whose entries are revealed one query at a time",
            "reach a target value with a limited set of arithmetic moves",
        ),
    ),
    Skill(
        "logical deduction",
        "games",
        "Narrow down a hidden configuration from constraints and feedback.",
        (
            "identify a code from per-guess match counts",
            "assign people to roles from clues revealed after each question",
            "find the liar among witnesses whose statements constrain each other",
        ),
    ),
    Skill(
        "spatial reasoning",
        "games",
        "Track positions, directions and shapes on a grid or in space.",
        (
            "navigate a walled grid to an exit with a visible map",
            "rotate and place pieces so that they fit a target outline",
            "locate a hidden cell from distance readings",
        ),
    ),
    Skill(
        "pattern recognition",
        "games",
        "Infer the rule behind a sequence or an arrangement and apply it.",
        (
            "continue a sequence produced by a hidden two-step rule",
            "find the transformation that maps input strings to outputs",
            "spot which item breaks a hidden grouping rule",
        ),
    ),
    Skill(
        "optimization",
        "games",
        "Improve a solution under constraints until it is optimal.",
        (
            "pack items into a knapsack with feedback on value and weight",
            "schedule jobs on machines to minimise the finishing time",
            "find the shortest route through a small weighted graph",
        ),
    ),
    Skill(
        "causal inference",
        "games",
        "Find what causes what by intervening and observing the effects.",
        (
            "discover which switches control which lights in a hidden circuit",
            "identify the faulty component from the results of chosen tests",
            "infer the dependency order of processes from controlled experiments",
        ),
    ),
    Skill(
        "api orchestration",
        "tool-use",
        "Chain calls across several tools where each output feeds the next input.",
        ("book a trip by searching, comparing and reserving", "sync records between two systems"),
    ),
    Skill(
        "data retrieval",
        "tool-use",
        "Find, filter and aggregate records through query tools, including paginated ones.",
        ("report the customer with the most overdue invoices", "sum sales of one region by month"),
    ),
    Skill(
        "state modification",
        "tool-use",
        "Change a system's state correctly through mutation tools and verify the result.",
        ("move files into folders by rule", "adjust stock levels after returns and re-orders"),
    ),
    Skill(
        "error recovery",
        "tool-use",
        "Notice failed or partial tool results and recover with a different approach.",
        ("retry with corrected arguments after a validation error", "work around a locked record"),
    ),
    Skill(
        "tool selection",
        "tool-use",
        "Pick the right tool among similar ones, ignoring tools that do not help.",
        ("choose between a cached and a live lookup", "use the bulk tool instead of many calls"),
    ),
    Skill(
        "multi-step workflows",
        "tool-use",
        "Follow an instruction sequence where each step depends on the previous one.",
        ("onboard an employee across accounts, groups and devices", "close a quarter's books"),
    ),
)


def skills_for(setting: str) -> tuple[Skill, ...]:
    """The skills of one setting ("games" or "tool-use").

    >>> [s.name for s in skills_for("games")][:2]
    ['mathematical reasoning', 'logical deduction']
    """
    found = tuple(s for s in SKILLS if s.setting == setting)
    if not found:
        raise ConfigError(f"unknown setting {setting!r}: use 'games' or 'tool-use'")
    return found


def skill_named(name: str) -> Skill:
    """Look a skill up by name (case-insensitive); the error lists the known names."""
    for s in SKILLS:
        if s.name == name.strip().lower():
            return s
    raise ConfigError(f"unknown skill {name!r}; known skills: {', '.join(s.name for s in SKILLS)}")

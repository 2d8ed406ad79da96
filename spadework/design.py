"""The designer: prompts, and generation of environments with attempts, repair and archiving.

Prompts are built from the contract (:func:`spadework.env.contract.render_contract`, one source
of truth), a grounding document, a skill, a difficulty, and memory from the archive: positives
(environments at the edge of the agent's ability, shown with their code) and negatives (too easy
or too hard, shown with the reason and an excerpt).

:func:`design_environments` fills ``n`` slots. Each slot gets up to ``attempts_per_slot``
attempts, each with a fresh document; all first attempts go to the policy in one batched call,
then the retries of the slots still open, and so on. Every attempt is archived with its prompt,
reply, token ids, logprobs and outcome; extracted code is archived as an accepted or rejected
environment. A share of slots (``mutation_ratio``) edits an archived parent instead
(:mod:`spadework.mutation`).

Training rule for designer samples (the learner reads ``Archive.ready_attempts``, which skips
samples with ``trained_iteration`` set):

- a repair attempt (a follow-up turn that carries the checker's reason) is inference only: it is
  stored already marked as trained, so the learner never trains on it, whether it was accepted
  or not. The reference trains on turn 1 only, for the same reason: the repaired reply was
  conditioned on feedback the designer will not have at sampling time;
- a rejected attempt that is not a repair gets the rejection reward (``rejected_first_attempts =
  "reward"``, credited later by the loop) or is marked trained at once (``"none"``: no gradient).
  The reference gives failed attempts no sample at all (rejection sampling).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spadework.archive.records import DesignAttempt, MemoryNegative
from spadework.env.checker import STAGES as CHECK_STAGES
from spadework.env.checker import CheckConfig
from spadework.env.contract import render_contract
from spadework.errors import ConfigError
from spadework.skills import Skill
from spadework.types import EnvSource

DIFFICULTIES = ("easy", "medium", "hard")

#: The outcome of an attempt whose reply was unusable before extraction (empty, truncated, ...).
REPLY_STAGE = "reply"

#: A reply longer than this is refused unread (a module of this size is never what we asked for).
MAX_REPLY_CHARS = 200_000

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
class DesignConfig:
    """How the designer samples and how many tries it gets.

    ``attempts_per_slot``: fresh tries per slot (each with a new document); ``repair_turns``:
    inference-only follow-ups per failed try, fed the checker's stage and reason; ``corpus_words``:
    the document's word budget; ``memory_positives`` / ``memory_negatives``: archive examples per
    prompt; ``mutation_ratio``: the share of slots that edit an archived parent;
    ``rejected_first_attempts``: "reward" (rejected samples get the rejection reward) or "none"
    (no gradient); ``check_seeds``: seeds solution() must win on.
    """

    setting: str = "games"
    difficulty: str = "medium"
    attempts_per_slot: int = 3
    repair_turns: int = 0
    max_tokens: int = 1024
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20
    corpus_words: int = 400
    memory_positives: int = 2
    memory_negatives: int = 1
    mutation_ratio: float = 0.0
    rejected_first_attempts: str = "reward"
    check_seeds: int = 3

    def __post_init__(self) -> None:
        if self.setting not in _SETTING_RULES:
            raise ConfigError(f"DesignConfig.setting must be 'games' or 'tool-use', got {self.setting!r}")
        if self.difficulty not in DIFFICULTIES:
            raise ConfigError(f"DesignConfig.difficulty must be one of {DIFFICULTIES}, got {self.difficulty!r}")
        for name, low in (("attempts_per_slot", 1), ("repair_turns", 0), ("max_tokens", 1),
                          ("corpus_words", 1), ("memory_positives", 0), ("memory_negatives", 0),
                          ("check_seeds", 1), ("top_k", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"DesignConfig.{name} must be an integer >= {low}, got {value!r}")
        if not 0.0 <= self.mutation_ratio <= 1.0:
            raise ConfigError(f"DesignConfig.mutation_ratio must lie in [0, 1], got {self.mutation_ratio!r}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ConfigError("DesignConfig needs temperature >= 0 and top_p in (0, 1], got "
                              f"{self.temperature!r} and {self.top_p!r}")
        if self.rejected_first_attempts not in ("reward", "none"):
            raise ConfigError("DesignConfig.rejected_first_attempts must be 'reward' or 'none', "
                              f"got {self.rejected_first_attempts!r}")


@dataclass(frozen=True)
class DesignResult:
    """One slot: its skill, the accepted environment (None if every attempt failed), and every
    attempt as archived, in order (repairs included; see :func:`is_repair`)."""

    slot: int
    skill: str
    env: EnvSource | None
    attempts: tuple[DesignAttempt, ...] = field(default_factory=tuple)
    parent_id: str | None = None


@dataclass(frozen=True)
class MemoryExample:
    """An archived environment shown to the designer, with how it played (e.g. its win rate)."""

    code: str
    note: str


def is_repair(attempt: DesignAttempt) -> bool:
    """Whether a designer sample is a repair turn: its prompt carries an earlier reply.

    >>> a = DesignAttempt(0, 0, 1, None, "games", None, ({"role": "user", "content": "x"},
    ...     {"role": "assistant", "content": "y"}, {"role": "user", "content": "fix"}), "", (), (), (), "static")
    >>> is_repair(a)
    True
    """
    return any(m.get("role") == "assistant" for m in attempt.messages)


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
    if difficulty not in DIFFICULTIES:
        raise ConfigError(f"unknown difficulty {difficulty!r}: use one of {', '.join(DIFFICULTIES)}")
    if not document.strip():
        raise ConfigError("the grounding document is empty: sample another document")
    parts = [
        "Read the document, pick one concept or technique from it, and build a multi-turn "
        "environment around it. Do not quote the document in the environment.",
        f"<document>\n{document.strip()}\n</document>",
        *_task_parts(skill, difficulty),
    ]
    for i, ex in enumerate(memory, 1):
        parts.append(f"Example {i} of a well-calibrated earlier design ({ex.note}); use it for "
                     f"structure, but design a different game:\n```python\n{ex.code.strip()}\n```")
    for neg in negatives:
        parts.append(f"Avoid designs like this one, which was {neg.note}:\n```python\n"
                     f"{neg.excerpt.strip()}\n```")
    parts.append("Reply with the complete module in one ```python block.")
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def _task_parts(skill: Skill, difficulty: str) -> list[str]:
    return [
        f"Skill to exercise: {skill.name}: {skill.description} "
        f"(ideas, not requirements: {'; '.join(skill.ideas)}).",
        f"Difficulty: {difficulty}: winning should take at least {_STEPS[difficulty]} "
        "well-reasoned turns, and random guessing should almost never win.",
        _SETTING_RULES[skill.setting],
        "The contract:\n" + render_contract(),
    ]


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


def screen_reply(text: str, finish_reason: str, max_tokens: int) -> str | None:
    """Why a reply is unusable before extraction (empty, truncated, binary, huge), or None.

    >>> screen_reply("", "stop", 100)
    'the reply is empty'
    >>> screen_reply("class A: ...", "length", 100)[:40]
    'the reply was cut at max_tokens=100 (the'
    >>> screen_reply("ok\\x00\\x01", "stop", 100)
    'the reply contains binary data (NUL or control bytes)'
    >>> screen_reply("```python\\nx = 1\\n```", "stop", 100) is None
    True
    """
    if not text.strip():
        return "the reply is empty"
    if len(text) > MAX_REPLY_CHARS:
        return f"the reply is {len(text)} characters, over the {MAX_REPLY_CHARS} cap"
    if finish_reason == "length":
        return (f"the reply was cut at max_tokens={max_tokens} (the module is incomplete); "
                "raise DesignConfig.max_tokens or ask for a shorter module")
    controls = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r")
    if "\x00" in text or controls > max(2, len(text) // 100):
        return "the reply contains binary data (NUL or control bytes)"
    return None


#: What an environment module holds, as looked for in a reply that never became one (see
#: :func:`reply_structure`): a code block, a class, the contract's methods, a returned value.
_MODULE_PARTS = tuple(re.compile(p, re.MULTILINE) for p in (
    r"```\s*py(?:thon)?\b", r"^\s*class\s+\w+", r"^\s*def\s+__init__\s*\(",
    r"^\s*def\s+reset\s*\(", r"^\s*def\s+step\s*\(", r"^\s*def\s+solution\s*\(",
    r"^\s*return\s+\S",
))

#: The validation stages in order, the reply screen first: a rejected attempt's outcome is one.
VALIDATION_ORDER = (REPLY_STAGE, *CHECK_STAGES)


def reply_structure(reply: str) -> float:
    """The share of an environment module's parts present in a reply, in [0, 1].

    The parts: a python code block, a class, ``__init__``, ``reset``, ``step``, ``solution``,
    and a ``return`` of a value. Only a shaping signal for replies that were never extracted
    (truncated, say): it tells prose from the beginnings of a module.

    >>> reply_structure("I will design a game about tides.")
    0.0
    >>> round(reply_structure("```python\\nclass Tides:\\n    def reset(self, seed=None):\\n"), 6)
    0.428571
    """
    return sum(1 for p in _MODULE_PARTS if p.search(reply)) / len(_MODULE_PARTS)


def rejection_progress(attempt: DesignAttempt) -> float:
    """How far a rejected attempt got, in [0, 1) (:func:`spadework.reward.design_progress` over
    :data:`VALIDATION_ORDER`, with :func:`reply_structure` below the first stage). An outcome
    outside the order (an older archive's) counts as the reply stage.

    >>> a = DesignAttempt(0, 0, 0, None, "games", None, (), "```python\\nclass A:", (), (), (), "reply")
    >>> round(rejection_progress(a), 6), round(rejection_progress(replace(a, outcome="load")), 6)
    (0.031746, 0.333333)
    """
    from spadework.reward import design_progress

    stage = VALIDATION_ORDER.index(attempt.outcome) if attempt.outcome in VALIDATION_ORDER else 0
    structure = reply_structure(attempt.reply) if stage == 0 else 0.0
    return design_progress(stage, len(VALIDATION_ORDER), structure)


def design_environments(
    policy: Any,
    sandbox: Any,
    archive: Any,
    corpus: Any,
    *,
    n: int,
    iteration: int,
    run_seed: int,
    skills: Sequence[Skill],
    cfg: DesignConfig,
    check_config: CheckConfig,
    progress: Callable[[str], None] | None = None,
) -> list[DesignResult]:
    """Fill ``n`` design slots (see the module docstring); slot ``i`` exercises
    ``skills[i % len(skills)]``. Returns one :class:`DesignResult` per slot, in slot order.

    ``check_config`` must carry the turn limit the environments will be played with
    (``RunConfig.check``): an environment that needs more turns than play allows cannot be won.
    ``policy`` implements :class:`spadework.policy.Policy`; ``sandbox`` is a started sandbox;
    ``archive`` an open :class:`spadework.archive.Archive`; ``corpus`` a
    :class:`spadework.corpus.Corpus`. Raises ConfigError for a bad request and lets PolicyError
    and ArchiveError through (the loop records them); a bad reply is a rejected attempt.
    """
    from spadework.design_run import DesignRun

    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"n (design slots) must be an integer >= 0, got {n!r}")
    if not skills:
        raise ConfigError("no skills to design for: pass at least one (spadework.skills.skills_for)")
    wrong = [s.name for s in skills if s.setting != cfg.setting]
    if wrong:
        raise ConfigError(f"skills {wrong} are not of setting {cfg.setting!r}; set DesignConfig.setting "
                          "or pass skills_for(setting)")
    run = DesignRun(policy, sandbox, archive, corpus, iteration=iteration, run_seed=run_seed,
                    cfg=cfg, check_config=check_config, progress=progress)
    return run.run([skills[i % len(skills)] for i in range(n)])


__all__ = [
    "DIFFICULTIES", "MAX_REPLY_CHARS", "REPLY_STAGE", "DesignConfig", "DesignResult", "MemoryExample",
    "VALIDATION_ORDER", "build_design_prompt", "design_environments", "is_repair",
    "rejection_progress", "repair_messages", "reply_structure", "screen_reply",
]

"""The designer's prompts: the task parts and the fresh-design, mutation and repair prompts,
built from the contract (:data:`spadework.env.contract.CONTRACT` and ``RULES``, one source of
truth; see :func:`contract_text`) and the standing texts of :mod:`spadework.designer.guides`
(the system prompt, the guides to ``GameEnv`` and ``ToolEnv``, the checklist, repair advice).

A fresh design is grounded in a document and a skill, with memory from the archive: positives
(environments at the edge of the agent's ability, shown with their code) and negatives (too easy
or too hard, named with the reason and what the game is, without code). A mutation shows an
archived parent and asks for a harder, easier or varied child. A repair turn carries the
checker's stage and reason.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from spadework.archive.records import ACCEPTED, MemoryNegative, PlayedDesign
from spadework.designer.guides import CHECKLIST, SETTING_RULES, SYSTEM, repair_advice
from spadework.designer.parents import Parent
from spadework.env.contract import CONTRACT, RULES
from spadework.errors import ConfigError
from spadework.settings.design import DIFFICULTIES
from spadework.skills import Skill

#: How a fresh design's reply starts: a comment naming the document's concept, inside the code
#: block, ties the module to the document rather than to the example. Measured on the 0.5B
#: model's first 8 tune attempts: shown the example and asked for code alone, it returned the
#: example verbatim 8 times (rejected as novelty); asked for a sentence first, it stopped after
#: the sentence or echoed the prompt 7 times.
CONCEPT = ("Inside the code block, start with a comment line `# Concept: ...` that names the "
           "concept.")
PLAN = ("Write a new module in the example's structure for a concept from the document: a new "
        "class name, new state drawn from the seed, a new task text and a new way to compute "
        "the answer; keep the imports it needs. " + CONCEPT)

#: The games prompt's last reminder before the reply instruction: the checklist says it too, but
#: in the system message, ~1,300 tokens before the reply (:func:`design_system`); the 1.5B wrote
#: `self.level = ...` in 2 of 8 designs of run m with the rule in the checklist alone.
LEVEL_REMINDER = "Size the instance from self.level; read it, never assign it."

_STEPS = {"easy": 2, "medium": 3, "hard": 4}

#: Output tokens per line of a typical environment module (the example: 41 lines, ~450
#: tokens), with room for the fence: the line budget a prompt states for ``max_tokens``.
TOKENS_PER_LINE = 16

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


def feedback_section(designs: Sequence[PlayedDesign], lo: float = 0.4, hi: float = 0.6,
                     per_group: int = 3) -> str | None:
    """What happened to the designer's recent environments, for its next designs: grouped as at
    the frontier (unhinted win rate in [lo, hi], highest regret first), too easy (above) and out
    of reach (below, the agent's first replies shown for those it never won), each with its wins
    without and with the hint and the level it reached, and what to aim for. None when nothing
    designed has been played yet.

    >>> d = PlayedDesign("e", "TideEnv", None, 3, 1, 3, 0, 5, 1, 5, ("I think the tide...",))
    >>> print(feedback_section([d]))  # doctest: +NORMALIZE_WHITESPACE
    How your recent environments played against the agent (a small model):
    Out of reach, make games like these easier:
    - TideEnv: won 0 of 5 without the hint and 1 of 5 with it, at level 1 of 3. The agent
      replied: "I think the tide..."
    Aim for games the agent wins sometimes but not always at level 1: every number it needs in
    the task, one or two steps of reasoning, feedback that tells it what to fix.
    """
    if not designs:
        return None
    frontier = sorted((d for d in designs if lo <= d.win_rate <= hi), key=lambda d: -d.regret)
    easy = [d for d in designs if d.win_rate > hi]
    hard = [d for d in designs if d.win_rate < lo]
    lines = ["How your recent environments played against the agent (a small model):"]
    for title, group in (("At the frontier, the kind to make more of", frontier),
                         ("Too easy, make games like these harder", easy),
                         ("Out of reach, make games like these easier", hard)):
        if group:
            lines.append(f"{title}:")
            for d in group[:per_group]:
                said = ""
                if d.replies:
                    said = " The agent replied: " + " / ".join(
                        '"' + " ".join(r.split()) + '"' for r in d.replies)
                lines.append(f"- {d.class_name}: {d.note}.{said}")
    lines.append("Aim for games the agent wins sometimes but not always at level 1: every number "
                 "it needs in the task, one or two steps of reasoning, feedback that tells it "
                 "what to fix.")
    return "\n".join(lines)


#: How :func:`rejection_section` names a checker stage to the designer.
STAGE_NAMES = {
    "reply": "an unfinished or unusable reply",
    "extract": "no usable code block",
    "static": "a forbidden import or statement",
    "load": "failed to load",
    "contract": "broke the contract",
    "determinism": "not the same game for the same seed",
    "solvable": "solution() did not win",
    "visible": "an answer the agent cannot see",
    "readable": "observations without the answer format",
    "not_trivial": "won without working out the answer",
    "novelty": "a copy of an existing game",
}


#: What :func:`rejection_section` says of a reply stopped before its module ended, by finish
#: reason (the reply screen's own reason for it speaks to the operator: ``DesignConfig...``).
_STOPPED = {
    "length": "the reply ran past the length limit, so the module never ended",
    "repeat": "the reply repeated the same lines until it was stopped, so the module never ended",
}


#: A quoted observation or other text of the rejected module in a checker's reason: a quote
#: (single, or double where the text holds an apostrophe, as ``repr`` writes it) opening after
#: a space, colon or parenthesis and running 24 characters or more (or to the end of a reason
#: cut short). In the main job at seed 2 (runs/mechanism-s2t), 6 of the 12 designs
#: shown this section wrote the quoted "On which day of which month is Easter?" of an earlier
#: rejected game into games about Kano, Warsaw's neighbours, Lobachevsky and Dennis Ritchie.
_QUOTED_TEXT = re.compile(r"""(?<=[\s(:])(?:'[^']{24,}(?:'|$)|"[^"]{24,}(?:"|$))""")


def scrub_reason(reason: str) -> str:
    """``reason`` without the rejected module's own text that it quotes (:data:`_QUOTED_TEXT`,
    written ``'...'``), so that a later design reads what failed, not a game to copy.

    >>> scrub_reason("the same observation (last: 'On which day of which month is Easter? Ans")
    "the same observation (last: '...'"
    >>> scrub_reason('the same observation (last: "Women\\'s rights are the rights and entitlements"),')
    "the same observation (last: '...'),"
    >>> scrub_reason("the first observation contains the answer '55'; state the task")
    "the first observation contains the answer '55'; state the task"
    """
    return _QUOTED_TEXT.sub("'...'", reason)


def rejection_section(attempts: Sequence[tuple[str, str, str]], setting: str = "games",
                      stages: int = 3, reason_chars: int = 200) -> str | None:
    """What the checker said of the designer's latest attempts (``(outcome, reason,
    finish_reason)``, latest first, :func:`spadework.archive.memory.recent_attempts`), for its
    next designs: how many were rejected, then the ``stages`` most frequent rejection stages
    (ties: the most recent first), each with the latest reason (cut to ``reason_chars``) and
    what a passing module does instead (:func:`~spadework.designer.guides.repair_advice`). A
    reply stopped at the length limit or in a loop (its finish reason, as a repair turn's
    ``cut``) is described as such: the screen's reason for it names the operator's settings.
    None when none of them was rejected. A repair turn shows one reply's own verdict; this
    shows the designs of a whole stage, to designs that have not been written yet.

    >>> text = rejection_section([("load", "NameError: name 'SIZES' is not defined", "stop"),
    ...                           ("accepted", "", "stop"),
    ...                           ("load", "NameError: name 'x'", "stop")])
    >>> print(text)  # doctest: +NORMALIZE_WHITESPACE
    The checker rejected 2 of your last 3 designs:
    - failed to load (2 of 2): "NameError: name 'SIZES' is not defined". The module must import,
      and the class must be built with Name(max_turns=N, level=L) for every level from 1 to
      LEVELS without errors: define every name you use, and build the puzzle in setup() (or
      reset()).
    Check your module for these mistakes before you reply.
    >>> rejection_section([("accepted", "", "stop")]) is None
    True
    >>> print(rejection_section([("reply", "cut at max_tokens=9; raise DesignConfig.max_tokens",
    ...                           "length"), ("reply", "the reply is empty", "stop")]))
    ... # doctest: +NORMALIZE_WHITESPACE
    The checker rejected 2 of your last 2 designs:
    - an unfinished or unusable reply (2 of 2): "the reply ran past the length limit, so the module
      never ended". Reply with the whole module in one ```python block.
    Check your module for these mistakes before you reply.
    """
    rejected = [a for a in attempts if a[0] != ACCEPTED]
    if not rejected:
        return None
    latest: dict[str, tuple[str, str]] = {}
    for outcome, reason, finish in rejected:  # latest first: the first one seen is the latest
        latest.setdefault(outcome, (reason, finish))
    lines = [f"The checker rejected {len(rejected)} of your last {len(attempts)} designs:"]
    # most_common keeps first-seen order among equal counts: ties list the latest first
    for outcome, count in Counter(a[0] for a in rejected).most_common(stages):
        reason, finish = latest[outcome]
        reason = _STOPPED.get(finish, " ".join(scrub_reason(reason).split()))
        if len(reason) > reason_chars:
            reason = reason[:reason_chars - 3].rstrip() + "..."
        advice = repair_advice(outcome, setting)
        lines.append(f"- {STAGE_NAMES.get(outcome, outcome)} ({count} of {len(rejected)}): "
                     f"\"{reason}\"." + (f" {advice}" if advice else ""))
    lines.append("Check your module for these mistakes before you reply.")
    return "\n".join(lines)


def task_parts(skill: Skill, difficulty: str) -> list[str]:
    """The skill and difficulty paragraphs every design prompt states (fresh designs and
    mutations alike); the setting's rules, contract and checklist are in the system message
    (:func:`design_system`).

    >>> from spadework.skills import skill_named
    >>> parts = task_parts(skill_named("optimization"), "hard")
    >>> len(parts), parts[0].startswith("Skill to exercise: optimization"), "at least 4" in parts[1]
    (2, True, True)
    """
    if difficulty not in DIFFICULTIES:
        raise ConfigError(f"unknown difficulty {difficulty!r}: use one of {', '.join(DIFFICULTIES)}")
    return [
        f"Skill to exercise: {skill.name}: {skill.description} "
        f"(ideas, not requirements: {'; '.join(skill.ideas)}).",
        f"Difficulty: {difficulty}: at the top level, winning should take at least "
        f"{_STEPS[difficulty]} well-reasoned turns, and random guessing should almost never win; "
        "level 1 is a small instance a beginner can win.",
    ]


def design_system(setting: str) -> str:
    """The system message of every design and mutation prompt of ``setting``: the role, the
    setting's rules, the contract and the checklist, the same for every slot. Stated first so
    that the slots of a design call share their opening and the engine computes it once (it
    copies a cached prefix between sequences, ``spadework.policy.llamacpp_cells``): about 1,250
    tokens of a games prompt's ~2,650; the examples, the document and the task follow, per slot.

    >>> text = design_system("games")
    >>> text.startswith(SYSTEM), "The contract:" in text, "Mistakes that get" in text
    (True, True, True)
    >>> "ToolEnv" in text, "ToolEnv" in design_system("tool-use")
    (False, True)
    """
    if setting not in SETTING_RULES:
        raise ConfigError(f"unknown setting {setting!r}: use one of {', '.join(SETTING_RULES)}")
    return "\n\n".join([SYSTEM, SETTING_RULES[setting], "The contract:\n" + contract_text(setting),
                         CHECKLIST[setting]])


def contract_text(setting: str) -> str:
    """The contract as the designer reads it: one line per method (signature, return type, rule)
    and per rule, leaving out the other setting's rule.

    Tool use gets the rules alone: ToolEnv writes ``reset``'s observations, ``step`` and, from
    the steps' calls, ``solution``, and the method lines (which ask for a ``solution()``) read
    against the guide's "do not write solution()".

    A list rather than a class skeleton (:func:`spadework.env.contract.render_contract`'s form):
    small models copied the skeleton verbatim, its placeholder class name, its annotations and
    its rule comments (a quarter of a 1,024-token reply), and filled it with placeholders; the
    example module shows the shape of the code instead. A games prompt that named ToolEnv also
    drew ``from toolenv import ToolEnv`` into games.

    >>> text = contract_text("games")
    >>> "reset(self, seed: int | None = None) -> tuple[str, dict]:" in text, "ToolEnv" in text
    (True, False)
    >>> "ToolEnv" in contract_text("tool-use"), "boxed" in contract_text("tool-use")
    (True, False)
    >>> "solution(self)" in contract_text("tool-use")
    False
    """
    other = {"games": "Tool use:", "tool-use": "Games:"}[setting]
    lines = [f"- {m.signature.removeprefix('def ')} -> {m.returns}"
             f"{'' if m.required else ' (optional)'}: {m.rule}" for m in CONTRACT
             if setting == "games"]
    lines += [f"- {rule}" for rule in RULES if not rule.startswith(other)]
    return "\n".join(lines)


def build_design_prompt(
    document: str,
    skill: Skill,
    *,
    difficulty: str = "medium",
    memory: Sequence[MemoryExample] = (),
    negatives: Sequence[MemoryNegative] = (),
    examples: Sequence[str] = (),
    max_tokens: int | None = None,
    feedback: str | None = None,
) -> list[dict[str, str]]:
    """Chat messages asking the designer for one environment grounded in ``document``.

    ``examples``: complete modules shown for their structure (the run passes
    :func:`spadework.designer.examples.choose_examples` when memory shows no archived design);
    ``max_tokens``: the reply's token budget, stated as a line budget so the module fits;
    ``feedback``: how the designer's recent environments played (:func:`feedback_section`).

    >>> from spadework.skills import skill_named
    >>> msgs = build_design_prompt("Tides rise twice a day.", skill_named("causal inference"),
    ...                            examples=["class TideEnv: ..."], max_tokens=1024)
    >>> system, text = (m["content"] for m in msgs)
    >>> [m["role"] for m in msgs], "Tides rise" in text, "step(self, action: str)" in system
    (['system', 'user'], True, True)
    >>> "class TideEnv: ..." in text, "at most 64 lines" in text
    (True, True)
    """
    if not document.strip():
        raise ConfigError("the grounding document is empty: sample another document")
    parts = []
    if examples:  # first, so that the document and the task are what is read last
        parts.append(examples_block(examples))
    parts += [
        "Read the document, pick one concept or technique from it, and build a multi-turn "
        "environment around it. Do not quote the document in the environment.",
        f"<document>\n{document.strip()}\n</document>",
        *task_parts(skill, difficulty),
    ]
    for i, ex in enumerate(memory, 1):
        parts.append(f"Example {i} of a well-calibrated earlier design ({ex.note}); use it for "
                     f"structure, but design a different game:\n```python\n{ex.code.strip()}\n```")
    for neg in negatives:
        parts.append(negative_line(neg))
    if feedback:
        parts.append(feedback)
    lead = PLAN if examples or memory or skill.setting == "tool-use" else CONCEPT
    if skill.setting == "games":
        lead += " " + LEVEL_REMINDER
    parts.append(lead + " " + reply_instruction(max_tokens))
    return [{"role": "system", "content": design_system(skill.setting)},
            {"role": "user", "content": "\n\n".join(parts)}]


def negative_line(neg: MemoryNegative) -> str:
    """One line naming an archived game the agent always or never won, and what it is; no code
    (a copied excerpt carries names defined outside it).

    >>> from spadework.archive import MemoryNegative
    >>> print(negative_line(MemoryNegative("ab", "NimEnv", "x", 0.0, "too hard", "Nim, 3 heaps.")))
    Avoid designs like NimEnv (Nim, 3 heaps.): it was too hard for the agent (win rate 0.00).
    """
    what = f" ({neg.summary})" if neg.summary else ""
    return (f"Avoid designs like {neg.class_name}{what}: it was {neg.reason} for the agent "
            f"(win rate {neg.win_rate:.2f}).")


def reply_instruction(max_tokens: int | None, new: bool = False) -> str:
    """The prompt's last line: one code block, and how long the module may be so that it fits
    in ``max_tokens`` (a reply cut at the limit is rejected whole).

    >>> print(reply_instruction(512))  # doctest: +NORMALIZE_WHITESPACE
    Reply with the complete module in one ```python block. Keep it short (at most 32 lines,
    no comments) so that it fits in the reply.
    """
    what = "the complete new module" if new else "the complete module"
    text = f"Reply with {what} in one ```python block."
    if max_tokens is not None:
        text += (f" Keep it short (at most {max_lines(max_tokens)} lines, no comments) so that it "
                 "fits in the reply.")
    return text


def max_lines(max_tokens: int) -> int:
    """The line budget stated for a reply of ``max_tokens`` tokens (:data:`TOKENS_PER_LINE`).

    >>> max_lines(1024), max_lines(100)
    (64, 20)
    """
    return max(20, max_tokens // TOKENS_PER_LINE)


def build_mutation_prompt(parent: Parent, skill: Skill, *, difficulty: str = "medium",
                          max_tokens: int | None = None) -> list[dict[str, str]]:
    """Chat messages asking for a changed module derived from ``parent``, in the direction its
    win rate calls for, with the same task parts as a fresh design.

    >>> from spadework.skills import skill_named
    >>> p = Parent("ab" * 32, "class A: ...", "A", 0.95)
    >>> msgs = build_mutation_prompt(p, skill_named("optimization"))
    >>> "harder" in msgs[1]["content"] and "class A: ..." in msgs[1]["content"]
    True
    """
    rate = "not played yet" if parent.win_rate is None else f"win rate {parent.win_rate:.2f}"
    if parent.played is not None:
        rate = parent.played.note
    parts = [
        f"Here is an existing environment for the skill {skill.name} ({rate}):\n```python\n"
        f"{parent.code.strip()}\n```",
        _ASK[parent.direction],
        *task_parts(skill, difficulty),
        "Give its class a new name. " + reply_instruction(max_tokens, new=True),
    ]
    return [{"role": "system", "content": design_system(skill.setting)},
            {"role": "user", "content": "\n\n".join(parts)}]


def repair_messages(messages: Sequence[dict[str, str]], reply: str, stage: str,
                    reason: str, *, cut: bool = False, max_tokens: int | None = None,
                    setting: str = "games") -> list[dict[str, str]]:
    """The conversation of a repair turn: the attempt, its reply, the checker's verdict and
    what a passing module does instead (:data:`REPAIR_ADVICE`). ``cut``: the reply ended at
    ``max_tokens``; the model is told so and asked for a shorter module (the screen's reason
    speaks to the user, who may raise the limit, not to the model).

    >>> m = repair_messages([{"role": "user", "content": "design"}], "code", "static", "bad import")
    >>> [x["role"] for x in m], "static" in m[-1]["content"] and "bad import" in m[-1]["content"]
    (['user', 'assistant', 'user'], True)
    >>> "at most 32 lines" in repair_messages([], "class A:", "reply", "cut", cut=True,
    ...                                       max_tokens=512)[-1]["content"]
    True
    """
    return [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": (
        f"{_verdict(stage, reason, cut, setting)}\n\nFix the problem, keep the same idea and follow the "
        "contract. " + reply_instruction(max_tokens, new=False).replace("Reply with", "Return", 1))}]


def _verdict(stage: str, reason: str, cut: bool, setting: str = "games") -> str:
    if cut:
        return ("Your reply was cut off at the length limit before the module ended, so it "
                "was rejected. Write a much shorter module with the same idea.")
    return (f"The module failed validation at the {stage} stage: {reason}\n\n"
            f"{repair_advice(stage, setting)}").rstrip()


#: How a fresh repair's verdict opens: what marks its prompt as a repair
#: (:func:`spadework.designer.credit.is_repair`), since it holds no earlier reply.
REPAIR_MARK = "An earlier reply to this request was"

#: How the example module's block opens in a design prompt (:func:`build_design_prompt`).
EXAMPLE_INTRO = "Here is an example of a complete environment module that passes every check."
#: The same for several example modules (``DesignConfig.examples`` > 1).
EXAMPLES_INTRO = "Here are {n} examples of complete environment modules that pass every check."
#: Where the example block ends and the task begins.
TASK_START = "Now your task.\n\n"


def examples_block(examples: Sequence[str]) -> str:
    """The prompt's opening block showing ``examples``, ended by :data:`TASK_START`.

    >>> print(examples_block(["class A: ..."]))  # doctest: +ELLIPSIS
    Here is an example ... never its topic or its code.
    ```python
    class A: ...
    ```
    <BLANKLINE>
    Now your task.
    >>> examples_block(["class A: ...", "class B: ..."]).startswith("Here are 2 examples")
    True
    """
    if len(examples) == 1:
        head = (f"{EXAMPLE_INTRO} Its topic is only an illustration: reuse its structure, never its "
                "topic or its code.")
    else:
        head = (EXAMPLES_INTRO.format(n=len(examples)) + " Each plays a different game; their topics "
                "and games are only illustrations: reuse their structure (GameEnv, setup with "
                "self.answer, task, hint), and write a game unlike any of them, never their code.")
    blocks = "\n\n".join(f"```python\n{e.strip()}\n```" for e in examples)
    return f"{head}\n{blocks}\n\n{TASK_START.rstrip()}"


def fresh_repair_messages(messages: Sequence[dict[str, str]], stage: str, reason: str, *,
                          cut: bool = False, drop_example: bool = False,
                          setting: str = "games") -> list[dict[str, str]]:
    """A repair as a new request: the attempt's own prompt with the verdict on its rejected
    reply, but not the reply itself (``DesignConfig.repair = "fresh"``). Measured in three
    ``cpu-qwen`` runs: asked in the same chat (:func:`repair_messages`), the 1.5B designer
    returned its rejected reply character for character in 10 of 14 distinct repairs, and
    none was accepted; a model that does not see its reply cannot copy it. ``drop_example``: leave out
    the example module too (after a copy of it, a novelty rejection), asking for the concept
    comment instead of the example's structure. Measured on those runs' 14 distinct rejected
    first attempts (``benchmarks/design_repair.py``): no copy of the rejected reply (0 of 14,
    against 10 of 14 in chat), but none accepted either (0 of 14 both ways): without its reply
    or the example the 1.5B writes modules cut at 1,024 tokens (5), copies of the example (3),
    or ones failing the static (3), load (2) or extract (1) stage. So "chat" stays the default.

    >>> msgs = [{"role": "system", "content": "S"}, {"role": "user", "content":
    ...         EXAMPLE_INTRO + " x\\n```python\\nclass A: ...\\n```\\n\\nNow your task.\\n\\nDoc.\\n\\n"
    ...         + PLAN + " Reply."}]
    >>> out = fresh_repair_messages(msgs, "novelty", "a copy", drop_example=True)
    >>> [m["role"] for m in out], "class A" in out[1]["content"], out[1]["content"].startswith("Doc.")
    (['system', 'user'], False, True)
    >>> text = out[1]["content"]
    >>> "rejected at the novelty stage: a copy" in text, text.endswith(CONCEPT + " Reply.")
    (True, True)
    """
    *head, last = [dict(m) for m in messages]
    text = last["content"]
    if drop_example and text.startswith((EXAMPLE_INTRO, EXAMPLES_INTRO.split("{n}")[0])) \
            and TASK_START in text:
        text = text.split(TASK_START, 1)[1].replace(PLAN, CONCEPT, 1)
    verdict = (f"{REPAIR_MARK} cut off at the length limit before its module ended. Write a "
               "much shorter module." if cut else
               f"{REPAIR_MARK} rejected at the {stage} stage: {reason}\n"
               f"{repair_advice(stage, setting)}".rstrip())
    body, _, ask = text.rpartition("\n\n")
    last["content"] = (f"{body}\n\n{verdict} Write a new module that does not repeat that "
                       f"mistake.\n\n{ask}" if body else f"{verdict}\n\n{text}")
    return [*head, last]

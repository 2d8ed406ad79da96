"""Every text the designer is shown: the system prompt, the task parts, and the fresh-design,
mutation and repair prompts, built from the contract (:data:`spadework.env.contract.CONTRACT`
and ``RULES``, one source of truth; see :func:`contract_text`) and, for tool use, the guide to
subclassing ``ToolEnv``.

A fresh design is grounded in a document and a skill, with memory from the archive: positives
(environments at the edge of the agent's ability, shown with their code) and negatives (too easy
or too hard, shown with the reason and an excerpt). A mutation shows an archived parent and asks
for a harder, easier or varied child. A repair turn carries the checker's stage and reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spadework.archive.records import MemoryNegative, PlayedDesign
from spadework.designer.parents import Parent
from spadework.env.contract import CONTRACT, RULES
from spadework.errors import ConfigError
from spadework.settings.design import DIFFICULTIES
from spadework.skills import Skill

SYSTEM = (
    "You design interactive text environments that train an AI agent. You write one complete, "
    "self-contained Python module per request, following the contract exactly."
)

#: How to write a ToolEnv subclass, for the tool-use designer prompt. The example is executed by
#: the tests (tests/env/test_toolenv.py), so it stays true to ``spadework.env.toolenv``.
SUBCLASS_GUIDE = '''\
Write the environment as a subclass of ToolEnv (`from toolenv import ToolEnv, ToolError,
render_record, render_records`). The base class parses replies, checks arguments against your
schemas, runs the calls, reveals the steps one by one, counts turns, judges the <answer> and
writes the solution; you write only the domain:

- declare_tools(self) -> {name: {"description": str, "parameters": JSON schema object}} with
  "required", "enum", "minimum" etc. where they apply; each tool is a method tool_<name>(**args)
  returning a string (render_record / render_records format records compactly). Raise
  ToolError("reason") for a failure the agent should read (not found, not allowed).
- LEVELS = 3 and three steps: level 1 plays step 1, level 2 steps 1-2, level 3 all of them.
- reset(self, seed=None): build 10-50 records from random.Random(seed) and end with
  `return self.start(intro, self.steps_for_level([self.call_step(text, tool, **args), ...]))`.
  Each step is the one call that does it: the step is done once that tool is called with those
  arguments, and the base class's solution() makes exactly these calls, in order.
- expected_answer(self): the final answer of the whole task, computed from the state after the
  steps' calls (default "done"). Do not write solution(): the base class writes it.

Example:

import random
from toolenv import ToolEnv, ToolError

class PantryEnv(ToolEnv):
    LEVELS = 3

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
        self.stock = {f"item{i}": rng.randint(4, 9) for i in range(12)}
        self.target = rng.choice(sorted(self.stock))
        half = self.stock[self.target] // 2
        return self.start("You keep a pantry.", self.steps_for_level([
            self.call_step(f"Check how many {self.target} are in stock.",
                           "count", item=self.target),
            self.call_step(f"Use half of the {self.target} (rounded down).",
                           "use", item=self.target, units=half),
            self.call_step(f"Use 1 more {self.target}, then answer with how many are left.",
                           "use", item=self.target, units=1)]))

    def tool_count(self, item):
        return f"{item}: {self.stock[item]}"

    def tool_use(self, item, units):
        if units > self.stock[item]:
            raise ToolError(f"only {self.stock[item]} {item} left")
        self.stock[item] -= units
        return f"{item}: {self.stock[item]} left"

    def tool_weather(self):
        return "sunny"

    def expected_answer(self):
        return str(self.stock[self.target])
'''

#: The guide's example module alone: what the tests check and the novelty index holds.
TOOL_EXAMPLE = SUBCLASS_GUIDE[SUBCLASS_GUIDE.index("import random"):]

#: How to write a GameEnv subclass, for the games designer prompt (the example module the
#: prompt shows is one; tests/test_design_prompts.py checks it passes the checker).
GAMEENV_GUIDE = """\
Write the game as a subclass of GameEnv (`from gameenv import GameEnv`). GameEnv counts turns,
reads the agent's move from its \\boxed{...}, ends the game after max_turns moves and writes
every observation so that a small agent can read it. Do not write __init__, reset or step. You
write only:
- LEVELS = 3, and setup(self, rng): build the instance for self.level from rng (a
  random.Random). Level 1 is easy enough to win in one or two careful moves; a higher level is
  a bigger instance (more digits, a wider range, more items), never new rules.
- task(self): the task and its current state, with every number and rule the answer depends
  on: the agent must be able to work out the answer from this text alone.
- example(self): one concrete legal move that is not the answer, such as "7" or "3 + 4".
- judge(self, move): move is the text inside the agent's box. Return (self.WIN, message),
  (self.LOSE, message) when the game is lost for good, (self.CONTINUE, message) for a legal
  move that did not win (update the state), or (self.INVALID, message) for an illegal move.
- solution(self): self.box(answer), or a list of moves, computed from what task() shows.
- hint(self), optionally: a clue that helps without giving the answer."""

SETTING_RULES = {
    "games": (
        "The agent plays over several turns and answers each turn with one move in a box. "
        + GAMEENV_GUIDE
    ),
    "tool-use": (
        "Give the ToolEnv subclass stateful mock data of 10 to 50 records built from the seed, "
        "query tools and mutation tools, one tool that is never needed, and an instruction "
        "sequence of at least three dependent steps.\n\n" + SUBCLASS_GUIDE
    ),
}

#: The mistakes that most often got a small model's module rejected (``benchmarks/
#: designer_validity.py``, read from the checker's reasons), stated as rules to keep. Each says
#: what the checker enforces; none is a new rule.
CHECKLIST = {
    "games": (
        "Mistakes that get a module rejected, so avoid them:\n"
        "- Hiding what the answer depends on. task() must show every number the answer is "
        "computed from; a game whose answer is a hidden number the agent can only guess is "
        "rejected.\n"
        "- Showing the answer. task() shows the values the answer is computed from, never the "
        "answer itself (a next term drawn and then printed in the sequence is a leak).\n"
        "- A name you did not define: a constant such as NAMES or a helper used by a method "
        "must be defined in your module, and rng exists only inside setup().\n"
        "- A placeholder as the example: example() returns a real move such as \"12\", never "
        "\"N\", \"number\" or \"...\".\n"
        "- judge() returns exactly two values: one of self.WIN, self.LOSE, self.CONTINUE, "
        "self.INVALID, and a message string.\n"
        "- solution() returns self.box(...) or a list of them, computed from the state built in "
        "setup().\n"
        "- Every method has a working body: no pass, no ..., no placeholder comments, no "
        "NotImplementedError.\n"
        "- Import every module you use (`import random`, `from gameenv import GameEnv`) at the "
        "top.\n"
        "- Name the class after your game, not YourEnv."
    ),
    "tool-use": (
        "Mistakes that get a module rejected, so avoid them:\n"
        "- reset() ends with `return self.start(intro, self.steps_for_level([self.call_step(...), "
        "...]))`.\n"
        "- Each step is self.call_step(text, tool, **args) with the exact arguments that do it, "
        "and every such call succeeds from the state reset() builds (a value in the tool's enum, "
        "a record that exists). Do not write solution(); the base class makes the steps' calls "
        "and answers expected_answer().\n"
        "- The answer is a value such as 15 or EV-104, computed from the state, never a "
        "sentence.\n"
        "- Use only the helpers ToolEnv has: self.start, self.steps_for_level, self.call_step, "
        "self.called.\n"
        "- Every method has a working body: no pass, no ..., no placeholder comments, no "
        "NotImplementedError.\n"
        "- Import every module you use at the top.\n"
        "- Name the class after your task, not YourEnv."
    ),
}

#: What to do about a rejection at each stage, for the repair turn (the checker's reason says
#: what failed; this says what a module that passes does instead).
REPAIR_ADVICE = {
    "reply": "Reply with the whole module in one ```python block.",
    "extract": "Reply with exactly one ```python block holding the whole module, with a body in "
               "every method and valid Python syntax.",
    "static": "Import only allowed standard-library modules (such as random, re, math, "
              "itertools, collections) and put nothing but imports, constants, functions and "
              "classes at the top level.",
    "load": "The module must import, and the class must be built with Name(max_turns=N, "
            "level=L) for every level from 1 to LEVELS without errors: define every name you "
            "use, and build the puzzle in setup() (or reset()).",
    "contract": "reset() returns (str, dict); step() returns (str, float, bool, bool, dict); "
                "count turns and set truncated=True once self.turn >= self.max_turns.",
    "determinism": "Draw every random choice from rng = random.Random(seed) created in reset(), "
                   "and keep no state from one episode to the next.",
    "solvable": "solution() must return the reply (or the list of replies) that wins from the "
                "current state: compute the answer in setup() (or reset()), and make judge() "
                "return self.WIN for exactly that move (or step() reward 1.0 and "
                "terminated=True).",
    "visible": "The agent must be able to work the answer out from what it is shown: put every "
               "number and rule the answer depends on into task() (the first observation), or "
               "make the answer something the feedback narrows down move by move, and make "
               "solution() play only from what has been shown.",
    "readable": "Subclass GameEnv, which writes readable observations for you; or end the first "
                "observation and every later one with the answer format and a concrete example "
                "move, e.g. 'Reply with your guess in a box, for example \\boxed{5}.'",
    "not_trivial": "Random, empty or repeated replies won too often (at the top level, or more "
                   "often at a higher level than a lower one), one seed's solution() won other "
                   "seeds, or the first observation shows the answer: draw the puzzle's values "
                   "from the seed, make the answer something that must be worked out from them, "
                   "and make each level harder than the one below.",
    "novelty": "Design a different game, not a copy of an existing one.",
}
#: The advice that differs for a ToolEnv subclass (setting ``tool-use``).
TOOL_REPAIR_ADVICE = {
    "contract": "Declare a tool in declare_tools() only with its method tool_<name>(**args), and "
                "give each tool's parameters as a JSON schema of type object.",
    "solvable": "Write each step as self.call_step(text, tool, **args) with the exact arguments "
                "that do it, make each of those calls succeed from the state reset() builds, do "
                "not write solution() (the base class makes the steps' calls and answers "
                "expected_answer()), and return a value from expected_answer(), not a sentence.",
    "novelty": "Design a different task, not a copy of an existing one.",
}


def repair_advice(stage: str, setting: str = "games") -> str:
    """What a passing module does instead of failing at ``stage``, for ``setting``.

    >>> "call_step" in repair_advice("solvable", "tool-use"), "judge()" in repair_advice("solvable")
    (True, True)
    """
    if setting == "tool-use" and stage in TOOL_REPAIR_ADVICE:
        return TOOL_REPAIR_ADVICE[stage]
    return REPAIR_ADVICE.get(stage, "")

#: How a fresh design's reply starts: a comment naming the document's concept, inside the code
#: block, ties the module to the document rather than to the example. Measured on the 0.5B
#: model's first 8 tune attempts: shown the example and asked for code alone, it returned the
#: example verbatim 8 times (rejected as novelty); asked for a sentence first, it stopped after
#: the sentence or echoed the prompt 7 times.
CONCEPT = ("Inside the code block, start with a comment line `# Concept: ...` that names the "
           "concept.")
PLAN = ("Write a new module in the example's structure for a concept from the document: a new "
        "class name, new state drawn in reset(), a new task text and a new way to compute the "
        "answer; keep the imports it needs. " + CONCEPT)

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


def task_parts(skill: Skill, difficulty: str) -> list[str]:
    """The skill, difficulty, setting and contract paragraphs every design prompt states (fresh
    designs and mutations alike, so both modes state the same contract).

    >>> from spadework.skills import skill_named
    >>> parts = task_parts(skill_named("optimization"), "hard")
    >>> "at least 4" in parts[1], parts[-2].startswith("The contract:"), "self.WIN" in parts[-1]
    (True, True, True)
    """
    if difficulty not in DIFFICULTIES:
        raise ConfigError(f"unknown difficulty {difficulty!r}: use one of {', '.join(DIFFICULTIES)}")
    return [
        f"Skill to exercise: {skill.name}: {skill.description} "
        f"(ideas, not requirements: {'; '.join(skill.ideas)}).",
        f"Difficulty: {difficulty}: at the top level, winning should take at least "
        f"{_STEPS[difficulty]} well-reasoned turns, and random guessing should almost never win; "
        "level 1 is a small instance a beginner can win.",
        SETTING_RULES[skill.setting],
        "The contract:\n" + contract_text(skill.setting),
        CHECKLIST[skill.setting],
    ]


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
    >>> text = msgs[1]["content"]
    >>> [m["role"] for m in msgs], "Tides rise" in text, "step(self, action: str)" in text
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
        parts.append(f"Avoid designs like this one, which was {neg.note}:\n```python\n"
                     f"{neg.excerpt.strip()}\n```")
    if feedback:
        parts.append(feedback)
    lead = PLAN if examples or memory or skill.setting == "tool-use" else CONCEPT
    parts.append(lead + " " + reply_instruction(max_tokens))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


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
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


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
                "and games are only illustrations: reuse their structure (GameEnv, setup, task, "
                "example, judge, solution, hint), and write a game unlike any of them, never their "
                "code.")
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

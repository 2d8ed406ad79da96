"""The designer's standing texts: the system prompt, the guides to subclassing ``GameEnv`` and
``ToolEnv`` (with the example module the tool-use prompt shows), the rules per setting, the
checklist of common mistakes and the repair advice per checker stage. Plain constants, no
imports: :mod:`spadework.designer.prompts` builds the prompts from them.
"""

from __future__ import annotations

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
  random.Random) and compute self.answer from it: a whole number (or one word). self.level (1
  to LEVELS) is given: read it, never assign it. Level 1 is easy enough to win in one or two
  careful moves; a higher level is a bigger instance (more digits, a wider range, more items),
  never new rules.
- task(self): the task and its current state, with every number and rule the answer depends
  on: the agent must be able to work out the answer from this text alone.
- hint(self), optionally: a clue that helps without giving the answer.
With self.answer set, GameEnv does the rest: it shows a number from the task as the example
move, tells the agent whether a wrong number is too high or too low, and wins on self.answer.
Only a game with different kinds of moves (a path, a sequence of actions) also writes:
- example(self): one concrete legal move that is not the answer, such as "7" or "3 + 4".
- judge(self, move): move is the text inside the agent's box. Return (self.WIN, message),
  (self.LOSE, message) when the game is lost for good, (self.CONTINUE, message) for a legal
  move that did not win (update the state), or (self.INVALID, message) for an illegal move.
- solution(self): the list of winning moves, each as self.box(move), computed from the state."""

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
        "- Assigning self.level. It is the level you are asked to build (1 to LEVELS): read it "
        "to size the instance, never write self.level = ...; store your own values under other "
        "names.\n"
        "- No self.answer. A game with one answer sets self.answer in setup(), computed from "
        "the values task() shows, and writes no judge() or solution().\n"
        "- If you write judge(), it returns exactly two values: one of self.WIN, self.LOSE, "
        "self.CONTINUE, self.INVALID, and a message string; solution() returns a list of "
        "self.box(...) moves that judge() accepts.\n"
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
                "current state: compute the answer in setup() as self.answer and leave judge() "
                "and solution() to GameEnv, or make your judge() return self.WIN for exactly "
                "your solution's move (or step() reward 1.0 and terminated=True).",
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

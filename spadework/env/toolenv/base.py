"""The tool-use base class: a subclass declares tools, their methods and an instruction
sequence, and :class:`ToolEnv` turns them into the text-in, text-out environment contract; its
docstring states the episode rules. Standard library only.

Departures from the reference's base class: arguments are checked against the schema before a
tool runs (the reference passed them unchecked and showed Python's TypeError); several calls per
reply are executed; turns are counted for tool turns too; a wrong final answer is not free to
retry forever; numeric answers compare at 1e-6 relative, not 0.01.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass

from .calls import (
    MAX_DEPTH,
    ToolCall,
    ToolCallFormatError,
    fit_replies,
    format_tool_call,
    parse_answer,
    parse_bare_call,
    parse_tool_calls,
    too_deep,
)
from .declare import declarations, first_fillable_call, tool_signature
from .render import answers_match, render_result
from .schema import coerce_integers, same_value, schema_error


class ToolError(Exception):
    """Raised by a ``tool_<name>`` method for a failure the agent should see and can recover from
    (record not found, insufficient funds, ...). Its message becomes the tool result. Any other
    exception from a tool is a bug in the environment and propagates."""


@dataclass(frozen=True)
class Instruction:
    """One step of the task: the text shown to the agent, and ``done()`` which says, from the
    environment's state, whether the step's goal has been met. ``calls`` are the calls that do
    the step when it was written with :meth:`ToolEnv.call_step`; the default
    :meth:`ToolEnv.solution` makes them."""

    text: str
    done: Callable[[], bool]
    calls: tuple[ToolCall, ...] = ()


class ToolEnv:
    """Base class of tool-use environments.

    A subclass implements:

    * ``declare_tools() -> {name: {"description": str, "parameters": <JSON schema object>}}``
      and a method ``tool_<name>(**arguments)`` per tool returning a string (or a dict/list,
      rendered compactly); raise :class:`ToolError` for failures the agent should see;
    * ``reset(seed=None)``: build state from ``random.Random(seed)``, then
      ``return self.start(intro, [Instruction(text, done), ...])``;
    * ``solution()``: the winning list of replies, written with :meth:`reply_call` and
      :meth:`reply_answer`, computed from the state. Not needed when every step is written
      with :meth:`call_step`: the default makes each step's call, then answers what
      :meth:`expected_answer` gives once they are made;
    * optionally ``expected_answer()`` (default ``"done"``) or ``check_answer(given)``.

    Episode rules, enforced here so that every tool environment plays the same way:

    * Each :meth:`step` is one turn, tool turns included; ``truncated`` is True when
      ``max_turns`` turns are used without ending the episode.
    * A reply's tool calls run in order, at most :attr:`max_calls_per_turn` (8) per turn; the
      rest are skipped and the observation says so. Arguments are checked against the schema
      first; errors (bad types, unknown or missing arguments, unknown tool) come back as the
      tool's result, never raised.
    * Instructions are revealed one at a time: after each successful call, while the open
      step's ``done()`` holds, the next instruction is appended to that call's result.
    * ``<answer>`` in a reply without tool calls is judged: before all steps are done it is
      refused and the open step is named (reward 0); after, a correct answer wins (1.0,
      terminated); a wrong one uses up one of :attr:`answer_attempts` (1), and the last one
      ends the episode (0.0, terminated). An answer in a reply that also calls tools is ignored.
    * A reply with neither a tool call nor an answer, or with a malformed call, gets format
      feedback and :attr:`format_penalty` (-0.05): small enough never to outweigh a win, large
      enough to rank a silent episode below an honest wrong answer. A reply that is one bare
      JSON call object without the tags (``parse_bare_call``) is run as that call, and the
      result says to use the tags next time.
    * Every observation of a running episode ends with the open step and the reply format
      (:meth:`_status`); the first shows a concrete call (:meth:`example_call`), never a
      placeholder.
    * With ``LEVELS`` > 1 and :meth:`steps_for_level`, a level below the top plays the first
      ``level`` steps and is won as soon as they are done, without a final answer.

    Why the last three: the base Qwen2.5-Coder-0.5B, on a one-step calendar task, wrote bare
    JSON calls, copied the placeholder ``"tool_name"``, and, once its call had done the step,
    called tools again instead of answering (``benchmarks/starter_levels.py``, docs/results.md).
    """

    max_calls_per_turn = 8
    answer_attempts = 1
    format_penalty = -0.05
    list_tools_in_observation = True
    LEVELS = 1
    """How many difficulty levels (default 1). With ``LEVELS = 3`` and a task of three steps,
    :meth:`steps_for_level` plays the first ``level`` steps and :meth:`solution_for_level` the
    replies they need: level 1 is one step, the top level the whole task."""

    def __init__(self, max_turns: int = 10, level: int = 1, **kwargs) -> None:
        levels = type(self).LEVELS
        if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
            raise ValueError(f"LEVELS must be a whole number >= 1, got {levels!r}")
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= levels:
            raise ValueError(f"level must be a whole number from 1 to LEVELS={levels}, "
                             f"got {level!r}")
        self.max_turns = int(max_turns)
        self._level = level
        self._won_by_steps = False
        self.options = dict(kwargs)
        self.turn_count = 0
        self.call_history: list[ToolCall] = []
        self._instructions: tuple[Instruction, ...] = ()
        self._instruction_index = 0
        self._attempts_left = self.answer_attempts
        self._started = False
        self._over = False

    # -- to implement -------------------------------------------------------------------------

    def declare_tools(self) -> dict[str, dict]:
        raise NotImplementedError("declare_tools() must return {name: {description, parameters}}")

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        raise NotImplementedError("reset() must build the state and return self.start(...)")

    def solution(self) -> list[str]:
        """The winning replies. Default, for a task whose every step was written with
        :meth:`call_step`: each step's call, in order, then at the top level the answer
        :meth:`expected_answer` gives once the calls are made (computed on a copy of the
        environment, so this one is untouched); below it the calls of the level's steps alone
        (:meth:`steps_for_level`). A step written as ``Instruction(text, done)`` has no
        call to replay: such a task writes ``solution()`` itself.

        Why: the commonest rejection of a small designer's tool environment (16 of 40 modules
        of the 1.5B, docs/results.md) was a ``solution()`` whose calls did not make the
        steps' ``done()`` true or that stopped before the answer; a step written once as its
        call cannot disagree with the solution."""
        self._require_started()
        steps = self._instructions  # the level's steps, as steps_for_level kept them
        loose = [k + 1 for k, step in enumerate(steps) if not step.calls]
        if not steps or loose:
            raise NotImplementedError(
                "solution() must return the winning list of replies: write it, or write every "
                "step as self.call_step(text, tool, **arguments)"
                + (f" (step {', '.join(map(str, loose))} is an Instruction without a call)"
                   if steps else ""))
        calls = [c for step in steps for c in step.calls]
        replies = [self.reply_call(c.name, **c.arguments) for c in calls]
        after = self._after_calls(calls)  # checks every call, on a copy
        if self._won_by_steps:  # won as soon as the level's steps are done
            return self.fit_turns(replies)
        return self.fit_turns([*replies, self.reply_answer(after.expected_answer())])

    def expected_answer(self) -> str:
        """The final answer, computed from the state when the answer is judged."""
        return "done"

    def check_answer(self, given: str) -> bool:
        return answers_match(given, str(self.expected_answer()))

    @property
    def level(self) -> int:
        """The level this instance was built at (1 to LEVELS); read-only, as in GameEnv."""
        return self._level

    @level.setter
    def level(self, value: object) -> None:
        raise AttributeError(f"self.level is the level the environment was built at "
                             f"({self._level}); store your own values under another name")

    @property
    def whole_task(self) -> bool:
        """True at the top level, where every step is played and the final answer is judged;
        below it the episode is won when the steps played are done (:meth:`steps_for_level`)."""
        return self._level >= type(self).LEVELS

    # -- helpers for subclasses ---------------------------------------------------------------

    def steps_for_level(self, instructions: list[Instruction] | tuple) -> list[Instruction]:
        """The instructions this level plays: all of them at the top level; below it the first
        ``level`` (at least one), and the episode is won as soon as they are done, with no
        final answer. Measured with the base Qwen2.5-Coder-0.5B on a one-step calendar task: it
        made the right call and then called tools again instead of answering ``done``.

        >>> class Two(ToolEnv):
        ...     LEVELS = 2
        >>> steps = [Instruction("Find it.", bool), Instruction("Fix it; answer its id.", bool)]
        >>> low, top = Two(level=1), Two(level=2)
        >>> [i.text for i in low.steps_for_level(steps)], len(top.steps_for_level(steps))
        (['Find it.'], 2)
        """
        steps = list(instructions)
        self._won_by_steps = not self.whole_task and len(steps) > 1
        return steps[: self._level] if self._won_by_steps else steps

    def call_step(self, text: str, tool: str, /, **arguments: object) -> Instruction:
        """A step done by one call: ``done()`` holds once ``tool`` has been called successfully
        with these arguments (and maybe more), and the default :meth:`solution` makes that call.
        Write every step this way and ``solution()`` need not be written.

        >>> class Desk(ToolEnv):
        ...     def declare_tools(self):
        ...         return {"file": {"description": "File a form.", "parameters": {
        ...             "type": "object", "required": ["form"],
        ...             "properties": {"form": {"type": "string"}}}}}
        ...     def tool_file(self, form):
        ...         self.filed = form
        ...         return f"{form} filed"
        ...     def expected_answer(self):
        ...         return self.filed
        ...     def reset(self, seed=None):
        ...         self.filed = ""
        ...         return self.start("A desk.", [self.call_step("File form B-2.", "file", form="B-2")])
        >>> env = Desk()
        >>> _ = env.reset(seed=0)
        >>> env.solution()
        ['<tool_call>\\n{"name": "file", "arguments": {"form": "B-2"}}\\n</tool_call>', '<answer>B-2</answer>']
        """
        arguments = dict(arguments)
        return Instruction(text, lambda: self.called(tool, **arguments),
                           (ToolCall(tool, arguments),))

    def solution_for_level(self, replies_per_step: list[list[str]], answer: object) -> list[str]:
        """The winning replies at this level, from the replies each step needs (in order) and
        the whole task's final ``answer``: the steps :meth:`steps_for_level` keeps, then the
        answer at the top level (below it the last step's calls win), merged by
        :meth:`fit_turns`."""
        cut = not self.whole_task and len(replies_per_step) > 1
        played = replies_per_step[: self._level] if cut else replies_per_step
        replies = [r for step in played for r in step]
        return self.fit_turns(replies if cut else [*replies, self.reply_answer(answer)])

    def start(self, intro: str, instructions: list[Instruction] | tuple = ()) -> tuple[str, dict]:
        """Begin an episode (call at the end of ``reset``): clears turns, history and progress,
        and returns the first observation: the intro, the first instruction, the tools and the
        reply format. Raises ValueError when the first step's goal already holds, because such
        an environment can be won without doing anything."""
        self.turn_count = 0
        self.call_history = []
        self._instructions = tuple(instructions)
        self._instruction_index = 0
        self._attempts_left = self.answer_attempts
        self._started, self._over = True, False
        if self._instructions and self._instructions[0].done():
            raise ValueError("the goal of step 1 is already met at reset; the task is trivial")
        parts = [intro.strip()]
        if self._instructions:
            parts.append(f"Instruction (step 1 of {len(self._instructions)}): "
                         f"{self._instructions[0].text}")
        if self.list_tools_in_observation:
            parts.append("Tools:\n" + "\n".join(self._tool_lines()))
        parts.append(
            f"Call a tool in a reply like this: {self.example_call()} (up to "
            f"{self.max_calls_per_turn} calls per reply). Further instructions appear as steps "
            "are completed; "
            + ("the task is won as soon as every step is done." if self._won_by_steps else
               "when all are done, reply with <answer>...</answer>.")
            + f" You have {self.max_turns} replies in all."
        )
        return "\n\n".join(parts), self._info(0, 0)

    def example_call(self) -> str:
        """One concrete, well-formed call, shown in the reply format instead of a placeholder
        (a small agent copies a placeholder such as ``"tool_name"`` verbatim). Default: the first
        declared tool whose required arguments its schema can fill (an enum's first value, an
        integer's minimum or 1, an ``e.g.`` value from a description); override it to show a
        better one. It only shows the format; it need not be a useful move.

        >>> class Shop(ToolEnv):
        ...     def declare_tools(self):
        ...         return {"find": {"description": "Find an order.", "parameters": {
        ...             "type": "object", "required": ["order_id"], "properties": {
        ...                 "order_id": {"type": "string", "description": "e.g. ORD-7"}}}}}
        ...     def tool_find(self, order_id):
        ...         return order_id
        >>> Shop().example_call()
        '<tool_call>{"name": "find", "arguments": {"order_id": "ORD-7"}}</tool_call>'
        """
        return first_fillable_call(self._declarations())

    def called(self, tool: str, /, **arguments: object) -> bool:
        """Whether a successful call of ``tool`` with at least these arguments was made."""
        return any(c.name == tool and all(same_value(c.arguments.get(k), v) for k, v in arguments.items())
                   for c in self.call_history)

    @staticmethod
    def reply_call(name: str, /, **arguments: object) -> str:
        """A reply that makes one tool call (for ``solution()``)."""
        return format_tool_call(ToolCall(name, arguments))

    @staticmethod
    def reply_answer(value: object) -> str:
        """A reply that submits a final answer (for ``solution()``)."""
        return f"<answer>{value}</answer>"

    def fit_turns(self, replies: list[str]) -> list[str]:
        """``replies`` merged until they fit ``max_turns`` (for ``solution()``), at most
        :attr:`max_calls_per_turn` calls a reply: :func:`~.calls.fit_replies`.

        >>> env = ToolEnv(max_turns=2)
        >>> replies = [ToolEnv.reply_call("a"), ToolEnv.reply_call("b"), "<answer>1</answer>"]
        >>> [r.count("<tool_call>") for r in env.fit_turns(replies)]
        [2, 0]
        """
        return fit_replies(replies, self.max_turns, self.max_calls_per_turn)

    # -- the interface hosts use --------------------------------------------------------------

    def tools(self) -> list[dict]:
        """The tools in the OpenAI function format, for chat templates."""
        return [{"type": "function", "function": {"name": name, **decl}}
                for name, decl in self._declarations().items()]

    def _as_declared(self, call: ToolCall) -> dict:
        """The call's arguments, with XML-style texts restored where the schema wants a string."""
        if not call.texts or not isinstance(call.arguments, dict):
            return call.arguments
        decl = self._declarations().get(call.name, {})
        props = decl.get("parameters", {}).get("properties", {})
        return {k: call.texts[k] if k in call.texts and not isinstance(v, str)
                and props.get(k, {}).get("type") == "string" else v
                for k, v in call.arguments.items()}

    def execute_tool(self, name: str, arguments: dict) -> tuple[str, bool]:
        """Run one tool call and return (result text, succeeded). Checks the arguments, records
        the call, and appends any newly revealed instruction. Does not count a turn: a host that
        delivers tool calls as structured messages counts assistant turns itself and submits the
        final answer through :meth:`step`."""
        self._require_started()
        declared = self._declarations()
        if name not in declared:
            return (f"Error: unknown tool '{name}'. Available tools: "
                    f"{', '.join(declared)}.", False)
        schema = declared[name]["parameters"]
        if not isinstance(arguments, dict) or too_deep(arguments):
            return (f"Error: arguments of {name} must be a JSON object nested at most "
                    f"{MAX_DEPTH} levels deep.", False)
        error = schema_error(arguments, schema)
        if error:
            return f"Error: {error}. Usage: {tool_signature(name, schema)}", False
        arguments = coerce_integers(arguments, schema)
        try:
            result = getattr(self, f"tool_{name}")(**arguments)
        except ToolError as e:  # a tool may have changed state before refusing
            return f"Error: {e}{self._advance()}", False
        self.call_history.append(ToolCall(name, arguments))
        text = result if isinstance(result, str) else render_result(result)
        return text + self._advance(), True

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """One agent reply; see the class docstring for the rules. After the episode has ended
        it returns a reminder, reward 0 and truncated=True."""
        self._require_started()
        if self._over:
            return "The episode is over; call reset().", 0.0, False, True, self._info(0, 0)
        self.turn_count += 1
        obs, reward, terminated, ran, failed = self._respond(str(action))
        steps_done = self._instruction_index >= len(self._instructions)
        if self._won_by_steps and steps_done and not terminated:
            obs, reward, terminated = f"{obs}\n\nEvery step is done: task complete.", 1.0, True
        truncated = not terminated and self.turn_count >= self.max_turns
        if truncated:
            obs += "\n\nOut of turns: the episode is over."
        elif not terminated:
            obs += "\n\n" + self._status()
        self._over = terminated or truncated
        reward = min(1.0, max(-1.0, float(reward)))  # a subclass's constants cannot break the range
        return obs, reward, bool(terminated), bool(truncated), self._info(ran, failed)

    # -- internals ----------------------------------------------------------------------------

    def _after_calls(self, calls: list[ToolCall]) -> ToolEnv:
        """A copy of this environment once ``calls`` are made; ValueError naming the call when
        one of them fails, so that a designer reads which step's call is wrong rather than a
        replay that "left the episode running"."""
        try:
            twin = copy.deepcopy(self)
        except Exception as e:  # a generator, a lock: state a copy cannot hold
            raise TypeError(f"solution(): the environment could not be copied to work out the "
                            f"answer ({type(e).__name__}: {e}); write solution() yourself, or keep "
                            "only plain data (numbers, strings, lists, dicts) on self") from e
        for k, call in enumerate(calls):
            text, ok = twin.execute_tool(call.name, dict(call.arguments))
            if not ok:
                raise ValueError(f"solution(): call {k + 1} of the steps, {call.name}"
                                 f"({json.dumps(call.arguments)}), failed: {text.strip()[:300]}")
        return twin

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("call reset() before step() or execute_tool()")

    def _declarations(self) -> dict[str, dict]:
        return declarations(self)

    def _tool_lines(self) -> list[str]:
        return [f"- {tool_signature(n, d['parameters'])}: {d['description']}"
                for n, d in self._declarations().items()]

    def _format_help(self) -> str:
        return (f"Call a tool like this: {self.example_call()}, or give the final answer with "
                "<answer>...</answer>.")

    def _status(self) -> str:
        """The lines every observation ends with: the calls that succeeded so far (the last
        eight), the open step and the reply format, so a small agent that reads only the latest
        message knows where it stands."""
        total, k = len(self._instructions), self._instruction_index
        left = self.max_turns - self.turn_count
        done = [f"{c.name}(" + ", ".join(f"{a}={json.dumps(v)}" for a, v in c.arguments.items())
                + ")" for c in self.call_history[-8:]]
        made = f"Calls that worked so far: {'; '.join(done)}\n" if done else ""
        if k < total:
            where = f"Now: step {k + 1} of {total}: {self._instructions[k].text}"
            how = ('Reply with your next call as <tool_call>{"name": ..., "arguments": {...}}'
                   "</tool_call>")
        else:
            where, how = "Now: every step is done.", "Reply with <answer>...</answer>"
        return f"{made}{where}\n{how}. {left} repl{'y' if left == 1 else 'ies'} left."

    def _respond(self, text: str) -> tuple[str, float, bool, int, int]:
        """(observation, reward, terminated, calls run, calls failed) for one reply."""
        try:
            calls = parse_tool_calls(text)
        except ToolCallFormatError as e:
            return f"Format error: {e.args[0]}. {self._format_help()}", self.format_penalty, \
                False, 0, 0
        answer = parse_answer(text)
        bare = None if calls or answer is not None else parse_bare_call(text)
        if bare is not None:
            obs, ran, failed = self._run_calls([bare], False)
            return (obs + "\n\n(Read as a tool call: next time put it inside "
                    "<tool_call>...</tool_call>.)", 0.0, False, ran, failed)
        if calls:
            obs, ran, failed = self._run_calls(calls, answer is not None)
            return obs, 0.0, False, ran, failed
        if answer is None:
            return (f"Format error: no tool call and no answer. {self._format_help()}",
                    self.format_penalty, False, 0, 0)
        obs, reward, terminated = self._judge(answer)
        return obs, reward, terminated, 0, 0

    def _run_calls(self, calls: list[ToolCall], had_answer: bool) -> tuple[str, int, int]:
        parts, ran, failed = [], 0, 0
        for call in calls[: self.max_calls_per_turn]:
            text, ok = self.execute_tool(call.name, self._as_declared(call))
            ran, failed = ran + 1, failed + (not ok)
            parts.append(f"Result of {call.name}:\n{text}")
        skipped = len(calls) - ran
        if skipped:
            parts.append(f"{skipped} more call(s) skipped: at most {self.max_calls_per_turn} "
                         "per reply.")
        if had_answer:
            parts.append("The <answer> was ignored: answer in a reply without tool calls.")
        return "\n\n".join(parts), ran, failed

    def _advance(self) -> str:
        """Mark open steps whose goal now holds as done; the text announcing what comes next."""
        notes, total = [], len(self._instructions)
        while self._instruction_index < total and self._instructions[self._instruction_index].done():
            self._instruction_index += 1
            k = self._instruction_index
            if k < total:
                notes.append(f"[Step {k} of {total} complete] Next instruction (step {k + 1} of "
                             f"{total}): {self._instructions[k].text}")
            elif not self._won_by_steps:
                notes.append(f"[Step {k} of {total} complete] All steps are done: reply with "
                             "<answer>...</answer>.")
        return "".join("\n\n" + n for n in notes)

    def _judge(self, answer: str) -> tuple[str, float, bool]:
        total = len(self._instructions)
        if self._instruction_index < total:
            k = self._instruction_index
            return (f"Not accepted yet: step {k + 1} of {total} is still open: "
                    f"\"{self._instructions[k].text}\" Complete it with the tools first.", 0.0, False)
        if self.check_answer(answer):
            return "Correct!", 1.0, True
        self._attempts_left -= 1
        if self._attempts_left <= 0:
            return "Incorrect. The episode is over.", 0.0, True
        return f"Incorrect. {self._attempts_left} attempt(s) left.", 0.0, False

    def _info(self, ran: int, failed: int) -> dict:
        return {"tool_calls": ran, "tool_errors": failed, "turn": self.turn_count,
                "steps_done": self._instruction_index, "steps": len(self._instructions)}

"""Talking to a loaded environment on the checker's terms: calls that turn sandbox failures into
contract violations, validated reset/step results, the replies the checker probes with, episode
play for the trivial strategies, and the answer-leak rule.

Everything here works on any object with the :class:`EnvHandle` methods (the sandbox's handles);
values arrive as the environment returned them, so the types are judged here, not coerced.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from spadework.env.actions import extract_boxed, parse_answer
from spadework.errors import ContractError, EnvCrashed, EnvError, EnvRaised, EnvTimeout


class EnvHandle(Protocol):
    """What the runtime stages need of a loaded environment (``spadework.sandbox`` handles)."""

    def reset(self, seed: int | None = None) -> Any: ...
    def step(self, action: str) -> Any: ...
    def solution(self) -> Any: ...
    def tools(self) -> Any: ...
    def hint(self) -> Any: ...


#: Opens a fresh instance of the candidate (the caller binds code, class and max_turns).
Opener = Callable[[], AbstractContextManager[EnvHandle]]


@dataclass(frozen=True)
class Step:
    """One validated step result."""

    obs: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def won(self) -> bool:
        return self.terminated and self.reward > 0


def short(value: object, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


_ENV_FRAME = re.compile(r'File "<env>", line (\d+), in (\S+)')


def where_in_env(traceback: str) -> str:
    """The innermost frame of the environment's own code in a sandbox traceback, as words.

    >>> where_in_env('File "child.py", line 9, in load\\n  File "<env>", line 17, in __init__\\nValueError: x')
    ' (line 17, in __init__)'
    """
    frames = _ENV_FRAME.findall(traceback or "")
    return f" (line {frames[-1][0]}, in {frames[-1][1]})" if frames else ""


def call_env(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call into the sandboxed environment; turn its failures into a ContractError naming the call."""
    try:
        return fn(*args, **kwargs)
    except EnvTimeout as e:
        raise ContractError(f"{what} timed out (an endless loop?): {e.reason}") from e
    except EnvRaised as e:
        if e.exc_type.startswith("unsendable"):
            raise ContractError(f"{what} returned a value that cannot leave the sandbox: {e.reason}") from e
        detail = e.reason.split(f"{e.exc_type}: ", 1)[-1] if e.exc_type else e.reason
        where = where_in_env(e.traceback)
        raise ContractError(f"{what} raised {e.exc_type or 'an exception'}: {detail}{where}") from e
    except EnvCrashed as e:
        raise ContractError(f"the environment process died during {what}: {e.reason}") from e
    except EnvError as e:
        raise ContractError(f"{what} failed: {e.reason}") from e


def _pair(value: object, n: int, what: str, shape: str) -> list:
    if not isinstance(value, (tuple, list)) or len(value) != n:
        raise ContractError(f"{what} returned {short(value)}; it must return {shape}")
    return list(value)


def _check_obs(obs: object, what: str, cap: int) -> str:
    if not isinstance(obs, str):
        raise ContractError(f"{what}: the observation is {type(obs).__name__}, not str")
    if len(obs) > cap:
        raise ContractError(
            f"{what}: the observation has {len(obs):,} characters (cap {cap:,}); "
            "show the agent what it needs, not everything"
        )
    return obs


def validate_reset(value: object, what: str, cap: int) -> str:
    """The observation of a well-formed reset() result ``(str, dict)``, else ContractError."""
    obs, info = _pair(value, 2, what, "(observation: str, info: dict)")
    obs = _check_obs(obs, what, cap)
    if not isinstance(info, dict):
        raise ContractError(f"{what}: info is {type(info).__name__}, not dict")
    return obs


def validate_step(value: object, what: str, cap: int) -> Step:
    """A well-formed step() result ``(str, finite reward in [-1, 1], bool, bool, dict)``."""
    obs, reward, terminated, truncated, info = _pair(
        value, 5, what, "(observation, reward, terminated, truncated, info)"
    )
    obs = _check_obs(obs, what, cap)
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise ContractError(f"{what}: reward is {short(reward)} ({type(reward).__name__}); return a float")
    if not math.isfinite(reward) or not -1.0 <= reward <= 1.0:
        raise ContractError(f"{what}: reward is {reward!r}; it must be a finite number in [-1, 1]")
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, bool):
            raise ContractError(f"{what}: {name} is {short(flag)} ({type(flag).__name__}); return True or False")
    if not isinstance(info, dict):
        raise ContractError(f"{what}: info is {type(info).__name__}, not dict")
    return Step(obs, float(reward), terminated, truncated, info)


def do_reset(env: EnvHandle, seed: int, cap: int) -> str:
    what = f"reset(seed={seed})"
    return validate_reset(call_env(what, env.reset, seed=seed), what, cap)


def do_step(env: EnvHandle, action: str, cap: int) -> Step:
    what = f"step({short(action, 40)})"
    return validate_step(call_env(what, env.step, action), what, cap)


def tool_names(env: EnvHandle) -> list[str]:
    """Names of the environment's tools (empty for games)."""
    tools = call_env("tools()", env.tools) or []
    names = []
    for t in tools if isinstance(tools, list) else []:
        fn = t.get("function", t) if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


def _tool_call(name: str, arguments: dict) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def probe_actions(tools: list[str]) -> list[str]:
    """Replies every environment must survive: a boxed guess, an empty string, garbage, a wrong
    answer, and (for tool-use) a tool call without arguments and an unknown tool.

    >>> probe_actions([])[:3]
    ['\\\\boxed{4}', '', 'zq%% }{ \\\\boxed{ <tool_call>{']
    """
    actions = ["\\boxed{4}", "", "zq%% }{ \\boxed{ <tool_call>{", "\\boxed{no such move}", "<answer>0</answer>"]
    if tools:
        actions += [_tool_call(tools[0], {}), _tool_call("no_such_tool", {"x": 1})]
    return actions


_WORDS = ("yes", "no", "a", "b", "up", "left", "start", "help", "true", "x")


def random_action(rng: random.Random, tools: list[str]) -> str:
    """One random reply in the formats agents use (boxed numbers, words and pairs, an answer,
    a tool call without arguments)."""
    kind = rng.randrange(5 if tools else 4)
    if kind == 0:
        return f"\\boxed{{{rng.randint(0, 100)}}}"
    if kind == 1:
        return f"\\boxed{{{rng.choice(_WORDS)}}}"
    if kind == 2:
        return f"\\boxed{{{rng.randint(1, 9)} {rng.randint(1, 9)}}}"
    if kind == 3:
        return f"<answer>{rng.randint(0, 100)}</answer>"
    return _tool_call(rng.choice(tools), {})


FORMATTED = re.compile(r"\\boxed\{|<answer>|<tool_call>|<function=")


def solution_actions(value: object) -> list[str]:
    """The actions a solution() result stands for: one string, or a non-empty list of strings.

    >>> solution_actions("\\\\boxed{7}"), solution_actions(["a", "b"])
    (['\\\\boxed{7}'], ['a', 'b'])
    >>> solution_actions(7)
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: solution() returned 7 (int); return an action string or a non-empty list of them
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(a, str) for a in value):
        return list(value)
    raise ContractError(
        f"solution() returned {short(value)} ({type(value).__name__}); "
        "return an action string or a non-empty list of them"
    )


def answer_of(solution: object) -> str | None:
    """What solution() gives away if it is printed: the boxed or <answer> content of its (last)
    action, or a single plain string; None when that is shorter than two characters.

    >>> answer_of("\\\\boxed{42}"), answer_of(["\\\\boxed{up}", "<answer>Paris</answer>"]), answer_of("7")
    ('42', 'Paris', None)
    """
    if isinstance(solution, (list, tuple)) and solution and isinstance(solution[-1], str):
        last, single = solution[-1], False
    elif isinstance(solution, str):
        last, single = solution, True
    else:
        return None
    answer = extract_boxed(last) or parse_answer(last) or (last.strip() if single and not FORMATTED.search(last) else None)
    return answer if answer and len(answer) >= 2 else None


def mentions(text: str, answer: str) -> bool:
    """Whether ``answer`` occurs in ``text`` as a whole token (case-insensitive).

    >>> mentions("The code is 4821.", "4821"), mentions("Total 14821", "4821")
    (True, False)
    """
    return re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text, re.IGNORECASE) is not None


def find_leak(firsts: dict[int, tuple[str, str | None]]) -> str | None:
    """A seed whose first observation prints its answer, unless that answer is text every seed
    prints (an action name in the rules, say). ``firsts`` maps seed -> (first observation,
    :func:`answer_of` its solution). Known blind spot: a multiple-choice task whose options vary
    by seed prints its answer among the options and is reported as a leak.

    >>> find_leak({1: ("Moves: up, left.", "left"), 2: ("Moves: up, left.", "up")}) is None
    True
    >>> find_leak({1: ("Find x (x is 4821).", "4821"), 2: ("Find x (x is 311).", "311")})
    "the first observation of seed 1 contains the answer '4821'"
    """
    for seed, (obs, answer) in firsts.items():
        if answer and mentions(obs, answer):
            others = [o for s, (o, _) in firsts.items() if s != seed]
            if not others or not all(mentions(o, answer) for o in others):
                return f"the first observation of seed {seed} contains the answer {answer!r}"
    return None


#: Replies the 'repeated' strategy repeats, one per episode in turn.
REPEATED = ("\\boxed{1}", "\\boxed{0}", "\\boxed{yes}", "\\boxed{A}", "<answer>1</answer>")


def play(env: EnvHandle, seed: int, policy: Callable[[int, str], str], max_turns: int,
         cap: int) -> bool:
    """Play one episode from reset(seed) with ``policy(turn, observation)`` (the observation
    the move answers); whether it was won."""
    obs = do_reset(env, seed, cap)
    for turn in range(max_turns):
        step = do_step(env, policy(turn, obs), cap)
        if step.done:
            return step.won
        obs = step.obs
    return False

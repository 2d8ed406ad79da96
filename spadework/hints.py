"""Privileged hints for the hinted regret arm, and the check that a hint does not give the answer.

Where a hint comes from, per environment:

- the environment's own ``hint()`` when it defines one: the rollout asks it per instance
  (``PlayJob.hint=None``), so its :class:`HintOutcome` carries None;
- else a hint stored in the archive by an earlier iteration, checked again on this call's seeds
  (the loop may play other instances each iteration);
- else a hint the policy writes from the code (the paper's default), one batched call for all;
  when that call fails (``PolicyError``) those environments are played without a hint and the
  outcome says why, so a failing policy costs the regret signal, not the run.

Leak check: the hint must not contain the solution. solution() runs in the sandbox on the seeds
that will be played; the answers are a single-string solution and the boxed or ``<answer>``
content of the final action. A hint that mentions one (case-insensitive; as a whole word for
answers of up to four characters, as a substring for longer ones) is replaced by None, so the
hinted arm plays without a hint, and the reason is recorded on its :class:`HintOutcome`. An
answer that the instance's own first observation prints (``done``, an action name) is public
and does not count. The reference has no leak check.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spadework.env.actions import extract_boxed, parse_answer, strip_thinking
from spadework.env.probe import FORMATTED, mentions
from spadework.errors import EnvError, PolicyError
from spadework.policy.base import Conversation, SamplingParams
from spadework.rollout import level_kwarg
from spadework.seeding import derive_seed, episode_seed
from spadework.types import EnvSource

#: How a hint came about (``HintOutcome.source``).
SOURCES = ("env", "archive", "policy", "none")

#: Answers of up to this many characters must match as a whole word (``7`` is not in ``17``).
SHORT_ANSWER = 4

MAX_HINT_CHARS = 600

_SYSTEM = (
    "You write privileged hints for a player of an interactive text environment. Read the "
    "environment's code and write one or two sentences that help a player without giving the "
    "answer: name the key insight or a good strategy and the expected action format. Never state "
    "the solution, hidden values, exact moves or anything from solution(); do not mention code."
)


@dataclass(frozen=True)
class HintOutcome:
    """The hint for one environment: ``hint`` is what the hinted arm gets (None: the env's own
    hint() per instance when ``source == "env"``, else no hint); ``reason`` says why."""

    env_id: str
    hint: str | None
    source: str
    reason: str = ""
    leaked: bool = False


@dataclass(frozen=True)
class HintReport:
    outcomes: tuple[HintOutcome, ...]

    @property
    def hints(self) -> dict[str, str | None]:
        return {o.env_id: o.hint for o in self.outcomes}

    @property
    def leaked(self) -> int:
        return sum(o.leaked for o in self.outcomes)

    @property
    def sources(self) -> dict[str, int]:
        """How many hints came from each source (:data:`SOURCES`)."""
        return {s: n for s in SOURCES if (n := sum(o.source == s for o in self.outcomes))}


def build_hint_prompt(code: str, setting: str = "games") -> list[dict[str, str]]:
    """Messages asking the policy for a hint from an environment's code.

    >>> m = build_hint_prompt("class A: ...")
    >>> [x["role"] for x in m], "class A: ..." in m[1]["content"]
    (['system', 'user'], True)
    """
    fmt = ("tool calls and a final <answer>...</answer>" if setting == "tool-use" else "\\boxed{...}")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": (
        f"Environment code:\n```python\n{code.strip()}\n```\n\nThe player answers with {fmt}. "
        "Write one or two sentences that help a player without giving the answer. Reply with "
        "the hint only.")}]


def parse_hint(text: str) -> str | None:
    """The hint in a reply: thinking dropped, a ``{"hint": ...}`` JSON object unwrapped, a
    leading "Hint:" removed, cut to 600 characters; None when nothing is left.

    >>> parse_hint('<think>hmm</think>Hint: Work from the corners inward.')
    'Work from the corners inward.'
    >>> parse_hint('```json\\n{"hint": "Halve the range each turn."}\\n```')
    'Halve the range each turn.'
    >>> parse_hint("   ") is None
    True
    """
    text = strip_thinking(text)
    m = re.search(r"\{.*\}", text, re.S)
    if m:
        try:
            obj = json.loads(m.group())
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("hint"), str):
            text = obj["hint"]
    text = re.sub(r"^```\w*\s*|\s*```$", "", text.strip()).strip()
    text = re.sub(r"^\**hint\**\s*:\s*", "", text, flags=re.I).strip()
    return text[:MAX_HINT_CHARS].strip() or None


def solution_answers(solution: object) -> list[str]:
    """What a solution() result gives away: a single plain string, else the boxed or
    ``<answer>`` content of the (last) action.

    >>> solution_answers("\\\\boxed{42}"), solution_answers(["\\\\boxed{up}", "<answer>Paris</answer>"])
    (['42'], ['Paris'])
    >>> solution_answers("7"), solution_answers(["up", "down"]), solution_answers(None)
    (['7'], [], [])
    """
    if isinstance(solution, str):
        last, single = solution, True
    elif isinstance(solution, (list, tuple)) and solution and isinstance(solution[-1], str):
        last, single = solution[-1], False
    else:
        return []
    found = extract_boxed(last) or parse_answer(last)
    if not found and single and not FORMATTED.search(last):
        found = last.strip()
    return [found.strip()] if found and found.strip() else []


def contains_answer(hint: str, answer: str) -> bool:
    """Whether ``hint`` gives ``answer`` away (see the module docstring for the rule).

    >>> contains_answer("Try 17 first.", "7"), contains_answer("It is 7.", "7")
    (False, True)
    >>> contains_answer("the capital is PARISIAN", "paris"), contains_answer("go north", "Paris")
    (True, False)
    """
    if len(answer) <= SHORT_ANSWER:
        return mentions(hint, answer)
    return answer.lower() in hint.lower()


def leaked_answer(hint: str, secrets: Mapping[int, Sequence[str]]) -> str | None:
    """Why ``hint`` leaks (seed and answer), or None. ``secrets`` maps seed -> its non-public answers.

    >>> leaked_answer("Guess 42.", {3: ["42"]})
    "the hint contains the answer '42' of seed 3"
    >>> leaked_answer("Guess low.", {3: ["42"]}) is None
    True
    """
    for seed, answers in secrets.items():
        for answer in answers:
            if contains_answer(hint, answer):
                return f"the hint contains the answer {answer!r} of seed {seed}"
    return None


@dataclass(frozen=True)
class _Probe:
    own_hint: bool
    secrets: dict[int, list[str]]
    error: str = ""


def probe_env(sandbox: Any, env: EnvSource, seeds: Sequence[int], max_turns: int,
              level: int = 1) -> _Probe:
    """Run the env in the sandbox on ``seeds`` at ``level``: does it define hint(), and what
    answers does solution() give that the first observation does not print."""
    secrets: dict[int, list[str]] = {}
    try:
        with sandbox.load(env.code, max_turns=max_turns, class_name=env.class_name,
                          level=level_kwarg(env, level)) as h:
            for i, seed in enumerate(seeds):
                obs, _info = h.reset(seed=seed)
                if i == 0:
                    own = h.hint()
                    if isinstance(own, str) and own.strip():
                        return _Probe(True, {})
                secrets[seed] = [a for a in solution_answers(h.solution()) if not mentions(str(obs), a)]
    except EnvError as e:
        return _Probe(False, {}, f"solution() could not be run to check the hint: {e.reason}")
    return _Probe(False, secrets)


def write_hints(policy: Any, envs: Sequence[EnvSource], *, sandbox: Any, archive: Any, run_seed: int,
                iteration: int = 0, plays: int = 8, seeds: Mapping[str, Sequence[int]] | None = None,
                max_turns: int = 20, max_tokens: int = 160, temperature: float = 0.3,
                levels: Mapping[str, int] | None = None) -> HintReport:
    """Hints for ``envs`` with how each came about (see the module docstring). ``levels``: env
    id -> the level about to be played (1 when absent), whose instances the leak check reads.

    ``seeds`` maps env id -> the instance seeds that will be played; by default those
    :func:`spadework.rollout.regret_jobs` plays for the same ``run_seed`` and ``plays``
    (``episode_seed(run_seed, env_id, i)`` for ``i < plays``): pass the run seed and play count
    the rollout gets, or the seeds themselves, or the check covers other instances.
    Kept policy hints are stored with ``archive.set_hint``; envs must be in the archive.
    """
    probes, outcomes = {}, {}
    for env in envs:
        env_seeds = (seeds or {}).get(env.env_id) or [episode_seed(run_seed, env.env_id, i) for i in range(plays)]
        p = probe_env(sandbox, env, env_seeds, max_turns, min((levels or {}).get(env.env_id, 1), env.levels))
        probes[env.env_id] = p
        stored = archive.get_env(env.env_id)
        if p.own_hint:
            outcomes[env.env_id] = HintOutcome(env.env_id, None, "env", "the environment's own hint() per instance")
        elif p.error:
            outcomes[env.env_id] = HintOutcome(env.env_id, None, "none", p.error)
        elif stored is not None and stored.hint:
            outcomes[env.env_id] = _checked(env.env_id, stored.hint, "archive", p)
    todo = [e for e in envs if e.env_id not in outcomes]
    if todo:
        params = SamplingParams(temperature=temperature, top_p=0.95, max_tokens=max_tokens,
                                seed=derive_seed(run_seed, iteration, "hints"))
        try:
            replies = policy.chat([Conversation(messages=tuple(build_hint_prompt(e.code, e.setting)))
                                   for e in todo], params)
        except PolicyError as e:
            replies = []
            for env in todo:
                outcomes[env.env_id] = HintOutcome(env.env_id, None, "none",
                                                   f"the policy failed to write a hint: {e.reason}")
        for env, c in zip(todo, replies):
            hint = parse_hint(c.text)
            if hint is None:
                outcomes[env.env_id] = HintOutcome(env.env_id, None, "none", "the policy wrote no hint")
                continue
            outcomes[env.env_id] = o = _checked(env.env_id, hint, "policy", probes[env.env_id])
            if o.hint is not None:
                archive.set_hint(env.env_id, o.hint)
    return HintReport(tuple(outcomes[e.env_id] for e in envs))


def _checked(env_id: str, hint: str, source: str, probe: _Probe) -> HintOutcome:
    why = leaked_answer(hint, probe.secrets)
    if why is not None:
        return HintOutcome(env_id, None, source, f"{why}: played without a hint", leaked=True)
    return HintOutcome(env_id, hint, source)

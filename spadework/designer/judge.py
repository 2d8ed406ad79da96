"""Judging one designer reply: screen it, extract the module, check it in the sandbox.

The outcome of an attempt is ``accepted`` or the name of the first stage that rejected it, in
:data:`VALIDATION_ORDER`: the reply screen (empty, cut at ``max_tokens``, binary, huge), then the
checker's stages (:data:`spadework.env.checker.STAGES`, extraction first).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from spadework.archive.records import ACCEPTED
from spadework.env.checker import STAGES as CHECK_STAGES
from spadework.env.checker import CheckConfig, check
from spadework.env.extract import extract_env_module
from spadework.errors import ExtractError
from spadework.types import CheckReport, CheckResult

#: The outcome of an attempt whose reply was unusable before extraction (empty, truncated, ...).
REPLY_STAGE = "reply"

#: The validation stages in order, the reply screen first: a rejected attempt's outcome is one.
VALIDATION_ORDER = (REPLY_STAGE, *CHECK_STAGES)

#: A reply longer than this is refused unread (a module of this size is never what we asked for).
MAX_REPLY_CHARS = 200_000


@dataclass(frozen=True)
class Judgement:
    """What became of one reply: ``outcome`` is ACCEPTED or the failing stage."""

    outcome: str
    reason: str
    code: str | None = None
    report: CheckReport | None = None


def screen_reply(text: str, finish_reason: str, max_tokens: int) -> str | None:
    """Why a reply is unusable before extraction (empty, truncated, binary, huge), or None.

    >>> screen_reply("", "stop", 100)
    'the reply is empty'
    >>> screen_reply("class A: ...", "length", 100)[:40]
    'the reply was cut at max_tokens=100 (the'
    >>> screen_reply("x = [1]\\n" * 9, "repeat", 100)[:34]
    'the reply was stopped in a loop: i'
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
    if finish_reason == "repeat":
        return ("the reply was stopped in a loop: it wrote the same lines over and over "
                "(DesignConfig.stop_at_repeat), so the module is incomplete; write each line once")
    controls = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r")
    if "\x00" in text or controls > max(2, len(text) // 100):
        return "the reply contains binary data (NUL or control bytes)"
    return None


def judge_reply(text: str, finish_reason: str, *, sandbox: Any, max_tokens: int, seeds: int | None,
                check_config: CheckConfig, index: Any) -> Judgement:
    """Screen, extract and check one reply (``seeds``: how many instances solution() must win,
    None for the checker's own count;
    ``index``: the novelty index of accepted code). The extract stage is recorded in the report,
    so an archived environment's report shows every stage it went through."""
    why = screen_reply(text, finish_reason, max_tokens)
    if why is not None:
        return Judgement(REPLY_STAGE, why)
    try:
        module = extract_env_module(text)
    except ExtractError as e:
        return Judgement("extract", e.reason)
    repairs = f"; repairs: {', '.join(module.repairs)}" if module.repairs else ""
    extracted = CheckResult("extract", True, f"a module of {len(module.code.splitlines())} lines{repairs}")
    report = check(module.code, sandbox=sandbox, seeds=seeds, config=check_config,
                   existing=index, module=True)
    report = replace(report, results=(extracted, *report.results))
    if report.ok:
        return Judgement(ACCEPTED, "", module.code, report)
    return Judgement(report.failed_stage or "static", report.reason, module.code, report)

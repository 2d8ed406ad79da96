"""The suite contract and the one engine every single-turn suite plays through.

A suite is any object with a ``name``, a ``kind`` (which preset row it takes: rg, math, library,
bfcl, code, choice) and ``run(ctx) -> list[Sample]``. Single-turn suites build their items and
score replies; :func:`play_single_turn` does the rest for all of them: prompts too long for the
context are recorded (not cut), items are batched into ``Policy.chat`` calls, seeds are derived,
every row is scored, progress is reported. The multi-turn ``library-heldout`` suite plays
through :func:`spadework.rollout.play` instead.

Seeds: item chunk ``c`` of a suite (see :func:`chunks`: playable items ordered by prompt length
when the policy can count tokens, else in item order, ties keeping item order) samples with
``derive_seed(eval seed, suite, c)``; by the ``SamplingParams`` contract sample ``j`` of the
chunk's conversation ``i`` draws from ``derive_seed(chunk seed, i, j)``, and that is the seed a
row records. Two models that see the same items with the same preset and seed therefore sample
every (item, sample) with the same seed, which ``eval compare`` checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from spadework.errors import PolicyError
from spadework.evaluate.items import EvalItem, Sample, Scored
from spadework.evaluate.judge import Judge
from spadework.evaluate.presets import SuiteSettings
from spadework.policy.base import Conversation, SamplingParams
from spadework.seeding import derive_seed

Progress = Callable[[int, int, str], None]


def no_progress(done: int, total: int, what: str) -> None:
    return None


@dataclass
class RunContext:
    """What a suite needs to run: the policy, its settings, a judge, the seed and a progress hook.

    ``sandbox``: a started :class:`spadework.sandbox.Sandbox` that multi-turn suites use and leave
    open (the run loop's own); without one they start and close their own.

    ``progress(done, total, what)`` is called as items are generated and as samples are scored.
    """

    policy: Any
    settings: SuiteSettings
    judge: Judge
    seed: int = 0
    progress: Progress = field(default=no_progress)
    sandbox: Any = None  # a started Sandbox to reuse (multi-turn suites), else they start one


class Suite(Protocol):
    """A benchmark suite. ``run`` returns one :class:`Sample` per (item, sample index), items that
    could not be played included (their rows carry the reason), and never raises for a bad item.
    ``kind`` names its row in the eval presets; ``data`` names the pinned data sets it reads."""

    name: str
    kind: str
    data: tuple[str, ...]

    def run(self, ctx: RunContext) -> list[Sample]: ...


def _prompt_tokens(policy: Any, conv: Any) -> int | None:
    count = getattr(policy, "prompt_ids", None)
    if not callable(count):
        return None
    return len(count(conv))


def _chat(policy: Any, convs: list, params: Any) -> tuple[list, list[str]]:
    """One batched call; on PolicyError each conversation alone, so a bad one fails only itself
    (those retried rows then draw from ``(seed, 0, j)``, not the seed their row records).
    Returns (completions or None per conversation and sample, error text per conversation)."""
    try:
        return list(policy.chat(convs, params)), [""] * len(convs)
    except PolicyError as batch_error:
        if len(convs) == 1:
            return [None] * params.n, [batch_error.reason]
    out, errors = [], []
    for conv in convs:
        try:
            out += list(policy.chat([conv], params))
            errors.append("")
        except PolicyError as e:
            out += [None] * params.n
            errors.append(e.reason)
    return out, errors


def play_single_turn(ctx: RunContext, items: Sequence[EvalItem],
                     score: Callable[[EvalItem, str], Scored]) -> list[Sample]:
    """Play ``items`` (``settings.samples`` each) and score every reply; rows in item order."""
    s = ctx.settings
    context = int(getattr(ctx.policy, "context_length", 0) or 0)
    rows: dict[tuple[str, int], Sample] = {}
    playable: list[tuple[EvalItem, Any, int | None]] = []
    for item in items:
        conv = Conversation(messages=item.messages, tools=item.tools)
        try:
            n_tokens = _prompt_tokens(ctx.policy, conv) if item.status == "ok" else None
        except PolicyError as e:  # the chat template cannot render this item
            item, n_tokens = _with_status(item, "policy_error", e.reason), None
        if item.status == "ok" and context and n_tokens is not None and n_tokens >= context:
            item = _with_status(item, "too_long", f"prompt of {n_tokens} tokens does not fit the "
                                                  f"model's context of {context} tokens")
        if item.status != "ok":
            for j in range(s.samples):
                rows[(item.item_id, j)] = Sample.unplayed(
                    item, j, derive_seed(ctx.seed, item.suite, item.item_id, j))
            continue
        playable.append((item, conv, n_tokens))
    # Similar lengths share a chat call (little padding); the order, and so every seed, depends
    # only on the items and the tokenizer, never on timing.
    playable.sort(key=lambda p: p[2] or 0)
    total = len(items) * s.samples
    ctx.progress(len(rows), total, "sampling")
    for c, chunk in enumerate(chunks(playable, s)):
        chunk_seed = derive_seed(ctx.seed, chunk[0][0].suite, c)
        params = SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                                max_tokens=s.max_tokens, n=s.samples, seed=chunk_seed)
        start = time.monotonic()
        completions, errors = _chat(ctx.policy, [conv for _, conv, _ in chunk], params)
        latency = time.monotonic() - start
        for i, (item, _, n_tokens) in enumerate(chunk):
            for j in range(s.samples):
                comp = completions[i * s.samples + j]
                seed = derive_seed(chunk_seed, i, j)
                if comp is None:
                    rows[(item.item_id, j)] = Sample(
                        item.suite, item.task, item.bucket, item.item_id, j, seed,
                        item.prompt_hash(), gold=item.gold, status="policy_error", error=errors[i])
                    continue
                verdict = score(item, comp.text)
                rows[(item.item_id, j)] = Sample(
                    item.suite, item.task, item.bucket, item.item_id, j, seed, item.prompt_hash(),
                    response=comp.text, extracted=verdict.extracted, gold=item.gold,
                    reward=verdict.reward, correct=verdict.correct and verdict.status == "ok",
                    status=verdict.status, finish_reason=comp.finish_reason,
                    prompt_tokens=len(comp.prompt_ids) or (n_tokens or 0),
                    output_tokens=len(comp.output_ids), latency_s=round(latency, 3),
                    error=verdict.error)
        ctx.progress(len(rows), total, "sampling")
    return [rows[(item.item_id, j)] for item in items for j in range(s.samples)]


def chunks(playable: list, s: SuiteSettings) -> list[list]:
    """Consecutive runs of ``(item, conversation, prompt tokens)``: at most ``batch_items`` items
    and, when ``batch_tokens`` is set, at most that many padded tokens
    (``items * samples * (longest prompt + max_tokens)``); an item over the bound goes alone.

    >>> st = SuiteSettings(batch_items=3, batch_tokens=100, max_tokens=10)
    >>> [[n for _, _, n in c] for c in chunks([(0, 0, 5), (0, 0, 10), (0, 0, 20), (0, 0, 20),
    ...                                        (0, 0, 30), (0, 0, 200)], st)]
    [[5, 10, 20], [20, 30], [200]]
    """
    out: list[list] = []
    for entry in playable:
        if out and len(out[-1]) < s.batch_items:
            longest = max([n or 0 for _, _, n in out[-1]] + [entry[2] or 0])
            padded = (len(out[-1]) + 1) * s.samples * (longest + s.max_tokens)
            if s.batch_tokens is None or padded <= s.batch_tokens:
                out[-1].append(entry)
                continue
        out.append([entry])
    return out


def _with_status(item: EvalItem, status: str, error: str) -> EvalItem:
    from dataclasses import replace

    return replace(item, status=status, error=error)

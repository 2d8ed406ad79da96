"""Scripted policies for evaluation tests: an oracle that answers the gold and a wrong one.

They follow the ``Policy`` contract (conversation-major, ``n`` completions per conversation) and
are fakes on purpose: no real model answers every benchmark item correctly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from spadework.policy.base import Completion, SamplingParams, as_conversation


class ScriptedPolicy:
    """Replies ``reply(user_text)`` to each conversation; records the calls it served."""

    context_length = 8192

    def __init__(self, reply: Callable[[str], str]) -> None:
        self.reply = reply
        self.calls: list[tuple[int, SamplingParams]] = []

    def chat(self, conversations: Sequence, params: SamplingParams) -> list[Completion]:
        self.calls.append((len(conversations), params))
        out = []
        for conv in conversations:
            text = str(as_conversation(conv).messages[-1]["content"])
            reply = self.reply(text)
            out += [Completion(reply, (1,), (2,) * max(1, len(reply) // 4), (), "stop")] * params.n
        return out


def oracle(golds: Mapping[str, str | None], wrap: Callable[[str], str]) -> ScriptedPolicy:
    """Answers each prompt's gold (looked up by the prompt text) wrapped by ``wrap``."""
    return ScriptedPolicy(lambda text: wrap(golds[text]) if golds.get(text) is not None else "")


def wrong() -> ScriptedPolicy:
    """Answers something no item has as its answer."""
    return ScriptedPolicy(lambda text: "<answer>\u00a7 no such answer \u00a7</answer>")


def wrong_backend(model: str | None) -> ScriptedPolicy:
    """A backend (``(model) -> Policy``) for CLI tests: ``--policy eval_policies:wrong_backend``."""
    return wrong()

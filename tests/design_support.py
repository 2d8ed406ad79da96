"""Shared parts of the designer and hint tests: a scripted policy, a corpus, a sandbox.

The scripted policy is a real implementation of the Policy protocol that returns prepared
replies (with made-up token ids and logprobs), so generation can be driven deterministically;
it records every batch it was asked to continue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from spadework.corpus import Corpus, Document
from spadework.policy.base import Completion, Conversation, SamplingParams, as_conversation

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "envs"
GOOD_CODE = (FIXTURES / "good" / "arithmetic_chain.py").read_text()


def fenced(code: str) -> str:
    return f"Here is the environment.\n\n```python\n{code}\n```\n"


def bad(name: str) -> str:
    return (FIXTURES / "bad" / f"{name}.py").read_text()


#: A reply: text, or (text, finish_reason).
Reply = str | tuple[str, str]


class ScriptedPolicy:
    """Answers call ``k``, row ``i`` with ``script(k, i, conversation)`` (text or (text, finish))."""

    def __init__(self, script: Callable[[int, int, Conversation], Reply] | Sequence[Sequence[Reply]],
                 context_length: int = 8192) -> None:
        self._script = script
        self._context = context_length
        self.calls: list[list[Conversation]] = []

    @property
    def context_length(self) -> int:
        return self._context

    def chat(self, conversations, params: SamplingParams) -> list[Completion]:
        convs = [as_conversation(c) for c in conversations]
        k = len(self.calls)
        self.calls.append(convs)
        out = []
        for i, conv in enumerate(convs):
            reply = self._script(k, i, conv) if callable(self._script) else self._script[k][i]
            text, finish = (reply, "stop") if isinstance(reply, str) else reply
            n = max(1, min(params.max_tokens, len(text) // 4))
            out.append(Completion(text=text, prompt_ids=tuple(range(100 + k, 140 + k)),
                                  output_ids=tuple(range(1000 + i, 1000 + i + n)),
                                  logprobs=tuple(-0.25 - 0.001 * j for j in range(n)),
                                  finish_reason=finish))
        return out


def corpus() -> Corpus:
    docs = [Document(f"doc{i}", f"Document number {i}: the {w} changes with the seasons.")
            for i, w in enumerate(["river", "harvest", "tide", "glacier", "market", "forest",
                                   "comet", "volcano"])]
    return Corpus(documents=tuple(docs), source="test")


def start_sandbox():
    from spadework.errors import SandboxUnavailable
    from spadework.sandbox import Limits, Sandbox

    try:
        box = Sandbox(Limits(step_seconds=1.0, load_seconds=5.0, episode_seconds=30.0))
        box.start()
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox here: {e.reason}")
    return box

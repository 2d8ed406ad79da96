"""A scripted Policy for tests: prepared replies, made-up token ids and logprobs.

It is a real implementation of ``spadework.policy.base.Policy`` (batched ``chat``, one
``Completion`` per conversation with prompt ids, output ids and one logprob per output token);
only the text comes from a script instead of a model. Used where a real model cannot make a run
deterministic and fast enough (rollout statuses, kill-and-resume).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from collections.abc import Callable, Sequence

from spadework.errors import PolicyError
from spadework.policy.base import Completion, Conversation, SamplingParams, as_conversation

Script = Callable[[Conversation, int], str]
GOOD_ENV = Path(__file__).parent / "fixtures" / "envs" / "good" / "arithmetic_chain.py"


def fake_ids(text: str) -> tuple[int, ...]:
    """Deterministic made-up token ids: one per 4 characters (a typical tokenizer ratio)."""
    return tuple(int.from_bytes(hashlib.sha256(text[i:i + 4].encode()).digest()[:2], "big")
                 for i in range(0, len(text), 4)) or (1,)


class ScriptedPolicy:
    """``script(conversation, turn)`` gives the reply text; ``turn`` counts assistant messages.

    ``fail_when(conversation)`` true raises PolicyError for a batch holding that conversation;
    ``delay`` seconds of sleep per chat call imitate a slow model. ``calls`` records every batch.
    """

    def __init__(self, script: Script, *, context_length: int = 32768, delay: float = 0.0,
                 fail_when: Callable[[Conversation], bool] | None = None,
                 supports_tool_role: bool | None = None) -> None:
        self.script = script
        self._context = context_length
        self.delay = delay
        self.fail_when = fail_when
        if supports_tool_role is not None:
            self.supports_tool_role = supports_tool_role
        self.calls: list[list[Conversation]] = []

    @property
    def context_length(self) -> int:
        return self._context

    def prompt_ids(self, conversation) -> list[int]:
        conv = as_conversation(conversation)
        text = "".join(f"<{m['role']}>{m['content']}" for m in conv.messages)
        return list(fake_ids(text))

    def chat(self, conversations: Sequence, params: SamplingParams) -> list[Completion]:
        convs = [as_conversation(c) for c in conversations]
        self.calls.append(convs)
        if self.delay:
            time.sleep(self.delay)
        if self.fail_when is not None and any(self.fail_when(c) for c in convs):
            raise PolicyError("scripted failure")
        out = []
        for conv in convs:
            turn = sum(1 for m in conv.messages if m["role"] == "assistant")
            for _ in range(params.n):
                text = self.script(conv, turn)
                ids = fake_ids(text)[: params.max_tokens]
                out.append(Completion(text=text, prompt_ids=tuple(self.prompt_ids(conv)),
                                      output_ids=ids, logprobs=tuple(-0.5 for _ in ids),
                                      finish_reason="stop"))
        return out


def solution_script(solutions: dict[str, list[str]], fallback: str = "\\boxed{0}") -> Script:
    """A script that plays ``solutions[obs]`` for the episode whose first message holds ``obs``."""
    def script(conv: Conversation, turn: int) -> str:
        first = conv.messages[0]["content"]
        for obs, replies in solutions.items():
            if obs in first:
                return replies[turn] if turn < len(replies) else fallback
        return fallback
    return script


def designing_script(conv: Conversation, turn: int) -> str:
    """Design requests get a real environment module (a good fixture); game turns get a guess
    that depends on the observation, so episodes differ."""
    if conv.messages[0]["role"] == "system" and "design" in conv.messages[0]["content"]:
        return "```python\n" + GOOD_ENV.read_text() + "\n```"
    digest = hashlib.sha256(conv.messages[-1]["content"].encode()).digest()
    return f"I will try \\boxed{{{digest[0] % 10}}}"


def slow_policy_factory() -> ScriptedPolicy:
    """For subprocess runs (``spadework run --policy scripted_policy:slow_policy_factory`` with
    ``tests`` on PYTHONPATH): deterministic, and slow enough (0.1 s per batch) to be killed
    in the middle of a stage."""
    return ScriptedPolicy(designing_script, delay=0.1)

"""The scripted Policy of the tests: prepared replies, made-up token ids and logprobs.

It is a real implementation of ``spadework.policy.base.Policy`` (batched ``chat``, ``n``
completions per conversation with prompt ids, output ids and one logprob per output token,
``max_tokens``, stop strings, the context limit, seeded rows) and passes the same contract test
as the real backends (tests/policy/test_contract.py); only the text comes from a script instead
of a model. Used where a real model cannot make a run deterministic and fast enough (rollout
statuses, designer outcomes, kill-and-resume).
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from spadework.errors import PolicyError
from spadework.policy.base import (
    LOOP_LONG_LINE,
    Completion,
    Conversation,
    SamplingParams,
    as_conversation,
    cut_at_move,
    cut_at_stop,
    ends_in_loop,
    holds_move,
)


def cut_at_repeat(text: str, times: int) -> tuple[str, bool]:
    """``text`` up to the newline ending a block's ``times``-th copy in a row (or, along a line
    of ``LOOP_LONG_LINE`` characters or more, every 64 characters, where it loops), and whether
    it was cut there (``SamplingParams.stop_at_repeat``, as ``DecodeRow`` stops: it asks at
    newlines and every 16 tokens along a long line)."""
    start = 0
    for end, ch in enumerate(text, 1):
        if ch == "\n":
            start = end
        elif end - start < LOOP_LONG_LINE or (end - start) % 64:
            continue
        if ends_in_loop(text[:end], times):
            return text[:end], True
    return text, False


#: A reply: its text, or (text, finish_reason).
Reply = str | tuple[str, str]
#: ``script(conversation, turn)`` (``turn`` counts the assistant messages so far), with the row's
#: seeded ``random.Random`` as a third argument when the policy is ``seeded``; or prepared replies
#: per call: ``script[k][i]`` answers row ``i`` of call ``k``.
Script = Callable[..., Reply] | Sequence[Sequence[Reply]]
GOOD_ENV = Path(__file__).parent / "fixtures" / "envs" / "good" / "arithmetic_chain.py"


#: The made-up ids of message roles in :meth:`ScriptedPolicy.prompt_ids`.
ROLE_IDS = {"system": 3, "user": 4, "assistant": 5, "tool": 6}


def fake_ids(text: str) -> tuple[int, ...]:
    """Deterministic made-up token ids: one per 4 characters (a typical tokenizer ratio)."""
    return tuple(int.from_bytes(hashlib.sha256(text[i:i + 4].encode()).digest()[:2], "big")
                 for i in range(0, len(text), 4)) or (1,)


class FakeClock:
    """A monotonic clock that moves only when told to (``advance``)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ScriptedPolicy:
    """A Policy whose replies come from ``script`` (see :data:`Script`).

    ``seeded``: the script also gets a ``random.Random`` seeded from (params.seed, row, sample)
    as the real backends seed their rows, so replies depend on the sampling seed. ``stop``
    strings cut the text as the backends do. ``fail_when(conversation)`` true raises
    PolicyError for a batch holding that conversation; ``delay`` seconds of sleep per chat call
    imitate a slow model, or advance ``clock`` instead (a :class:`FakeClock` the caller also
    gives ``rollout.play``, so episode budgets do not depend on the machine's load). ``calls``
    records every batch.
    """

    def __init__(self, script: Script, *, context_length: int = 32768, delay: float = 0.0,
                 fail_when: Callable[[Conversation], bool] | None = None,
                 supports_tool_role: bool | None = None, seeded: bool = False,
                 clock: FakeClock | None = None) -> None:
        self.script = script
        self._context = context_length
        self.delay = delay
        self.clock = clock
        self.fail_when = fail_when
        self.seeded = seeded
        if supports_tool_role is not None:
            self.supports_tool_role = supports_tool_role
        self.calls: list[list[Conversation]] = []

    @property
    def context_length(self) -> int:
        return self._context

    def prompt_ids(self, conversation) -> list[int]:
        """Made-up ids rendered as a chat template renders: each message a role id and its
        content's ids, then the assistant's role id to generate after. A reply sampled after a
        prompt is the next prompt's assistant message token for token, as with a real template,
        so turns pack (``train.batch.pack_turns``) when the reply is stored as it was sampled."""
        conv = as_conversation(conversation)
        ids: list[int] = []
        for m in conv.messages:
            ids += [ROLE_IDS.get(m["role"], ROLE_IDS["user"]), *fake_ids(m["content"])]
        return ids + [ROLE_IDS["assistant"]]

    def _reply(self, k: int, i: int, j: int, conv: Conversation, params: SamplingParams) -> Reply:
        if not callable(self.script):
            return self.script[k][i]
        turn = sum(1 for m in conv.messages if m["role"] == "assistant")
        if not self.seeded:
            return self.script(conv, turn)
        if params.seed is not None or params.row_seeds:
            seed = params.seed or 0
        else:  # greedy decoding is deterministic; sampling without a seed is not
            seed = 0 if params.greedy else secrets.randbits(63)
        return self.script(conv, turn, random.Random(params.sample_seed(seed, i, j)))

    def chat(self, conversations: Sequence, params: SamplingParams) -> list[Completion]:
        convs = [as_conversation(c) for c in conversations]
        k = len(self.calls)
        self.calls.append(convs)
        if self.delay and self.clock is not None:
            self.clock.advance(self.delay)  # a slow model on a clock of its own: no real wait
        elif self.delay:
            time.sleep(self.delay)
        if self.fail_when is not None and any(self.fail_when(c) for c in convs):
            raise PolicyError("scripted failure")
        out = []
        for i, conv in enumerate(convs):
            prompt = tuple(self.prompt_ids(conv))
            if len(prompt) >= self._context:
                raise PolicyError(f"prompt {i} has {len(prompt)} tokens but the context is {self._context}")
            for j in range(params.n):
                reply = self._reply(k, i, j, conv, params)
                text, finish = (reply, "stop") if isinstance(reply, str) else reply
                text, stopped = cut_at_stop(text, params.stop)
                if params.stop_at_move and not stopped:  # as the local backends stop
                    text, cut = cut_at_move(text, params.stop_at_move)
                    finish = "move" if cut or holds_move(text, params.stop_at_move) else finish
                if params.stop_at_repeat and not stopped:  # as the local backends stop
                    text, looped = cut_at_repeat(text, params.stop_at_repeat)
                    finish = "repeat" if looped else finish
                ids = fake_ids(text)
                if len(ids) > params.max_tokens:
                    ids, finish = ids[: params.max_tokens], "length"
                out.append(Completion(text=text, prompt_ids=prompt, output_ids=ids,
                                      logprobs=tuple(-0.5 for _ in ids),
                                      finish_reason="stop" if stopped else finish))
        return out


class StreamingScriptedPolicy(ScriptedPolicy):
    """A :class:`ScriptedPolicy` with the continuous stream of ``LlamaCppPolicy.stream``: it
    answers requests one at a time in arrival order (each request added by ``on_done`` queues
    behind those already waiting, so episodes' turns interleave), each through ``chat`` with the
    request's row seed and move. ``fail_stream_at`` raises PolicyError when that many replies
    have been given, as an engine whose step fails; a prompt the context cannot hold is handed
    to ``on_done`` as its PolicyError. ``metadata["seconds"]`` is ``delay``."""

    def __init__(self, script: Script, *, fail_stream_at: int | None = None, **kwargs) -> None:
        super().__init__(script, **kwargs)
        self.fail_stream_at = fail_stream_at
        self.streamed = 0  # replies given through the stream
        self.most_waiting = 0  # the most requests waiting at once (one per live episode)
        self._conversations: dict[tuple[int, ...], Conversation] = {}

    def prompt_ids(self, conversation) -> list[int]:
        ids = super().prompt_ids(conversation)
        self._conversations[tuple(ids)] = as_conversation(conversation)
        return ids

    def stream(self, requests, params: SamplingParams, on_done, *, cells: int = 0) -> None:
        import dataclasses
        from collections import deque

        todo = deque(requests)
        while todo:
            self.most_waiting = max(self.most_waiting, len(todo))
            if self.fail_stream_at is not None and self.streamed >= self.fail_stream_at:
                raise PolicyError("scripted engine failure")
            q = todo.popleft()
            row = dataclasses.replace(params, row_seeds=(q.seed,), stop_at_move=q.stop_at_move,
                                      max_tokens=q.max_tokens or params.max_tokens)
            try:
                c, = self.chat([self._conversations[tuple(q.prompt_ids)]], row)
            except PolicyError as e:
                todo.extend(on_done(q, e))
                continue
            self.streamed += 1
            todo.extend(on_done(q, dataclasses.replace(c, metadata={"seconds": self.delay})))


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


def half_solving_script(conv, turn):
    """Designs the arithmetic chain; solves its instances whose ``a`` is even, so plays differ."""
    import re

    m = re.search(r"Compute \((\d+) \* (\d+) \+ (\d+)\) mod (\d+)", conv.messages[-1]["content"])
    if m and conv.messages[0]["role"] != "system":
        a, b, c, mod = map(int, m.groups())
        return f"\\boxed{{{(a * b + c) % mod if a % 2 == 0 else mod + 1}}}"
    return designing_script(conv, turn)


def slow_policy_factory() -> ScriptedPolicy:
    """For subprocess runs (``spadework run --policy scripted_policy:slow_policy_factory`` with
    ``tests`` on PYTHONPATH): deterministic, and slow enough (0.1 s per batch) to be killed
    in the middle of a stage."""
    return ScriptedPolicy(designing_script, delay=0.1)


def trainable_policy_factory() -> ScriptedPolicy:
    """For subprocess runs that train (``--policy scripted_policy:trainable_policy_factory``):
    the scripted replies of :func:`half_solving_script`, plus a real small Llama (random weights,
    fixed seed, a vocabulary covering the made-up ids) that the real learner trains with LoRA.
    The learner never samples from it; it trains on the scripted samples, which is all a
    kill-and-resume test of the train stage needs, and its updates are exactly reproducible."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1 << 16, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      tie_word_embeddings=True)
    policy = ScriptedPolicy(half_solving_script, delay=0.05)
    policy.model = LlamaForCausalLM(cfg).eval()
    policy.pad_token_id = 0
    return policy


_HOG = (
    "        if self.a % 3 == 0:\n"
    "            grab = [bytearray(64 << 20) for _ in range(256)]  # 16 GiB: past any limit\n"
    "            del grab\n"
)
_HINT = '        hint = "too high" if guess > self.target else "too low"\n'


def hog_script(conv, turn):
    """:func:`half_solving_script`, but the designed arithmetic chain grabs memory until the
    sandbox's address-space limit stops it whenever a wrong answer meets an ``a`` divisible by 3
    (memory exhaustion inside a designed environment, for benchmarks/soak.py)."""
    if conv.messages[0]["role"] == "system" and "design" in conv.messages[0]["content"]:
        module = GOOD_ENV.read_text()
        assert _HINT in module
        return "```python\n" + module.replace(_HINT, _HOG + _HINT) + "\n```"
    return half_solving_script(conv, turn)


def soak_policy_factory() -> ScriptedPolicy:
    """:func:`trainable_policy_factory` with :func:`hog_script`'s designs (benchmarks/soak.py)."""
    policy = trainable_policy_factory()
    policy.script = hog_script
    return policy


class RecordingSync:
    """A weight sync that records when it was pushed, relative to the learner's steps."""

    def __init__(self, learner):
        self.learner, self.pushed_after = learner, []

    def push(self, learner):
        assert learner is self.learner
        self.pushed_after.append(len(learner.steps))


class RecordingLearner:
    """Stands in for ``train.grpo.Learner`` (whose real test needs the model): records the
    samples of each step and writes a checkpoint folder like the real one."""

    def __init__(self):
        self.steps: list[list] = []

    def step(self, samples, progress=None):
        self.steps.append(list(samples))
        return {"loss": 0.0, "samples": float(len(samples)), "grad_norm": 1.0}

    def save(self, directory):
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / "learner.json").write_text(json.dumps({"steps": len(self.steps)}))
        return Path(directory)

    def load(self, directory):
        self.loaded = Path(directory)

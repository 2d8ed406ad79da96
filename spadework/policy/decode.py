"""What the local backends and the learner share to decode: prompts checked and rendered with the
chat template, tokens sampled and scored, and a row's bookkeeping while it decodes.

One function computes a token's logprob (:func:`token_logprobs`), for sampling and for the
teacher-forced pass of the learner alike; see ``spadework.policy.base`` for the convention. The
transformers backend (:mod:`spadework.policy.hf`), llama.cpp (:mod:`spadework.policy.llamacpp`),
the continuous batcher of ``spadework serve`` and the learner's forward pass import them from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spadework.errors import PolicyError
from spadework.policy.base import (
    LOOP_LONG_LINE,
    Completion,
    ConversationLike,
    SamplingParams,
    as_conversation,
    cut_at_stop,
    ends_in_loop,
    holds_move,
    template_has_thinking,
)
from spadework.seeding import derive_seed  # generator seed of (seed, conversation, sample)


def token_logprobs(logits: Any, token_ids: Any, temperature: Any) -> Any:
    """``log_softmax(logits / T)`` at ``token_ids`` (``T = 1`` when ``temperature == 0``).

    ``logits``: float tensor ``[..., V]``; ``token_ids``: long tensor ``[...]``; ``temperature``:
    one number, or a tensor ``[...]`` of one temperature per position (the learner scores each
    sample at the temperature it was drawn with). Computed in fp32.
    """
    return scaled_log_softmax(logits, temperature).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)


def scaled_log_softmax(logits: Any, temperature: Any) -> Any:
    """``log_softmax(logits / T)`` over the last axis in fp32, ``temperature`` as in
    :func:`token_logprobs` (the learner also takes each position's entropy from it)."""
    import torch

    return torch.log_softmax(logits.float() / _divisor(temperature, logits), dim=-1)


def _divisor(temperature: Any, logits: Any) -> Any:
    """The temperature to divide ``logits`` by: 1 for greedy (0), per row for a tensor."""
    import torch

    if isinstance(temperature, torch.Tensor):
        t = temperature.to(device=logits.device, dtype=torch.float32)
        return torch.where(t > 0, t, torch.ones_like(t)).unsqueeze(-1)
    return temperature if temperature > 0 else 1.0


def teacher_forced_logprobs(
    model: Any, prompt_ids: Sequence[int], output_ids: Sequence[int], temperature: float = 1.0
) -> list[float]:
    """Logprobs of ``output_ids`` after ``prompt_ids`` by one full forward pass (no cache)."""
    import torch

    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids) + list(output_ids)], device=device)
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1]
    target = torch.tensor(list(output_ids), device=device)
    return token_logprobs(logits, target, temperature).tolist()


def filter_logits(logits: Any, top_k: int, top_p: float) -> Any:
    """Set logits outside the top-k and outside the top-p nucleus to ``-inf`` (rows independent).

    The nucleus is the smallest set of most likely tokens whose probability reaches ``top_p``;
    the most likely token is always kept.
    """
    import torch

    out = logits
    if top_k > 0 and top_k < out.shape[-1]:
        kth = torch.topk(out, top_k, dim=-1).values[..., -1:]
        out = out.masked_fill(out < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(out, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits.double(), dim=-1)
        before = probs.cumsum(-1) - probs  # mass of strictly more likely tokens
        drop_sorted = before >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        out = out.masked_fill(drop, float("-inf"))
    return out


#: Tokens looked at for a nucleus without top-k before falling back to sorting the whole
#: vocabulary (the nucleus of a real model almost always lies within them).
NUCLEUS_PROBE = 1024


def candidates(scaled: Any, top_k: int, top_p: float) -> tuple[Any, Any] | None:
    """The tokens top-k and top-p keep, per row: (vocabulary ids in ascending order, their
    logits, ``-inf`` where a row keeps fewer); None when neither is set. The same set as
    :func:`filter_logits` (top-p over the top-k renormalised), found without sorting the
    vocabulary: ``torch.topk`` of ``top_k`` (or :data:`NUCLEUS_PROBE`) logits."""
    import torch

    vocab = scaled.shape[-1]
    if top_k <= 0 and top_p >= 1.0:
        return None
    vals, idx = torch.topk(scaled, min(top_k if top_k > 0 else NUCLEUS_PROBE, vocab), dim=-1)
    if top_p < 1.0:
        if top_k > 0:
            probs = torch.softmax(vals.double(), dim=-1)
        else:
            probs = torch.exp(vals.double() - torch.logsumexp(scaled.double(), -1, keepdim=True))
            if bool((probs.sum(-1) < top_p).any()):  # a nucleus wider than the probe: sort all
                ids = torch.arange(vocab, device=scaled.device).expand_as(scaled)
                return ids, filter_logits(scaled, 0, top_p)
        before = probs.cumsum(-1) - probs  # mass of strictly more likely tokens
        vals = vals.masked_fill(before >= top_p, float("-inf"))
    order = idx.argsort(dim=-1)
    return idx.gather(-1, order), vals.gather(-1, order)


def sample_tokens(
    logits: Any, params: SamplingParams, generators: Sequence[Any]
) -> tuple[Any, Any]:
    """Pick one token per row and its logprob (module convention). Row ``r`` uses ``generators[r]``.

    Inverse-CDF sampling with one uniform draw per row from that row's own generator, so rows
    are independent of each other and of the batch size. With top-k or top-p the CDF runs over
    the kept tokens only (:func:`candidates`), in vocabulary order: the same token as a CDF over
    the whole vocabulary with the others masked, without its cost (a full sort per row and step
    cost as much as a decoding step of the default model).
    """
    import torch

    if params.greedy:
        tokens = logits.argmax(-1)
        return tokens, token_logprobs(logits, tokens, 0.0)
    scaled = logits.float() / params.temperature
    kept = candidates(scaled, params.top_k, params.top_p)
    ids, pool = (None, scaled) if kept is None else kept
    cdf = torch.softmax(pool.double(), dim=-1).cumsum(-1)
    u = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in generators])
    u = u.to(cdf.device) * cdf[:, -1]
    pos = torch.searchsorted(cdf, u.unsqueeze(-1), right=True).clamp(max=pool.shape[-1] - 1)
    tokens = pos.squeeze(-1) if ids is None else ids.gather(-1, pos).squeeze(-1)
    return tokens, token_logprobs(logits, tokens, params.temperature)


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """How many leading tokens ``a`` and ``b`` share, at most ``limit`` (the engine's cached
    prefixes and the learner's shared rows both ask).

    >>> common_prefix((1, 2, 3, 4), (1, 2, 9), 5), common_prefix((1, 2, 3), (1, 2, 3), 2)
    (2, 2)
    """
    n, limit = 0, min(limit, len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def checked_prompts(prompts: Sequence[Sequence[int]], context: int,
                    n_vocab: int | None = None) -> list[list[int]]:
    """``prompts`` as lists, or PolicyError for an empty one, one that leaves no room in
    ``context``, or (given ``n_vocab``) a token id outside the vocabulary."""
    out = [list(p) for p in prompts]
    for i, p in enumerate(out):
        if not p:
            raise PolicyError(f"prompt {i} is empty")
        if len(p) >= context:
            raise PolicyError(f"prompt {i} has {len(p)} tokens but the model's context is "
                              f"{context}; shorten it (drop early turns or the document)")
        if n_vocab is not None and (max(p) >= n_vocab or min(p) < 0):
            raise PolicyError(f"prompt {i} has a token id outside [0, {n_vocab})")
    return out


def chat_prompt_ids(tokenizer: Any, conversation: ConversationLike) -> list[int]:
    """Render a conversation with the tokenizer's chat template (tools and thinking switch
    passed through) and tokenise it, ready for the assistant's answer."""
    from jinja2 import TemplateError

    conv = as_conversation(conversation)
    kwargs: dict[str, Any] = {}
    if conv.tools:
        kwargs["tools"] = [dict(t) for t in conv.tools]
    if conv.thinking is not None and template_has_thinking(tokenizer.chat_template):
        kwargs["enable_thinking"] = conv.thinking
    try:
        text = tokenizer.apply_chat_template(
            [dict(m) for m in conv.messages], tokenize=False, add_generation_prompt=True, **kwargs
        )
    except (TemplateError, ValueError, TypeError, KeyError) as e:
        raise PolicyError(f"the chat template could not render this conversation: {e}") from e
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class DecodeRow:
    """Mutable bookkeeping of one row during decoding (local to one decode call).

    ``policy`` is anything with ``stop_token_ids`` and ``decode(ids)`` (both local backends use
    it, so a row ends on the same token and yields the same text in either).
    """

    def __init__(self, budget: int, repeat: int | None = None) -> None:
        self.budget = budget
        self.repeat = repeat  # SamplingParams.stop_at_repeat
        self.ids: list[int] = []
        self.lps: list[float] = []
        self.finished = False
        self.reason = "length"
        self.line_tokens = 0  # tokens since the last one holding a newline

    def _loops(self, tok: int, policy: Any) -> bool:
        """Whether the reply now ends in a loop (:func:`ends_in_loop`), asked when a line ends
        and, along a line long enough to be one (``LOOP_LONG_LINE`` characters, at most 4 a
        token), every 16 tokens."""
        if "\n" in policy.decode([tok]):
            self.line_tokens = 0
        else:
            self.line_tokens += 1
            if self.line_tokens < LOOP_LONG_LINE // 4 or self.line_tokens % 16:
                return False
        return ends_in_loop(policy.decode(self.ids), self.repeat)

    def push(self, tok: int, lp: float, policy: Any, stops: Sequence[str],
             move: str | None = None) -> None:
        self.ids.append(tok)
        self.lps.append(lp)
        if tok in policy.stop_token_ids:
            self.finished, self.reason = True, "stop"
        elif stops and cut_at_stop(policy.decode(self.ids), stops)[1]:
            self.finished, self.reason = True, "stop"
        elif move is not None and any(c in policy.decode([tok]) for c in "}>") \
                and holds_move(policy.decode(self.ids), move):  # only a token with } or > can close one
            self.finished, self.reason = True, "move"
        elif self.repeat is not None and self._loops(tok, policy):
            self.finished, self.reason = True, "repeat"
        elif len(self.ids) >= self.budget:
            self.finished = True

    def completion(self, prompt: list[int], policy: Any, stops: Sequence[str]) -> Completion:
        text, _ = cut_at_stop(policy.decode(self.ids), stops)
        return Completion(
            text=text,
            prompt_ids=tuple(prompt),
            output_ids=tuple(self.ids),
            logprobs=tuple(self.lps),
            finish_reason=self.reason if self.finished else "length",
        )


__all__ = [
    "NUCLEUS_PROBE",
    "DecodeRow",
    "candidates",
    "chat_prompt_ids",
    "checked_prompts",
    "derive_seed",
    "filter_logits",
    "sample_tokens",
    "scaled_log_softmax",
    "teacher_forced_logprobs",
    "token_logprobs",
]

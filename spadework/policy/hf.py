"""The transformers backend: the default policy, trainable in place, CPU or CUDA.

Sampling is our own loop over ``model.forward`` with a KV cache, not ``generate()``, so that the
logprob of every sampled token is computed once, by one function (``token_logprobs``), the same
one a teacher-forced pass uses; the test suite checks the two agree. Batches are left-padded with
explicit position ids, so a row's result does not depend on how long its neighbours are (up to
float rounding). See ``spadework.policy.base`` for the logprob convention.

``HFPolicy.model`` and ``HFPolicy.tokenizer`` are the live objects: the learner updates the module
in place and the next ``chat`` call samples from the new weights.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from spadework.errors import PolicyError
from spadework.policy.base import (
    Completion,
    ConversationLike,
    SamplingParams,
    as_conversation,
    cut_at_stop,
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


class HFPolicy:
    """A ``Policy`` over a transformers causal LM and its tokenizer (chat template included).

    ``max_batch_size`` rows (conversation x sample) are generated together; more are done in
    chunks, grouped by prompt length to waste little on padding. ``context_length`` may lower the
    model's window (to bound memory). A prompt at or over the context raises ``PolicyError``;
    otherwise ``max_tokens`` is cut to what the context has left and the completion then ends
    with ``finish_reason == "length"``.
    """

    #: Its entry in the backend table (:mod:`spadework.policy.backends`).
    backend = "hf"

    def __init__(
        self, model: Any, tokenizer: Any, *, max_batch_size: int = 16,
        context_length: int | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        cfg_len = getattr(model.config, "max_position_embeddings", 0)
        native = int(cfg_len or tokenizer.model_max_length)
        self._context = min(context_length, native) if context_length else native
        eos = {tokenizer.eos_token_id}
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        self.stop_token_ids = frozenset(i for i in eos if i is not None)
        if not self.stop_token_ids:
            raise PolicyError("the tokenizer has no end-of-sequence token; set tokenizer.eos_token")
        pad = tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else min(self.stop_token_ids)

    @property
    def context_length(self) -> int:
        return self._context

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def prompt_ids(self, conversation: ConversationLike) -> list[int]:
        """Token ids of the conversation rendered by the chat template, ready for the answer."""
        return chat_prompt_ids(self.tokenizer, conversation)

    @contextlib.contextmanager
    def base_weights(self) -> Iterator[HFPolicy]:
        """Sample with the base weights inside the block: a LoRA adapter the learner wrapped
        around this model is disabled (and still trained; nothing is unloaded). Without an
        adapter the weights are the base weights already."""
        disable = getattr(self.model, "disable_adapter", None)
        with disable() if disable is not None else contextlib.nullcontext():
            yield self

    def chat(
        self, conversations: Sequence[ConversationLike], params: SamplingParams
    ) -> list[Completion]:
        """Sample ``params.n`` completions per conversation; see ``Policy.chat``."""
        return self.generate_ids([self.prompt_ids(c) for c in conversations], params)

    def generate_ids(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> list[Completion]:
        """Continue raw token-id prompts (no template); same ordering and errors as ``chat``."""
        prompts = checked_prompts(prompts, self._context)
        base_seed = params.seed if params.seed is not None else secrets.randbits(63)
        rows = [(i, j) for i in range(len(prompts)) for j in range(params.n)]
        order = sorted(range(len(rows)), key=lambda r: len(prompts[rows[r][0]]))
        results: dict[int, Completion] = {}
        for start in range(0, len(order), self.max_batch_size):
            chunk = order[start : start + self.max_batch_size]
            done = self._generate(
                [prompts[rows[r][0]] for r in chunk],
                [params.sample_seed(base_seed, *rows[r]) for r in chunk],
                params,
            )
            results.update(zip(chunk, done))
        return [results[r] for r in range(len(rows))]

    def _generate(
        self, prompts: list[list[int]], seeds: list[int], params: SamplingParams
    ) -> list[Completion]:
        import torch

        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                return self._decode_loop(prompts, seeds, params)
        finally:
            self.model.train(was_training)

    def _decode_loop(
        self, prompts: list[list[int]], seeds: list[int], params: SamplingParams
    ) -> list[Completion]:
        import torch

        dev = self.device
        b, width = len(prompts), max(len(p) for p in prompts)
        ids = torch.full((b, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((b, width), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, width - len(p) :] = torch.tensor(p)
            mask[r, width - len(p) :] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        gens = [torch.Generator().manual_seed(s) for s in seeds]
        budgets = [min(params.max_tokens, self._context - len(p)) for p in prompts]
        rows = [DecodeRow(budget) for budget in budgets]
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1
        )
        next_pos = pos[:, -1:] + 1
        active = list(range(b))  # rows still decoding, in cache order
        while True:
            tokens, lps = sample_tokens(out.logits[:, -1, :], params, [gens[r] for r in active])
            for r, tok, lp in zip(active, tokens.tolist(), lps.tolist()):
                rows[r].push(tok, lp, self, params.stop, params.stop_at_move)
            keep = [k for k, r in enumerate(active) if not rows[r].finished]
            if not keep:
                break
            cache = out.cache
            if len(keep) < len(active):  # drop finished rows: no compute is spent on them
                index = torch.tensor(keep, device=dev)
                cache.batch_select_indices(index)
                mask, next_pos = mask[index], next_pos[index]
                active = [active[k] for k in keep]
            feed = torch.tensor([rows[r].ids[-1] for r in active], device=dev)
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=-1)
            out = self.model(
                input_ids=feed.unsqueeze(-1), attention_mask=mask, position_ids=next_pos,
                cache=cache, use_cache=True,
            )
            next_pos = next_pos + 1
        return [row.completion(prompt, self, params.stop) for row, prompt in zip(rows, prompts)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of output ids, without a trailing end-of-sequence token."""
        if ids and ids[-1] in self.stop_token_ids:
            ids = ids[:-1]
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


class DecodeRow:
    """Mutable bookkeeping of one row during decoding (local to one decode call).

    ``policy`` is anything with ``stop_token_ids`` and ``decode(ids)`` (both local backends use
    it, so a row ends on the same token and yields the same text in either).
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.ids: list[int] = []
        self.lps: list[float] = []
        self.finished = False
        self.reason = "length"

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


def load_hf_policy(
    model: str | Path | None = None,
    *,
    device: str = "cpu",
    dtype: str | None = None,
    max_batch_size: int = 16,
    context_length: int | None = None,
    cache_dir: Path | None = None,
) -> HFPolicy:
    """Load a registry name (pulled on first use if licensed), a local HF folder, or a hub id.

    ``dtype`` defaults to float32 on CPU and bfloat16 on CUDA. Registry models and folders load
    with ``local_files_only=True``; only a hub id (``org/name`` that is not a folder) may touch
    the network.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spadework.policy.registry import resolve_model

    path, local_only = resolve_model(model, cache_dir=cache_dir)
    torch_dtype = getattr(torch, dtype) if dtype else (
        torch.float32 if device == "cpu" else torch.bfloat16
    )
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # transformers' "Loading weights" bar is not our progress
    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=local_only)
        lm = AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch_dtype, local_files_only=local_only
        )
    except (OSError, ValueError) as e:
        raise PolicyError(f"cannot load model {model!r} from {path}: {e}") from e
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return HFPolicy(lm.to(device), tok, max_batch_size=max_batch_size,
                    context_length=context_length)


__all__ = [
    "DecodeRow",
    "HFPolicy",
    "chat_prompt_ids",
    "derive_seed",
    "filter_logits",
    "load_hf_policy",
    "sample_tokens",
    "scaled_log_softmax",
    "teacher_forced_logprobs",
    "token_logprobs",
]

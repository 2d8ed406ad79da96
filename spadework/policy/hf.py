"""The transformers backend: the default policy, trainable in place, CPU or CUDA.

Sampling is our own loop over ``model.forward`` with a KV cache, not ``generate()``, so that the
logprob of every sampled token is computed once, by one function
(:func:`spadework.policy.decode.token_logprobs`), the same one a teacher-forced pass uses; the
test suite checks the two agree. Batches are left-padded with
explicit position ids, so a row's result does not depend on how long its neighbours are (up to
float rounding). See ``spadework.policy.base`` for the logprob convention.

``HFPolicy.model`` and ``HFPolicy.tokenizer`` are the live objects: the learner updates the module
in place and the next ``chat`` call samples from the new weights.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from spadework.errors import PolicyError
from spadework.policy.base import Completion, ConversationLike, SamplingParams
from spadework.policy.decode import DecodeRow, chat_prompt_ids, checked_prompts, sample_tokens
from spadework.policy.registry import resolve_model


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
        rows = [DecodeRow(budget, params.stop_at_repeat) for budget in budgets]
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
            cache = output_cache(out)
            if len(keep) < len(active):  # drop finished rows: no compute is spent on them
                index = torch.tensor(keep, device=dev)
                cache.batch_select_indices(index)
                mask, next_pos = mask[index], next_pos[index]
                active = [active[k] for k in keep]
            feed = torch.tensor([rows[r].ids[-1] for r in active], device=dev)
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=-1)
            out = self.model(
                input_ids=feed.unsqueeze(-1), attention_mask=mask, position_ids=next_pos,
                use_cache=True, **cache_kwargs(self.model, cache),
            )
            next_pos = next_pos + 1
        return [row.completion(prompt, self, params.stop) for row, prompt in zip(rows, prompts)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of output ids, without a trailing end-of-sequence token."""
        if ids and ids[-1] in self.stop_token_ids:
            ids = ids[:-1]
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


def output_cache(out: Any) -> Any:
    """The key/value cache a forward returned: ``out.cache`` in the transformers this project
    is developed with (5.24), ``out.past_key_values`` in earlier 5.x releases, which
    ``transformers>=5.0`` admits (a GPU machine here had 5.17, and the decode loop failed there
    on ``out.cache``)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def cache_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    """The keyword a forward of ``model`` takes its cache by: ``cache`` where its ``forward``
    names it (5.24), else ``past_key_values`` (earlier 5.x; 5.24 still takes it, with a
    deprecation warning). A PEFT wrapper is looked through to the model it wraps."""
    return {_cache_keyword(type(_unwrapped(model))): cache}


def _unwrapped(model: Any) -> Any:
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


@functools.cache
def _cache_keyword(model_class: type) -> str:
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


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


__all__ = ["HFPolicy", "load_hf_policy"]

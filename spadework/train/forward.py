"""The learner's teacher-forced pass: samples cut into micro-batches, packed into right-padded
tensors, and the log-probabilities of their trained tokens, each at the temperature it was
sampled with (only the selected positions go through the LM head, a chunk at a time), in the
precision the learner computes in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spadework.train.batch import Sample


def micro_batches(samples: Sequence[Sample], max_rows: int, max_tokens: int) -> list[list[Sample]]:
    """Samples sorted by length (little padding), cut into micro-batches of at most ``max_rows``
    rows and ``max_tokens`` padded tokens (rows x longest row); a longer sample goes alone.

    >>> from spadework.types import Sampling
    >>> s = lambda n: Sample("agent", (1,) * n, (2,), (-0.1,), 0.0, Sampling(1.0))
    >>> [[x.length for x in m] for m in micro_batches([s(9), s(2), s(3), s(4)], 3, 10)]
    [[3, 4], [5], [10]]
    """
    order = sorted(samples, key=lambda x: x.length)
    out: list[list[Sample]] = []
    for sample in order:
        width = sample.length  # the longest so far: sorted
        if out and len(out[-1]) < max_rows and width * (len(out[-1]) + 1) <= max_tokens:
            out[-1].append(sample)
        else:
            out.append([sample])
    return out


def pack(micro: Sequence[Sample], pad_id: int, dev: Any) -> tuple[Any, Any, Any, Any]:
    """Right-padded ids and attention mask ``[b, L]``; ``select[b, L]`` is True at the positions
    whose next-token prediction is a trained output token; ``targets`` are those tokens,
    flattened sample by sample (the order of ``Sample.logprobs``)."""
    import torch

    width = max(s.length for s in micro)
    ids = torch.full((len(micro), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(micro), width), dtype=torch.long)
    select = torch.zeros((len(micro), width), dtype=torch.bool)
    for r, s in enumerate(micro):
        seq = list(s.prompt_ids) + list(s.output_ids)
        ids[r, : len(seq)] = torch.tensor(seq)
        attn[r, : len(seq)] = 1
        start = len(s.prompt_ids) - 1
        if s.trained:
            select[r, start : len(seq) - 1] = torch.tensor(s.trained)
        else:
            select[r, start : len(seq) - 1] = True
    targets = torch.tensor([t for s in micro for t in s.trained_ids()], dtype=torch.long)
    return ids.to(dev), attn.to(dev), select.to(dev), targets.to(dev)


def resolve_compute(setting: str, device: str) -> str:
    """``float32`` or ``bfloat16`` for ``TrainConfig.compute_dtype`` on ``device``."""
    if setting != "auto":
        return setting
    import torch

    native = device == "cpu" and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return "bfloat16" if native else "float32"


def selected_logprobs(model: Any, ids: Any, attn: Any, select: Any, targets: Any, temps: Any,
                      chunk: int = 0, entropy: bool = False, compute: str = "float32") -> tuple[Any, Any]:
    """Logprobs ``[n]`` of ``targets`` at the ``select`` positions (row-major order), each under
    ``softmax(logits / T)`` with ``temps`` one T per position, and with ``entropy`` each
    position's entropy of that distribution (nats, no gradient; else None).

    Runs the decoder over the whole sequence but the LM head only where ``select`` is True (the
    head is the largest matrix of a small model; prompt positions need no logits), without a KV
    cache (a training pass reads nothing back from one). The head and softmax go ``chunk``
    positions at a time (0: all at once); under autograd each chunk is recomputed in the
    backward pass rather than kept, so at most one chunk's logits exist at any time. Models that
    post-process logits (soft-capping, a logit scale) go through the full forward instead and
    are only chunked in the softmax. ``compute`` ``"bfloat16"`` runs the decoder's matmuls under
    ``torch.autocast`` in bfloat16; the head and the softmax stay in fp32.
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    cfg = getattr(model, "config", None)
    post = getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None)
    head = None
    split = post is None and hasattr(model, "get_decoder") and model.get_output_embeddings() is not None
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=compute == "bfloat16"):
        if split:
            states = model.get_decoder()(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
            head = model.get_output_embeddings()
        else:
            states = model(input_ids=ids, attention_mask=attn, use_cache=False).logits
    rows = states[select]
    n = rows.shape[0]
    size = chunk if chunk > 0 else max(n, 1)
    recompute = n > size and torch.is_grad_enabled()
    parts = []
    for s in range(0, n, size):
        args = (head, rows[s : s + size], targets[s : s + size], temps[s : s + size], entropy)
        parts.append(checkpoint(_head_logprobs, *args, use_reentrant=False) if recompute
                     else _head_logprobs(*args))
    if not parts:
        return rows.new_zeros(0, dtype=torch.float32), (rows.new_zeros(0, dtype=torch.float32) if entropy else None)
    logp = torch.cat([p[0] for p in parts])
    return logp, torch.cat([p[1] for p in parts]) if entropy else None


def _head_logprobs(head: Any, rows: Any, targets: Any, temps: Any, entropy: bool) -> tuple[Any, Any]:
    """One chunk of :func:`selected_logprobs`: ``head(rows)`` (``rows`` are logits already when
    ``head`` is None) to the targets' logprobs, and the entropies when asked."""
    import torch

    from spadework.policy.decode import scaled_log_softmax

    logp = scaled_log_softmax(rows if head is None else head(rows.to(head.weight.dtype)), temps)
    picked = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if not entropy:
        return picked, None
    with torch.no_grad():
        return picked, -(logp.exp() * logp).sum(dim=-1)

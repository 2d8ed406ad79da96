"""The learner's teacher-forced pass: samples cut into micro-batches, packed into right-padded
tensors, and the log-probabilities of their trained tokens, each at the temperature it was
sampled with (only the selected positions go through the LM head, a chunk at a time), in the
precision the learner computes in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spadework.policy.decode import common_prefix, scaled_log_softmax
from spadework.train.attention import Layout
from spadework.train.batch import Sample


@dataclass(frozen=True)
class Row:
    """Samples run as one sequence of a pass: the first ``shared`` prompt tokens, which they all
    begin with, once, then each sample's own tokens in turn. Each of a sample's tokens attends to
    the shared tokens and to its own earlier tokens only, at the positions it had alone, so it
    sees exactly the context it was sampled in (:func:`pack`). A row of one sample is that
    sample's sequence.

    >>> from spadework.types import Sampling
    >>> s = lambda *p: Sample("agent", p, (9,), (-0.1,), 1.0, Sampling(1.0))
    >>> Row((s(1, 2, 3, 4), s(1, 2, 3, 5, 6)), shared=3).width   # 3 shared + 2 + 3
    8
    """

    samples: tuple[Sample, ...]
    shared: int = 0

    @property
    def width(self) -> int:
        """The tokens the row runs."""
        return self.shared + sum(s.length - self.shared for s in self.samples)


def shared_rows(samples: Sequence[Sample], max_tokens: int, min_shared: int) -> list[Row]:
    """``samples`` as rows: those whose prompts begin with at least ``min_shared`` of the same
    tokens share a row (and run those tokens once) while the row stays within ``max_tokens``;
    every other sample is a row of its own. 0 gives every sample its own row.

    Samples are taken in the order of their prompts, so prompts that share a long beginning (the
    turns of one environment's episodes: the system block with the tool schemas and the task)
    are neighbours. A sample joins the row before it when the prefix it shares with the row's
    first sample (the row's prefix shrinks to it if shorter) saves at least ``min_shared``
    tokens against running it alone; else it starts the next row. The shared part stops one
    token short of the shortest prompt in the row: each sample's first trained position (its
    prompt's last token) is its own.

    >>> from spadework.types import Sampling
    >>> s = lambda *p: Sample("agent", p, (9,), (-0.1,), 1.0, Sampling(1.0))
    >>> batch = [s(1, 2, 3, 4), s(7, 8), s(1, 2, 3, 5, 6), s(1, 2, 8)]
    >>> [(len(r.samples), r.shared, r.width) for r in shared_rows(batch, 64, 2)]
    [(2, 3, 8), (1, 0, 4), (1, 0, 3)]
    >>> [(len(r.samples), r.shared, r.width) for r in shared_rows(batch, 64, 1)]
    [(3, 2, 11), (1, 0, 3)]
    >>> [(len(r.samples), r.width) for r in shared_rows([s(1, 2, 3, 4), s(1, 2, 3, 5)], 64, 0)]
    [(1, 5), (1, 5)]
    """
    if min_shared <= 0:
        return [Row((s,)) for s in samples]
    out: list[Row] = []
    for sample in sorted(samples, key=lambda x: x.prompt_ids):
        last = out[-1] if out else None
        if last is not None:
            cap = min(len(x.prompt_ids) for x in (*last.samples, sample)) - 1
            n = common_prefix(last.samples[0].prompt_ids, sample.prompt_ids, cap)
            shared = n if len(last.samples) == 1 else min(n, last.shared)
            row = Row((*last.samples, sample), shared)
            if last.width + sample.length - row.width >= min_shared and row.width <= max_tokens:
                out[-1] = row
                continue
        out.append(Row((sample,)))
    return out


def micro_batches(samples: Sequence[Sample], max_rows: int, max_tokens: int,
                  min_shared: int = 0) -> list[list[Row]]:
    """Samples as rows (:func:`shared_rows`), sorted by width (little padding), cut into
    micro-batches of at most ``max_rows`` rows and ``max_tokens`` padded tokens (rows x widest
    row); a wider row goes alone.

    >>> from spadework.types import Sampling
    >>> s = lambda n: Sample("agent", (1,) * n, (2,), (-0.1,), 0.0, Sampling(1.0))
    >>> [[r.width for r in m] for m in micro_batches([s(9), s(2), s(3), s(4)], 3, 10)]
    [[3, 4], [5], [10]]
    """
    order = sorted(shared_rows(samples, max_tokens, min_shared), key=lambda r: r.width)
    out: list[list[Row]] = []
    for row in order:
        width = row.width  # the widest so far: sorted
        if out and len(out[-1]) < max_rows and width * (len(out[-1]) + 1) <= max_tokens:
            out[-1].append(row)
        else:
            out.append([row])
    return out


def samples_of(micro: Sequence[Row]) -> list[Sample]:
    """A micro-batch's samples in the order :func:`pack` lays out their trained tokens."""
    return [s for row in micro for s in row.samples]


def pack(micro: Sequence[Row], pad_id: int, dev: Any) -> tuple[Any, Any, Any, Any, Any]:
    """Right-padded ids ``[b, L]``, the attention mask, ``select[b, L]`` (True at the positions
    whose next-token prediction is a trained output token), ``targets`` (those tokens, flattened
    in :func:`samples_of` order, the order of their ``Sample.logprobs``) and the position ids.

    When every row is one sample the mask is the usual ``[b, L]`` padding mask and the positions
    are None (the model counts them). Otherwise the mask is ``[b, 1, L, L]``, True where a query
    may attend to a key: causal, and only within the shared prefix or the query's own sample
    (padding attends to padding), with each sample's positions continuing from the prefix."""
    import torch

    width = max(r.width for r in micro)
    ids = torch.full((len(micro), width), pad_id, dtype=torch.long)
    select = torch.zeros((len(micro), width), dtype=torch.bool)
    seg = torch.full((len(micro), width), -1, dtype=torch.long)  # 0 prefix, k sample k, -1 padding
    pos = torch.zeros((len(micro), width), dtype=torch.long)
    for r, row in enumerate(micro):
        p = row.shared
        ids[r, :p] = torch.tensor(row.samples[0].prompt_ids[:p], dtype=torch.long)
        seg[r, :p] = 0
        pos[r, :p] = torch.arange(p)
        at = p
        for k, s in enumerate(row.samples, 1):
            own = (list(s.prompt_ids) + list(s.output_ids))[p:]
            end = at + len(own)
            ids[r, at:end] = torch.tensor(own)
            seg[r, at:end] = k
            pos[r, at:end] = torch.arange(p, s.length)
            first = at + len(s.prompt_ids) - p - 1  # the prompt's last token predicts the first output
            select[r, first : end - 1] = torch.tensor(s.trained) if s.trained else True
            at = end
    targets = torch.tensor([t for s in samples_of(micro) for t in s.trained_ids()], dtype=torch.long)
    if all(len(row.samples) == 1 for row in micro):
        return ids.to(dev), (seg >= 0).long().to(dev), select.to(dev), targets.to(dev), None
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    same = seg[:, :, None] == seg[:, None, :]
    mask = causal & (same | (seg[:, None, :] == 0))
    return ids.to(dev), mask[:, None].to(dev), select.to(dev), targets.to(dev), pos.to(dev)


def layouts(micro: Sequence[Row]) -> tuple[Layout, ...]:
    """Each row's layout as :func:`pack` lays it out, for
    :func:`spadework.train.attention.segment_attention`: the shared prefix's length and each
    sample's ``(start, length)`` in the row (its tokens after the prefix).

    >>> from spadework.types import Sampling
    >>> s = lambda *p: Sample("agent", p, (9,), (-0.1,), 1.0, Sampling(1.0))
    >>> layouts([Row((s(1, 2, 3, 4), s(1, 2, 3, 5, 6)), shared=3), Row((s(7, 8),))])
    ((3, ((3, 2), (5, 3))), (0, ((0, 3),)))
    """
    out = []
    for row in micro:
        at, spans = row.shared, []
        for s in row.samples:
            spans.append((at, s.length - row.shared))
            at += s.length - row.shared
        out.append((row.shared, tuple(spans)))
    return tuple(out)


def resolve_compute(setting: str, device: str) -> str:
    """What ``TrainConfig.compute_dtype`` means on ``device``: ``auto`` is ``bfloat16-linear``
    (:mod:`spadework.train.linear16`) on a CPU with native bfloat16 arithmetic, else
    ``float32``; the other settings are themselves."""
    if setting != "auto":
        return setting
    import torch

    native = device == "cpu" and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return "bfloat16-linear" if native else "float32"


def selected_logprobs(model: Any, ids: Any, attn: Any, select: Any, targets: Any, temps: Any,
                      chunk: int = 0, entropy: bool = False, compute: str = "float32",
                      positions: Any = None, segments: Any = None) -> tuple[Any, Any]:
    """Logprobs ``[n]`` of ``targets`` at the ``select`` positions (row-major order), each under
    ``softmax(logits / T)`` with ``temps`` one T per position, and with ``entropy`` each
    position's entropy of that distribution (nats, no gradient; else None).

    Runs the decoder over the whole sequence but the LM head only where ``select`` is True (the
    head is the largest matrix of a small model; prompt positions need no logits), without a KV
    cache (a training pass reads nothing back from one). The head and softmax go ``chunk``
    positions at a time (0: all at once); under autograd each chunk is recomputed in the
    backward pass rather than kept, so at most one chunk's logits exist at any time. Models that
    post-process logits (soft-capping, a logit scale) go through the full forward instead and
    are only chunked in the softmax. ``compute`` ``"bfloat16"`` runs the decoder under
    ``torch.autocast`` in bfloat16; the head and the softmax stay in fp32 (``"bfloat16-linear"``
    is the caller's :class:`~spadework.train.linear16.Linear16` context, nothing here). ``attn`` and
    ``positions`` are :func:`pack`'s: a ``[b, 1, L, L]`` mask of rows that share a prefix goes to
    the model as it is (as an additive mask for eager attention). ``segments`` (:func:`layouts`
    of the rows) go to a model on :mod:`spadework.train.attention`'s implementation instead of
    the mask: each segment attends to what it may see, nothing else is computed.
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    cfg = getattr(model, "config", None)
    post = getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None)
    extra = {} if segments is None else {"segments": segments}
    if segments is not None:
        attn = None  # the layout says it all; the masks' interface makes none (or a causal one) unread
    elif attn.dim() == 4 and getattr(cfg, "_attn_implementation", "eager") == "eager":
        attn = torch.zeros(attn.shape, dtype=torch.float32, device=attn.device).masked_fill(
            ~attn, torch.finfo(torch.float32).min)
    head = None
    split = post is None and hasattr(model, "get_decoder") and model.get_output_embeddings() is not None
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=compute == "bfloat16"):
        if split:
            states = model.get_decoder()(input_ids=ids, attention_mask=attn, position_ids=positions,
                                         use_cache=False, **extra).last_hidden_state
            head = model.get_output_embeddings()
        else:
            states = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=False,
                           **extra).logits
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

    logp = scaled_log_softmax(rows if head is None else head(rows.to(head.weight.dtype)), temps)
    picked = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if not entropy:
        return picked, None
    with torch.no_grad():
        return picked, -(logp.exp() * logp).sum(dim=-1)

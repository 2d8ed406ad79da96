"""Attention over a packed row by its segments, not through an L x L mask.

A row of the learner's pass (:class:`spadework.train.forward.Row`) holds a shared prompt prefix
once and then each sample's own tokens; each of a sample's tokens may attend to the prefix and
to its own earlier tokens only. Given as an ``[L, L]`` mask, that pattern makes an attention
kernel compute every query against every key of the row and throw most of it away: a row of
five 350-token samples after a 600-token prefix computes 2,350^2 = 5.5 M scores of which 1.4 M
are kept, and a row of one sample with padding behind it gets no causal skipping either.

:func:`segment_attention` computes the same thing segment by segment with
``scaled_dot_product_attention``: the prefix causally over itself, each sample's queries over
the prefix's keys and its own (causally), and zeros at the padding (which nothing selects).
Under the name :data:`NAME` it is registered as a transformers attention implementation that,
given no ``segments`` keyword, is transformers' own ``sdpa`` (and its masks are ``sdpa``'s), so a
model switched to it (:func:`use_segments`) generates exactly as before; the learner's pass gives
it the rows' layout (:func:`spadework.train.forward.pack`). The keyword travels with the layer's
other arguments, so a layer recomputed in the backward pass (gradient checkpointing) sees it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NAME = "spadework_segments"

#: one row's layout: the shared prefix's length and each sample's (start, length) in the row
Layout = tuple[int, tuple[tuple[int, int], ...]]


def segment_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                      dropout: float = 0.0, scaling: float | None = None,
                      segments: Sequence[Layout] | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers' attention-interface call: ``query`` ``[b, heads, L, d]``, ``key`` and
    ``value`` ``[b, kv_heads, L, d]``; returns ``[b, L, heads, d]`` and no weights. Without
    ``segments`` it is transformers' ``sdpa_attention_forward``; with them (one layout per row)
    ``attention_mask`` is not read."""
    if segments is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    import torch
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    b, heads, width, dim = query.shape
    gqa = heads != key.shape[1]  # each query head reads kv head h // (heads / kv_heads), as repeat_kv
    rows = []
    for r, (shared, spans) in enumerate(segments):
        # one row at a time, kept 4-D: a 3-D call leaves the CPU's flash kernel for the math one
        q, k, v = query[r : r + 1], key[r : r + 1], value[r : r + 1]
        parts = []
        if shared:
            parts.append(sdpa(q[:, :, :shared], k[:, :, :shared], v[:, :, :shared], dropout_p=dropout,
                              is_causal=True, scale=scaling, enable_gqa=gqa))
        for start, n in spans:
            end = start + n
            if not shared:
                parts.append(sdpa(q[:, :, start:end], k[:, :, start:end], v[:, :, start:end],
                                  dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=gqa))
                continue
            mask = torch.ones((n, shared + n), dtype=torch.bool, device=q.device)
            mask[:, shared:] = torch.ones((n, n), dtype=torch.bool, device=q.device).tril()
            keys = torch.cat((k[:, :, :shared], k[:, :, start:end]), dim=2)
            values = torch.cat((v[:, :, :shared], v[:, :, start:end]), dim=2)
            parts.append(sdpa(q[:, :, start:end], keys, values, attn_mask=mask, dropout_p=dropout,
                              scale=scaling, enable_gqa=gqa))
        used = shared + sum(n for _, n in spans)
        if used < width:  # padding: attends to nothing, read by nothing
            parts.append(q.new_zeros((1, heads, width - used, dim)))
        rows.append(torch.cat(parts, dim=2) if len(parts) > 1 else parts[0])
    out = torch.cat(rows) if len(rows) > 1 else rows[0]
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Register :data:`NAME` with transformers (its attention and, as ``sdpa``'s, its masks)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(NAME, segment_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def use_segments(model: Any) -> bool:
    """Switch ``model`` from ``sdpa`` to :data:`NAME` (True), or leave a model on any other
    implementation (eager, flash kernels) as it is (False): the learner then passes masks."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current == NAME:
        return True
    if current != "sdpa":
        return False
    register()
    config._attn_implementation = NAME
    return True

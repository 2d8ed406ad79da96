"""The GRPO token loss: PPO-clip with an asymmetric clip, truncated importance sampling, k3 KL.

Everything here works on flat per-token tensors (one entry per trained output token of the whole
micro-batch), so a test can feed hand-made numbers. Symbols, per token ``t`` of sample ``i``:

- ``logp``: log pi_theta(token) at the sampling temperature, with gradient (the current weights);
- ``logp_old``: the same under the weights the batch is trained from, detached. The learner does
  one optimizer step per batch, so ``logp_old = logp.detach()``: the PPO ratio is exactly 1 in
  value, its gradient is the policy gradient, and the clip never binds. It binds only when a
  caller takes several steps on one batch and passes the first step's logprobs as ``logp_old``;
- ``logp_sampling``: what the sampler reported (vLLM / our decoder; possibly several learner steps
  old for delayed designer samples);
- ``A``: the sample's advantage.

Per-token loss::

    ratio = exp(logp - logp_old)
    pg    = max(-A * ratio, -A * clamp(ratio, 1 - clip_low, 1 + clip_high))
    w     = min(exp(logp_old - logp_sampling), tis_cap)           # detached (TIS)
    kl    = exp(logp_ref - logp) - (logp_ref - logp) - 1           # k3, >= 0
    loss_t = w * pg + kl_coef * kl

The batch loss is ``sum_t weight_t * loss_t`` with ``weight_t`` from :func:`token_weights`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spadework.settings.learner import AGGREGATIONS


def token_weights(lengths: Sequence[int], aggregation: str, *, total_tokens: int,
                  total_samples: int) -> list[float]:
    """The weight of each token of each sample in the batch loss, flattened sample by sample.

    ``token``: every token of the whole batch counts the same, ``1 / total_tokens`` (long
    completions weigh more; no length bias per token, as in DAPO). ``sequence``: every sample
    counts the same, each of its tokens ``1 / (len_i * total_samples)`` (the GRPO paper's mean of
    per-sample means). ``total_*`` are over the whole optimizer step, not one micro-batch, so
    gradient accumulation over micro-batches gives the same gradient as one big batch.

    >>> token_weights([1, 3], "token", total_tokens=4, total_samples=2)
    [0.25, 0.25, 0.25, 0.25]
    >>> token_weights([1, 3], "sequence", total_tokens=4, total_samples=2)
    [0.5, 0.16666666666666666, 0.16666666666666666, 0.16666666666666666]
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    if total_tokens <= 0 or total_samples <= 0:
        raise ValueError("total_tokens and total_samples must be > 0")
    out: list[float] = []
    for n in lengths:
        w = 1.0 / total_tokens if aggregation == "token" else 1.0 / (n * total_samples)
        out.extend([w] * n)
    return out


def grpo_token_loss(
    logp: Any, logp_old: Any, logp_sampling: Any, advantages: Any, weights: Any, *,
    clip_low: float, clip_high: float, tis_cap: float,
    logp_ref: Any | None = None, kl_coef: float = 0.0,
) -> tuple[Any, dict[str, Any]]:
    """The weighted loss of a set of tokens (module docstring) and detached per-token terms.

    All arguments are 1-D float tensors of one length (``advantages`` per token). Returns
    ``(loss, terms)``; ``terms`` holds detached tensors ``ratio``, ``clipped`` (bool: the clipped
    branch was taken and has zero gradient), ``tis`` (the capped weight), ``sample_ratio``
    (uncapped ``exp(logp_old - logp_sampling)``), ``kl`` (zeros when no reference is given) and
    ``weighted`` (each token's ``weight_t * loss_t``: they sum to ``loss``, so a subset's sum is
    that subset's share of the loss, e.g. one role's).
    """
    import torch

    ratio = torch.exp(logp - logp_old)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg = torch.maximum(unclipped, clipped)
    sample_ratio = torch.exp((logp_old - logp_sampling).detach())
    tis = torch.clamp(sample_ratio, max=tis_cap)
    per_token = tis * pg
    if logp_ref is not None:
        delta = logp_ref.detach() - logp
        kl = torch.exp(delta) - delta - 1.0
        if kl_coef:
            per_token = per_token + kl_coef * kl
        kl = kl.detach()
    else:
        kl = torch.zeros_like(logp).detach()
    loss = (weights * per_token).sum()
    terms = {
        "ratio": ratio.detach(), "clipped": (clipped > unclipped).detach(), "tis": tis,
        "sample_ratio": sample_ratio, "kl": kl, "weighted": (weights * per_token).detach(),
    }
    return loss, terms

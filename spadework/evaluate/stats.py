"""Uncertainty of an evaluation: bootstrap CIs over items, paired tests, Holm's adjustment.

The unit of resampling is the item, never the sample: the samples of one item are correlated
(same question), so resampling them would understate the uncertainty. A suite's score is the
mean over items of the item's mean correctness (equal to the pooled mean over samples when every
item has the same number of samples, as here). Buckets of reasoning-gym are resampled stratified
by task: each task keeps its number of items, so a bucket's composition does not vary between
bootstrap replicates. A stratum with one item then contributes no variance, which the summary
makes visible by reporting the number of items.

All randomness comes from ``numpy.random.default_rng(seed)``: the same inputs give the same CI.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

REPS = 2000
PERMUTATIONS = 10000
EXACT_UP_TO = 16  # sign flips are enumerated exactly up to this many items (2**16 patterns)


def mean(values: Sequence[float]) -> float:
    """The mean, 0.0 for no values.

    >>> mean([1, 0, 0, 1]), mean([])
    (0.5, 0.0)
    """
    return float(np.mean(values)) if len(values) else 0.0


def bootstrap_ci(values: Sequence[float], strata: Sequence[str] | None = None, *,
                 reps: int = REPS, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (one value per item).

    With ``strata``, items are resampled within their stratum (stratum sizes fixed). No values
    give ``(0.0, 0.0)``; identical values give a zero-width interval.

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    (1.0, 1.0)
    >>> lo, hi = bootstrap_ci([0.0] * 50 + [1.0] * 50)
    >>> 0.35 < lo < 0.45 and 0.55 < hi < 0.65
    True
    >>> bootstrap_ci([0.0, 1.0], strata=["a", "b"])  # one item per stratum: nothing varies
    (0.5, 0.5)
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    if strata is None:
        idx = rng.integers(0, x.size, size=(reps, x.size))
        stats = x[idx].mean(axis=1)
    else:
        if len(strata) != x.size:
            raise ValueError(f"{len(strata)} strata for {x.size} values")
        labels = np.asarray(list(strata))
        total = np.zeros(reps)
        for s in sorted(set(strata)):
            members = np.flatnonzero(labels == s)
            draw = rng.integers(0, members.size, size=(reps, members.size))
            total += x[members][draw].sum(axis=1)
        stats = total / x.size
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(round(lo, 12)), float(round(hi, 12))


def sign_flip_pvalue(diffs: Sequence[float], *, reps: int = PERMUTATIONS, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p-value of ``mean(diffs) == 0`` (paired differences).

    Under the null each item's difference is as likely negated. Up to :data:`EXACT_UP_TO` items
    every sign pattern is enumerated and ``p = #{|mean flipped| >= |mean observed|} / 2**n``;
    beyond, ``reps`` random patterns give ``(1 + count) / (1 + reps)``. No items or all-zero
    differences give 1.0.

    >>> sign_flip_pvalue([1, 1, 1])  # 2 of the 8 patterns are as extreme: all + and all -
    0.25
    >>> sign_flip_pvalue([1, -1])
    1.0
    >>> sign_flip_pvalue([1] * 40) < 0.001
    True
    """
    d = np.asarray(diffs, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1.0
    observed = abs(d.mean()) - 1e-12
    if d.size <= EXACT_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        return float(np.mean(np.abs(signs @ d / d.size) >= observed))
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(reps, d.size))
    count = int(np.sum(np.abs(signs @ d / d.size) >= observed))
    return (1 + count) / (1 + reps)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input's order.

    Sorted ascending, ``p_(i)`` becomes ``max_{j <= i} min(1, (m - j + 1) * p_(j))``.

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    >>> holm([0.5, 0.9])
    [1.0, 1.0]
    """
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = round(running, 12)
    return out


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` correct (Chen et al., 2021).

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 0, 2), pass_at_k(4, 1, 4)
    (0.25, 0.0, 1.0)
    """
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))

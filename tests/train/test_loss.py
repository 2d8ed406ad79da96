"""The GRPO token loss against values computed by hand with plain Python."""

from __future__ import annotations

import math

import pytest

from spadework.train.loss import grpo_token_loss, token_weights

# (logp, logp_old, logp_sampling, advantage) per token
TOKENS = [
    (-1.0, -1.0, -1.1, 1.0),   # on-policy, small train/sampler mismatch: TIS weight e^0.1
    (-0.5, -1.0, -1.0, 1.0),   # ratio e^0.5 > 1.28 with A > 0: clipped at 1 + 0.28
    (-2.0, -2.0, -3.0, -0.5),  # sampler ratio e^1 > 2: TIS weight capped at 2
    (-1.5, -1.0, -1.2, -1.0),  # ratio e^-0.5 < 0.8 with A < 0: clipped at 1 - 0.2
]


def by_hand(tokens, clip_low=0.2, clip_high=0.28, tis_cap=2.0):
    per_token = []
    for lp, old, samp, a in tokens:
        r = math.exp(lp - old)
        pg = max(-a * r, -a * min(max(r, 1 - clip_low), 1 + clip_high))
        w = min(math.exp(old - samp), tis_cap)
        per_token.append(w * pg)
    return per_token


def run(tokens, **kw):
    import torch

    cols = [torch.tensor(c, dtype=torch.float64) for c in zip(*tokens)]
    logp = cols[0].clone().requires_grad_(True)
    weights = torch.tensor(token_weights([len(tokens)], "token", total_tokens=len(tokens),
                                         total_samples=1), dtype=torch.float64)
    loss, terms = grpo_token_loss(logp, cols[1], cols[2], cols[3], weights, clip_low=0.2,
                                  clip_high=0.28, tis_cap=2.0, **kw)
    loss.backward()
    return loss, terms, logp.grad


def test_loss_matches_hand_computation():
    per_token = by_hand(TOKENS)
    # the same numbers written out: -e^0.1, -1.28, 2 * 0.5, e^0.2 * 0.8
    expected = [-math.exp(0.1), -1.28, 1.0, math.exp(0.2) * 0.8]
    assert per_token == pytest.approx(expected, abs=1e-12)
    loss, terms, grad = run(TOKENS)
    assert loss.item() == pytest.approx(sum(expected) / 4, abs=1e-12)
    assert terms["clipped"].tolist() == [False, True, False, True]
    assert terms["tis"].tolist() == pytest.approx([math.exp(0.1), 1.0, 2.0, math.exp(0.2)])
    # gradient: w * (-A) * ratio / 4 where unclipped, zero where the clip binds
    assert grad.tolist() == pytest.approx([-math.exp(0.1) / 4, 0.0, 2 * 0.5 / 4, 0.0], abs=1e-12)


def test_k3_kl_term():
    import torch

    ref = [-1.2, -0.5, -2.5, -1.0]
    loss, terms, _ = run(TOKENS, logp_ref=torch.tensor(ref, dtype=torch.float64), kl_coef=0.1)
    kl = [math.exp(r - t[0]) - (r - t[0]) - 1 for r, t in zip(ref, TOKENS)]
    assert terms["kl"].tolist() == pytest.approx(kl, abs=1e-12)
    assert all(k >= 0 for k in kl)
    expected = sum(p + 0.1 * k for p, k in zip(by_hand(TOKENS), kl)) / 4
    assert loss.item() == pytest.approx(expected, abs=1e-12)


def test_on_policy_ratio_is_one_and_never_clipped():
    tokens = [(lp, lp, samp, a) for lp, _, samp, a in TOKENS]
    _, terms, _ = run(tokens)
    assert terms["ratio"].tolist() == [1.0] * 4
    assert not terms["clipped"].any()


def test_sequence_weights_give_each_sample_equal_mass():
    w = token_weights([2, 6], "sequence", total_tokens=8, total_samples=2)
    assert sum(w[:2]) == pytest.approx(0.5) and sum(w[2:]) == pytest.approx(0.5)
    assert sum(token_weights([2, 6], "token", total_tokens=16, total_samples=4)) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="aggregation"):
        token_weights([1], "mean", total_tokens=1, total_samples=1)

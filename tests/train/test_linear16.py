"""spadework.train.linear16: the decoder's products in bfloat16, the rest in fp32, inside a
learner's passes only."""

from __future__ import annotations

import pytest

from spadework.train import Learner, TrainConfig
from spadework.train.linear16 import Linear16
from tests.train.conftest import make_tiny_policy
from tests.train.test_learner import lora_state, samples_for


def test_products_round_like_llamacpp_inside_the_context_and_nothing_changes_outside():
    import torch
    import torch.nn.functional as F

    policy = make_tiny_policy()
    model = policy.model.requires_grad_(False)
    layer = model.model.layers[0].mlp.up_proj
    x = torch.randn(3, layer.in_features)
    before = layer(x)
    modes = Linear16(model)
    assert len(modes.layers) == 2 * 7  # q, k, v, o, gate, up, down per layer; not the head
    assert model.lm_head not in modes.layers
    assert torch.equal(layer(x), before)  # patched, but plain fp32 outside a context
    with modes:
        inside = layer(x)
        with modes:  # re-entrant: the inner context shares the copies and keeps them
            assert torch.equal(layer(x), inside)
        assert modes.active
    want = F.linear(x.to(torch.bfloat16), layer.weight.to(torch.bfloat16)).float()
    assert inside.dtype == torch.float32 and torch.equal(inside, want)
    assert not torch.equal(inside, before) and torch.allclose(inside, before, rtol=0.02, atol=0.02)
    assert not modes.active and modes._copies == {}  # the copies live only inside
    assert torch.equal(layer(x), before)


def test_a_trainable_weight_gets_its_gradient_in_fp32_through_the_cast():
    import torch

    policy = make_tiny_policy()
    layer = policy.model.model.layers[1].self_attn.o_proj
    modes = Linear16(policy.model)
    x = torch.randn(2, layer.in_features)
    with modes:
        layer(x).sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.dtype == torch.float32
    assert torch.allclose(layer.weight.grad, x.sum(0).expand_as(layer.weight), rtol=0.02, atol=0.02)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_a_learner_step_in_bfloat16_linear_matches_fp32_closely(checkpointing):
    """LoRA adapters stay fp32 and unpatched; with recomputation the backward pass runs the
    layers again inside the step's context (a dtype change would fail the recomputation)."""
    import torch

    stats, deltas = [], []
    for dtype in ("float32", "bfloat16-linear"):
        policy = make_tiny_policy()
        learner = Learner(policy, TrainConfig(lr=1e-3, micro_batch_size=3, compute_dtype=dtype,
                                              gradient_checkpointing=checkpointing))
        if dtype != "float32":
            assert not any("lora_" in n for n, m in learner.model.named_modules()
                           if "forward" in vars(m))
        before = lora_state(learner)
        stats.append(learner.step(samples_for(policy)))
        after = lora_state(learner)
        deltas.append(torch.cat([(after[k] - before[k]).flatten() for k in sorted(after)]))
    r = stats[1]["importance_ratio"]["all"]
    assert abs(r["mean"] - 1) < 1e-3 and r["max"] < 1.01
    assert float(torch.nn.functional.cosine_similarity(deltas[0], deltas[1], dim=0)) > 0.99
    assert stats[1]["loss"] == pytest.approx(stats[0]["loss"], abs=1e-2)


def test_auto_is_bfloat16_linear_on_a_cpu_with_native_bfloat16():
    import torch

    from spadework.train.forward import resolve_compute

    native = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert resolve_compute("auto", "cpu") == ("bfloat16-linear" if native else "float32")
    assert resolve_compute("bfloat16-linear", "cpu") == "bfloat16-linear"
    assert resolve_compute("auto", "cuda") == "float32"

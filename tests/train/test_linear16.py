"""spadework.train.linear16: the decoder's products in bfloat16, the rest in fp32, inside a
learner's passes only."""

from __future__ import annotations

from spadework.train import Learner, TrainConfig
from spadework.train.linear16 import Linear16
from tests.train.conftest import make_tiny_policy


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


def test_a_lora_learner_patches_the_base_layers_and_leaves_the_adapters_alone():
    learner = Learner(make_tiny_policy(), TrainConfig(compute_dtype="bfloat16-linear"))
    patched = [n for n, m in learner.model.named_modules() if "forward" in vars(m)]
    assert len(patched) == 2 * 7 and all(n.endswith("base_layer") for n in patched)


def test_auto_is_bfloat16_linear_on_a_cpu_with_native_bfloat16():
    import torch

    from spadework.train.forward import resolve_compute

    native = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert resolve_compute("auto", "cpu") == ("bfloat16-linear" if native else "float32")
    assert resolve_compute("bfloat16-linear", "cpu") == "bfloat16-linear"
    assert resolve_compute("auto", "cuda") == "float32"

"""Fixtures: a tiny real Llama (random weights, seeded) behind HFPolicy, and the default model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def make_tiny_policy(seed: int = 0, vocab: int = 64):
    """A 2-layer Llama with random weights (fixed seed) and a minimal tokenizer stand-in.

    The learner reads only ``eos_token_id`` / ``pad_token_id`` from the tokenizer, so a namespace
    is enough; the model is a real transformers module, LoRA targets included.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from spadework.policy.hf import HFPolicy

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    tok = SimpleNamespace(eos_token_id=1, pad_token_id=0, model_max_length=128)
    return HFPolicy(model, tok)


@pytest.fixture
def tiny_policy():
    return make_tiny_policy()


@pytest.fixture(scope="session")
def default_policy():
    """The real default model, loaded once for this folder (pulled into the cache if missing)."""
    import torch

    from spadework.policy.hf import load_hf_policy
    from spadework.policy.registry import DEFAULT_MODEL, pull

    torch.set_num_threads(1)
    return load_hf_policy(pull(DEFAULT_MODEL))

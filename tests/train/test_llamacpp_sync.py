"""Weight sync into llama.cpp: after every learner update the engine scores a fixed probe like
the learner does, and a sync that did not happen is caught by the same check."""

from __future__ import annotations

import pytest

from spadework.errors import ConfigError, PolicyError
from spadework.policy.base import SamplingParams

pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by `make setup`")

# Per-token logprob gap allowed between engine and learner on the probe (mean of absolute gaps,
# nats). The engine's BF16 copy of the base and the learner's fp32 one are the same dequantised
# GGUF, and the LoRA matrices go across in F32, so what is left is BF16 rounding (measured about
# 0.012-0.015 on the base). 0.03 leaves room for that and is far below what one update moves the
# probe (about 0.33, asserted below to exceed 5x the tolerance), so a missing sync cannot pass.
PROBE_TOL = 0.03


def _gap(a, b):
    return sum(abs(x - y) for x, y in zip(a, b)) / len(a)


@pytest.fixture(scope="module")
def pair():
    """A fresh learner on the default model and an engine on the same GGUF (module-local: the
    learner wraps its policy's model with LoRA, so the session fixture is not shared)."""
    import torch

    from spadework.policy.load import learner_policy, load_policy
    from spadework.train import Learner, TrainConfig, weight_sync_for

    torch.set_num_threads(1)
    engine = load_policy("llamacpp", max_batch_size=4, threads=1)
    learner = Learner(learner_policy(engine), TrainConfig(lr=3e-3, seed=0))
    yield engine, learner, weight_sync_for(engine, learner)
    engine.close()


def test_engine_follows_the_learner_over_two_updates_and_a_missed_sync_is_caught(pair):
    from spadework.policy.decode import teacher_forced_logprobs
    from spadework.train import LlamaCppLoraSync, Sample

    engine, learner, sync = pair
    assert isinstance(sync, LlamaCppLoraSync)
    probe = engine.chat(["Name an animal that lives in the sea."],
                        SamplingParams(temperature=1.0, max_tokens=16, seed=0))[0]

    def learner_lp():
        return teacher_forced_logprobs(learner.model, probe.prompt_ids, probe.output_ids)

    def engine_lp():
        return engine.score(probe.prompt_ids, probe.output_ids)

    assert _gap(engine_lp(), learner_lp()) < PROBE_TOL  # the base alone
    done = engine.chat(["Say yes.", "Say no."], SamplingParams(temperature=1.0, max_tokens=12,
                                                                n=2, seed=1))
    drawn = SamplingParams(temperature=1.0).record
    samples = [Sample("agent", c.prompt_ids, c.output_ids, c.logprobs, 1.0 if k % 2 else -1.0,
                      drawn) for k, c in enumerate(done)]
    before = learner_lp()
    for update in range(2):
        stale = engine_lp()
        learner.step(samples)
        now = learner_lp()
        moved = _gap(now, before)
        assert moved > 5 * PROBE_TOL, f"update {update} barely moved the probe ({moved:.4f})"
        assert _gap(stale, now) > 3 * PROBE_TOL  # without this push the check fails
        sync.push(learner)
        assert _gap(engine_lp(), now) < PROBE_TOL, f"after sync {update}"
        assert 0 < sync.last_seconds < 30
        before = now


def test_sync_refuses_a_full_fine_tune_and_foreign_policies(pair, tmp_path):
    from types import SimpleNamespace

    from spadework.train import LlamaCppLoraSync, weight_sync_for

    engine, learner, _ = pair
    full = SimpleNamespace(cfg=SimpleNamespace(lora=False), model=learner.model)
    with pytest.raises(ConfigError, match="LoRA learner"):
        LlamaCppLoraSync(engine, tmp_path).push(full)
    with pytest.raises(ConfigError, match="no weight sync"):
        weight_sync_for(SimpleNamespace(model=None), learner)


def test_adapter_writer_rejects_what_llama_cpp_cannot_apply(tmp_path):
    import numpy as np

    from spadework.policy.gguf_lora import BaseShape, LoraPair, write_adapter

    pair = LoraPair(a=np.zeros((2, 4), np.float32), b=np.zeros((4, 2), np.float32), scaling=1.0)
    with pytest.raises(PolicyError, match="not supported"):
        write_adapter(tmp_path / "a.gguf", {"model.layers.0.mlp.up_proj": pair},
                      BaseShape("gpt2", 1, 2, 2))
    with pytest.raises(PolicyError, match="no GGUF tensor"):
        write_adapter(tmp_path / "a.gguf", {"model.something_else": pair},
                      BaseShape("llama", 1, 2, 2))


def test_base_weights_switch_the_adapter_off_in_both_engines_and_back_on(pair):
    """A frozen role on a shared trained model samples with the adapter off: inside
    ``base_weights()`` the engine and the learner's HF policy score like the untrained base,
    outside like the trained weights (the adapter stays loaded and trained)."""
    from spadework.policy.base import BaseWeights
    from spadework.policy.decode import teacher_forced_logprobs
    from spadework.policy.hf import HFPolicy
    from spadework.train import Sample

    engine, learner, sync = pair
    probe = engine.chat(["Name a colour."], SamplingParams(temperature=1.0, max_tokens=12, seed=3))[0]
    if learner.steps == 0:  # this test alone: one update, so that the adapter is not the base
        done = engine.chat(["Say yes."], SamplingParams(temperature=1.0, max_tokens=12, n=2, seed=1))
        drawn = SamplingParams(temperature=1.0).record
        learner.step([Sample("agent", c.prompt_ids, c.output_ids, c.logprobs, s, drawn)
                      for c, s in zip(done, (1.0, -1.0))])
        sync.push(learner)
    trained = teacher_forced_logprobs(learner.model, probe.prompt_ids, probe.output_ids)
    with learner.model.disable_adapter():
        base = teacher_forced_logprobs(learner.model, probe.prompt_ids, probe.output_ids)
    assert _gap(trained, base) > 3 * PROBE_TOL  # the adapter matters for this probe
    twin = HFPolicy(learner.model, engine.tokenizer)
    with engine.base_weights(), twin.base_weights():
        assert _gap(engine.score(probe.prompt_ids, probe.output_ids), base) < PROBE_TOL
        assert _gap(teacher_forced_logprobs(twin.model, probe.prompt_ids, probe.output_ids), base) < 1e-5
    assert _gap(engine.score(probe.prompt_ids, probe.output_ids), trained) < PROBE_TOL
    assert _gap(teacher_forced_logprobs(learner.model, probe.prompt_ids, probe.output_ids), trained) < 1e-5
    # the view a frozen designer gets: its greedy reply is the base model's, the adapter's after
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    with engine.base_weights():
        want = engine.chat(["Name a colour."], greedy)[0].output_ids
    assert BaseWeights(engine).chat(["Name a colour."], greedy)[0].output_ids == want

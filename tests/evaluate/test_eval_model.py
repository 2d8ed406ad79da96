"""The real default model through `evaluate`, and a run's LoRA checkpoint loaded for evaluation."""

from __future__ import annotations

import json

import pytest

from spadework.evaluate.run import evaluate, load_policy


@pytest.mark.slow
def test_the_default_model_plays_rg_hard_smoke(tmp_path):
    policy, info = load_policy(None)
    summary = evaluate(policy, "rg-hard", tmp_path, preset="smoke", model_info=info)
    assert info["name"] == "smollm2-135m-instruct" and len(info["sha256"]) == 64
    rows = [json.loads(line) for line in (tmp_path / "rg-hard" / "samples.jsonl").open()]
    assert len(rows) == 4 and all(r["status"] == "ok" and r["output_tokens"] > 0 for r in rows)
    assert summary["context_length"] == 8192


@pytest.mark.slow
def test_a_lora_checkpoint_evaluates_as_the_trained_weights(tmp_path):
    import torch

    from spadework.policy.hf import load_hf_policy
    from spadework.train.checkpoint import save_learner
    from spadework.train.grpo import Learner, TrainConfig

    trained = load_hf_policy(None)
    learner = Learner(trained, TrainConfig(lora=True, lora_r=4))
    with torch.no_grad():
        for name, p in trained.model.named_parameters():
            if p.requires_grad and "lora_B" in name:
                p.normal_(0, 0.02)  # a trained adapter is nonzero; a fresh one is the base model
    ckpt = tmp_path / "run" / "checkpoints" / "iter_0003"
    save_learner(learner, ckpt)
    (ckpt.parent / "latest.json").write_text(json.dumps({"iteration": 3, "dir": ckpt.name}))
    policy, info = load_policy(None, checkpoint=tmp_path / "run")
    assert info["checkpoint"] == str(ckpt) and len(info["checkpoint_sha256"]) == 64
    ids = torch.tensor([trained.prompt_ids("What is 2 + 2?")])
    with torch.no_grad():
        want = trained.model(input_ids=ids).logits
        got = policy.model(input_ids=ids).logits
        base = load_hf_policy(None).model(input_ids=ids).logits
    # Merging the adapter into the weights rounds differently from running it beside them: logits
    # near 40 move by about 1e-4. The adapter itself moves them by about 10.
    assert (got - want).abs().max() < 1e-2
    assert (got - base).abs().max() > 1.0


def test_a_lora_checkpoint_goes_into_the_llamacpp_engine_as_an_adapter(tmp_path):
    """``eval --backend llamacpp --checkpoint RUN``: the engine scores like the trained model
    (BF16 rounding apart), not like the base."""
    pytest.importorskip("llama_cpp")
    import torch

    from spadework.policy.decode import teacher_forced_logprobs
    from spadework.policy.hf import load_hf_policy
    from spadework.train.checkpoint import save_learner
    from spadework.train.grpo import Learner, TrainConfig

    torch.set_num_threads(1)
    trained = load_hf_policy(None)
    learner = Learner(trained, TrainConfig(lora=True, lora_r=4))
    # a fixed adapter (seed 0: 0.021 from the trained model, 0.305 from the base): unseeded, a
    # draw moved the logprobs only 0.088 from the base (below 3 x 0.03) and the test failed
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in trained.model.named_parameters():
            if p.requires_grad and "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    ckpt = tmp_path / "run" / "checkpoints" / "iter_0001"
    save_learner(learner, ckpt)
    (ckpt.parent / "latest.json").write_text(json.dumps({"iteration": 1, "dir": ckpt.name}))
    engine, info = load_policy(None, checkpoint=tmp_path / "run", backend="llamacpp")
    try:
        assert info["backend"] == "llamacpp" and info["checkpoint"] == str(ckpt)
        prompt = trained.prompt_ids("Name a fruit.")
        output = trained.tokenizer("An apple is a fruit.", add_special_tokens=False)["input_ids"]
        want = teacher_forced_logprobs(trained.model, prompt, output)
        with trained.model.disable_adapter():
            base = teacher_forced_logprobs(trained.model, prompt, output)
        got = engine.score(prompt, output)

        def gap(a, b):
            return sum(abs(x - y) for x, y in zip(a, b)) / len(a)

        assert gap(got, want) < 0.03 < gap(want, base) / 3
    finally:
        engine.close()

"""The learner on the real default model: its recomputed logprobs match the sampler's."""

from __future__ import annotations

import pytest

from spadework.policy.base import SamplingParams
from spadework.train import Learner, Sample, TrainConfig

PROMPTS = [
    [{"role": "user", "content": "Name a prime number between 10 and 30. Answer in \\boxed{}."}],
    [{"role": "user", "content": "You are in a maze. Reply with one move: up, down, left or right."}],
]


def samples(policy, params, role="agent"):
    outs = policy.chat(PROMPTS, params)
    return [Sample(role, c.prompt_ids, c.output_ids, c.logprobs, 1.0 if i % 2 else -1.0,
                   params.record) for i, c in enumerate(outs) if c.output_ids]


@pytest.mark.slow
def test_first_update_importance_ratio_is_one_and_sampler_follows_the_learner(default_policy):
    # temperature 1, no truncation; mixed prompt and output lengths in one padded micro-batch
    first = samples(default_policy, SamplingParams(temperature=1.0, max_tokens=40, n=3, seed=5))
    stats = Learner(default_policy, TrainConfig(lr=1e-4, micro_batch_size=6)).step(first)
    ratio = stats["importance_ratio"]
    print("T=1 ratios:", ratio)
    assert ratio["designer"] is None  # no designer sample in this batch
    assert abs(ratio["agent"]["mean"] - 1) < 1e-3 and ratio["agent"]["max"] < 1.02, stats
    assert ratio["agent"]["capped_share"] == 0.0
    # after the update, sample again (same module, in place) at the reference's agent settings,
    # and designer samples at another temperature in the same batch: each is scored at its own
    # temperature, of the tempered raw distribution before top-k / top-p, so all still match
    agent = samples(default_policy, SamplingParams(temperature=0.7, top_p=0.95, top_k=20,
                                                   max_tokens=40, n=3, seed=6))
    designer = samples(default_policy, SamplingParams(temperature=0.6, top_p=0.95, top_k=20,
                                                      max_tokens=40, n=2, seed=7), "designer")
    stats = Learner(default_policy, TrainConfig(micro_batch_size=2)).step(designer + agent)
    ratio = stats["importance_ratio"]
    print("T=0.6/0.7 ratios:", ratio)
    for role in ("agent", "designer"):  # both roles have samples with advantage +-1
        assert abs(ratio[role]["mean"] - 1) < 0.01 and ratio[role]["max"] < 1.02, stats

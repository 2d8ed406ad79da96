"""Learning works: GRPO with LoRA teaches the default model to give one rewarded boxed answer.

The environment is single-turn and fixed: two prompts ("guess the secret digit"), reward 1 iff
the reply's ``\\boxed{}`` content is exactly ``7``. The 135M default model almost never writes a
``\\boxed{}`` by itself (about 1 in 64 replies at temperature 1), so the environment's prompt
ends with the opening ``\\boxed{`` (an answer prefix in the assistant turn) and the reply is read
up to its ``}``. Untrained, about 1 reply in 16 is ``7``. Each update samples 8 replies per prompt
at temperature 1 (fixed seeds), z-scores rewards within each prompt's group, and takes one learner
step. Measured here (lr 3e-4, 12 updates, ~25 s each on a busy 2-core box): mean reward per update
0, .06, .19, .12, 0, .38, .31, .69, 1, .94, 1, 1.
"""

from __future__ import annotations

import pytest

from spadework.policy.base import SamplingParams
from spadework.reward import group_zscore
from spadework.train import Learner, Sample, TrainConfig

UPDATES = 12
GROUP = 8


def reward(policy, completion) -> float:
    return 1.0 if policy.decode(completion.output_ids).split("}")[0].strip() == "7" else 0.0


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_grpo_with_lora_raises_the_reward_of_the_default_model():
    import torch

    from spadework.policy.hf import load_hf_policy

    torch.set_num_threads(1)
    policy = load_hf_policy()
    prefix = policy.tokenizer("\\boxed{", add_special_tokens=False)["input_ids"]
    convs = [[{"role": "system", "content": "Answer with one digit."},
              {"role": "user", "content": "Guess the secret digit."}],
             [{"role": "user", "content": "Which digit am I thinking of?"}]]
    prompts = [policy.prompt_ids(c) + prefix for c in convs]
    learner = Learner(policy, TrainConfig(lr=3e-4, micro_batch_size=16, seed=0))
    curve = []
    for update in range(UPDATES):
        params = SamplingParams(temperature=1.0, max_tokens=3, n=GROUP, seed=1000 + update,
                                stop=("}",))
        done = policy.generate_ids(prompts, params)
        rewards = [reward(policy, c) for c in done]
        curve.append(sum(rewards) / len(rewards))
        samples = []
        for g in range(len(prompts)):
            group = slice(g * GROUP, (g + 1) * GROUP)
            for c, adv in zip(done[group], group_zscore(rewards[group]), strict=True):
                if c.output_ids:
                    samples.append(Sample("agent", c.prompt_ids, c.output_ids, c.logprobs, adv,
                                          params.record))
        learner.step(samples)
    print("reward curve:", [round(r, 3) for r in curve])
    first, last = sum(curve[:3]) / 3, sum(curve[-3:]) / 3
    assert last >= 0.6 and last >= first + 0.4, curve

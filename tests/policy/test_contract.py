"""The Policy contract (spadework.policy.base), checked the same way on every backend: the
scripted policy of the tests, the transformers backend on the real default model, the llama.cpp
backend on the same model, and the OpenAI-compatible client against `spadework serve` on
loopback."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from spadework.errors import PolicyError
from spadework.policy.base import SamplingParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the scripted policy
from scripted_policy import ScriptedPolicy  # noqa: E402

PROMPTS = ["Name a colour.", "Count from one to five, then stop."]


def _scripted():
    words = ["red", "green", "blue", "one two three four five", "yellow and more words"]
    return ScriptedPolicy(lambda conv, turn, rng: rng.choice(words) + " " + rng.choice(words),
                          context_length=256, seeded=True)


@pytest.fixture(scope="module")
def llamacpp_policy(default_model_dir):
    from spadework.policy.llamacpp_load import load_llamacpp_policy

    with load_llamacpp_policy(max_batch_size=8, threads=1) as policy:
        yield policy


@pytest.fixture(params=["scripted", "hf", "llamacpp", "openai"])
def policy(request):
    if request.param == "scripted":
        return _scripted()
    if request.param == "hf":
        return request.getfixturevalue("hf_policy")
    if request.param == "llamacpp":
        return request.getfixturevalue("llamacpp_policy")
    from spadework.policy.openai import OpenAIPolicy

    return OpenAIPolicy(request.getfixturevalue("server_url"), "smollm2")


def test_completions_come_conversation_major_with_one_logprob_per_token(policy):
    params = SamplingParams(temperature=1.0, max_tokens=8, n=2, seed=3)
    out = policy.chat(PROMPTS, params)
    assert len(out) == len(PROMPTS) * 2
    assert out[0].prompt_ids == out[1].prompt_ids != out[2].prompt_ids == out[3].prompt_ids
    for c in out:
        assert c.prompt_ids and 0 < len(c.output_ids) <= 8 and c.finish_reason in ("stop", "length")
        assert len(c.logprobs) == len(c.output_ids)
        assert all(math.isfinite(lp) and lp <= 1e-6 for lp in c.logprobs)
        if c.finish_reason == "length":
            assert len(c.output_ids) == 8


def _chat_from_the_same_state(policy, params):
    """``policy.chat(PROMPTS, params)`` from an empty cache where the policy keeps one.

    llama.cpp's 16-bit kernels round differently with the shape of the forward pass a token is
    computed in, so what a call draws depends on which of its sequences hold which cached
    prefixes (a prefix computed in an earlier call's batch, rows that share a pass or not; the
    engine moves decoding rows onto consecutive sequences, which leaves another layout behind).
    A seed reproduces from the same state: a run from its seed repeats exactly, and so does a
    call from a released cache."""
    release = getattr(policy, "release", None)
    if release is not None:
        release()
    return policy.chat(PROMPTS, params)


def test_a_seed_reproduces_and_greedy_is_deterministic(policy):
    seeded = SamplingParams(temperature=1.0, max_tokens=6, seed=11)
    a, b = _chat_from_the_same_state(policy, seeded), _chat_from_the_same_state(policy, seeded)
    assert [(c.text, c.output_ids) for c in a] == [(c.text, c.output_ids) for c in b]
    greedy = SamplingParams(temperature=0, max_tokens=6)
    assert [c.output_ids for c in _chat_from_the_same_state(policy, greedy)] == \
           [c.output_ids for c in _chat_from_the_same_state(policy, greedy)]


def test_stop_strings_end_the_text_before_them(policy):
    params = SamplingParams(temperature=0, max_tokens=24, stop=("e",))
    for c in policy.chat(PROMPTS, params):
        assert "e" not in c.text


def test_a_prompt_beyond_the_context_is_a_policy_error_not_a_hang(policy):
    assert isinstance(policy.context_length, int) and policy.context_length > 0
    too_long = "word " * (policy.context_length + 10)
    with pytest.raises(PolicyError):
        policy.chat([too_long], SamplingParams(max_tokens=4))

"""The transformers backend on the real default model (CPU, one thread, short generations)."""

from __future__ import annotations

import copy

import pytest

from spadework.errors import PolicyError
from spadework.policy.base import Conversation, SamplingParams
from spadework.policy.decode import teacher_forced_logprobs
from spadework.policy.hf import HFPolicy

# Sampled logprobs come from a cached, left-padded batched forward; teacher-forced ones from one
# unpadded full pass. Both are fp32 on CPU; observed gaps are ~1e-5, so 1e-3 leaves room for
# kernel differences without hiding a convention mismatch (temperature or truncation would
# shift them by >1e-2).
LOGPROB_TOL = 1e-3

PROMPTS = ["What is the capital of France?", "Name three colours.", "Say hi."]


def test_context_and_trainable_module(hf_policy):
    assert hf_policy.context_length == 8192
    assert any(p.requires_grad for p in hf_policy.model.parameters())


def test_greedy_answers_and_is_deterministic(hf_policy):
    params = SamplingParams(temperature=0, max_tokens=12)
    a = hf_policy.chat(PROMPTS[:2], params)
    b = hf_policy.chat(PROMPTS[:2], params)
    assert [c.output_ids for c in a] == [c.output_ids for c in b]
    assert "Paris" in a[0].text
    assert a[0].finish_reason == "stop" and a[0].output_ids[-1] in hf_policy.stop_token_ids
    assert "<|im_end|>" not in a[0].text


def test_sampled_logprobs_match_a_teacher_forced_pass(hf_policy):
    params = SamplingParams(temperature=0.8, top_p=0.9, top_k=40, max_tokens=16, n=2, seed=11)
    done = hf_policy.chat(PROMPTS, params)
    assert len(done) == 6
    for c in done:
        assert len(c.logprobs) == len(c.output_ids) > 0
        ref = teacher_forced_logprobs(hf_policy.model, c.prompt_ids, c.output_ids, 0.8)
        assert max(abs(x - y) for x, y in zip(ref, c.logprobs)) < LOGPROB_TOL


def test_seed_reproduces_and_rows_do_not_depend_on_the_batch(hf_policy):
    params = SamplingParams(temperature=1.0, max_tokens=10, n=2, seed=5)
    batch = hf_policy.chat(PROMPTS, params)
    again = hf_policy.chat(PROMPTS, params)
    assert [c.output_ids for c in batch] == [c.output_ids for c in again]
    # conversation-major order: samples 0 and 1 of conversation 0 come first
    assert batch[0].prompt_ids == batch[1].prompt_ids != batch[2].prompt_ids
    alone = hf_policy.chat(PROMPTS[:1], params)
    assert [c.output_ids for c in alone] == [c.output_ids for c in batch[:2]]
    other_seed = hf_policy.chat(PROMPTS[:1], SamplingParams(temperature=1.0, max_tokens=10, n=2, seed=6))
    assert [c.output_ids for c in other_seed] != [c.output_ids for c in alone]


def test_max_tokens_and_stop_strings(hf_policy):
    (c,) = hf_policy.chat(["Count from 1 to 20, separated by commas."],
                          SamplingParams(temperature=0, max_tokens=5))
    assert c.finish_reason == "length" and len(c.output_ids) == 5
    (full,) = hf_policy.chat(["What is the capital of France?"],
                             SamplingParams(temperature=0, max_tokens=12))
    (cut,) = hf_policy.chat(["What is the capital of France?"],
                            SamplingParams(temperature=0, max_tokens=12, stop=("Paris",)))
    assert cut.finish_reason == "stop" and "Paris" not in cut.text
    assert full.text.startswith(cut.text) and len(cut.output_ids) < len(full.output_ids)


def test_stop_at_repeat_ends_a_row_where_the_local_engine_does(hf_policy, monkeypatch):
    import spadework.policy.decode as decode

    monkeypatch.setattr(decode, "ends_in_loop", lambda text, times: True)  # a loop at once
    ask = ["Count from 1 to 20, one number per line."]
    full = hf_policy.chat(ask, SamplingParams(temperature=0, max_tokens=40))[0]
    cut = hf_policy.chat(ask, SamplingParams(temperature=0, max_tokens=40, stop_at_repeat=4))[0]
    assert cut.finish_reason == "repeat" and cut.text.endswith("\n")
    assert full.text.startswith(cut.text) and len(cut.text) < len(full.text)


def test_prompt_longer_than_the_context_is_a_clear_error(hf_policy):
    small = HFPolicy(hf_policy.model, hf_policy.tokenizer, context_length=64)
    with pytest.raises(PolicyError, match="context is 64"):
        small.chat(["word " * 100], SamplingParams(max_tokens=4))
    # a prompt that fits but leaves less room than max_tokens is cut at the context
    prompt_len = len(small.prompt_ids("Tell me a long story about a dragon."))
    (c,) = small.chat(["Tell me a long story about a dragon."],
                      SamplingParams(temperature=0, max_tokens=500))
    assert len(c.output_ids) <= 64 - prompt_len
    if c.finish_reason == "length":
        assert len(c.prompt_ids) + len(c.output_ids) == 64


def test_tools_and_thinking_reach_the_chat_template(hf_policy):
    tok = copy.deepcopy(hf_policy.tokenizer)
    tok.chat_template = (
        "{% if tools %}TOOLS:{% for t in tools %}{{ t['function']['name'] }};{% endfor %}{% endif %}"
        "{% if enable_thinking is defined %}THINK={{ enable_thinking }};{% endif %}"
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"
    )
    policy = HFPolicy(hf_policy.model, tok)
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    conv = Conversation(messages=({"role": "user", "content": "q"},), tools=(tool,), thinking=False)
    text = tok.decode(policy.prompt_ids(conv))
    assert text.startswith("TOOLS:lookup;THINK=False;<user>q")
    plain = tok.decode(policy.prompt_ids("q"))
    assert "TOOLS" not in plain and "THINK" not in plain


def test_training_mode_is_restored_and_weights_are_live(hf_policy):
    import torch

    model = hf_policy.model
    model.train()
    try:
        params = SamplingParams(temperature=0, max_tokens=4)
        before = hf_policy.chat(["Say hi."], params)[0]
        assert model.training
        head = model.get_output_embeddings().weight
        saved = head.data.clone()
        with torch.no_grad():
            head[before.output_ids[0]] -= 1000.0  # the learner updates in place
        after = hf_policy.chat(["Say hi."], params)[0]
        assert after.output_ids[0] != before.output_ids[0]
    finally:
        with torch.no_grad():
            head.copy_(saved)
        model.eval()


def test_rows_that_finish_early_leave_the_batch_without_disturbing_the_rest(hf_policy):
    # greedy, so that a row's tokens do not hang on its index (seeds derive from the index)
    params = SamplingParams(temperature=0, max_tokens=20)
    prompts = ["What is the capital of France?", "Write a long story about a dragon."]
    together = hf_policy.chat(prompts, params)
    assert together[0].finish_reason == "stop" and together[1].finish_reason == "length"
    assert len(together[0].output_ids) < len(together[1].output_ids) == 20
    alone = [hf_policy.chat([p], params)[0] for p in prompts]
    for t, a in zip(together, alone):
        assert t.output_ids == a.output_ids
        assert max(abs(x - y) for x, y in zip(t.logprobs, a.logprobs)) < LOGPROB_TOL


def test_a_template_that_refuses_a_conversation_is_a_policy_error(hf_policy):
    tok = copy.deepcopy(hf_policy.tokenizer)
    tok.chat_template = "{{ raise_exception('system messages are not supported') }}"
    with pytest.raises(PolicyError, match="system messages are not supported"):
        HFPolicy(hf_policy.model, tok).chat(["hi"], SamplingParams(max_tokens=2))


def test_decode_cache_is_read_and_passed_under_both_transformers_names():
    """transformers 5.24 names the cache ``cache``; earlier 5.x releases (which
    ``transformers>=5.0`` admits, and a GPU machine had) ``past_key_values``."""
    from types import SimpleNamespace

    from spadework.policy.hf import cache_kwargs, output_cache

    class Old:
        def forward(self, input_ids=None, past_key_values=None, use_cache=None): ...

    class New:
        def forward(self, input_ids=None, cache=None, use_cache=None): ...

    class Wrapped:  # a PEFT model is looked through to the model it wraps
        def forward(self, *args, **kwargs): ...

        def get_base_model(self):
            return Old()

    marker = object()
    assert output_cache(SimpleNamespace(past_key_values=marker)) is marker
    assert output_cache(SimpleNamespace(cache=marker, past_key_values=None)) is marker
    assert cache_kwargs(Old(), marker) == {"past_key_values": marker}
    assert cache_kwargs(New(), marker) == {"cache": marker}
    assert cache_kwargs(Wrapped(), marker) == {"past_key_values": marker}

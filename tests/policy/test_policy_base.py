"""Records and pure sampling helpers (no model)."""

from __future__ import annotations

import pytest
import torch

from spadework.errors import ConfigError
from spadework.policy.base import Completion, Conversation, SamplingParams, as_conversation
from spadework.policy.decode import derive_seed, filter_logits, sample_tokens, token_logprobs


@pytest.mark.parametrize(
    "kwargs",
    [{"temperature": -0.1}, {"top_p": 0}, {"top_p": 1.5}, {"top_k": -1}, {"max_tokens": 0},
     {"n": 0}, {"stop": ("",)}, {"stop_at_repeat": 1}, {"stop_at_repeat": True},
     {"stop_at_repeat": "8"}],
)
def test_sampling_params_reject_bad_values(kwargs):
    with pytest.raises(ConfigError):
        SamplingParams(**kwargs)


def test_sampling_params_accept_single_stop_string():
    assert SamplingParams(stop="</answer>").stop == ("</answer>",)


def test_conversation_requires_roles_and_accepts_lists():
    with pytest.raises(ConfigError):
        Conversation(messages=({"content": "no role"},))
    conv = as_conversation([{"role": "user", "content": "x"}])
    assert conv.messages == ({"role": "user", "content": "x"},) and conv.tools == ()


def test_completion_requires_one_logprob_per_token():
    with pytest.raises(ValueError):
        Completion(text="a", prompt_ids=(1,), output_ids=(2, 3), logprobs=(-0.1,),
                   finish_reason="stop")
    Completion(text="a", prompt_ids=(1,), output_ids=(2, 3), logprobs=(), finish_reason="stop")


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    k2 = filter_logits(logits, top_k=2, top_p=1.0)
    assert torch.isinf(k2[0, 2:]).all() and torch.isfinite(k2[0, :2]).all()
    # nucleus 0.7: 0.5 alone is short of it, 0.5 + 0.3 reaches it
    p = filter_logits(logits, top_k=0, top_p=0.7)
    assert torch.isfinite(p[0, :2]).all() and torch.isinf(p[0, 2:]).all()
    # the most likely token always survives
    assert torch.isfinite(filter_logits(logits, 0, 0.01)[0, 0])


def test_sampling_follows_the_distribution_and_never_picks_filtered_tokens():
    probs = torch.tensor([0.6, 0.3, 0.1, 0.0])
    logits = torch.log(probs.clamp_min(1e-30)).repeat(4000, 1)
    gens = [torch.Generator().manual_seed(derive_seed(3, i, 0)) for i in range(4000)]
    tokens, lps = sample_tokens(logits, SamplingParams(temperature=1.0, top_k=2), gens)
    counts = torch.bincount(tokens, minlength=4).double() / 4000
    assert counts[2] == 0 and counts[3] == 0
    assert abs(counts[0].item() - 0.6 / 0.9) < 0.03
    # logprobs are of the untruncated distribution at the sampling temperature
    assert torch.allclose(lps[tokens == 0], torch.log(torch.tensor(0.6)), atol=1e-5)


def test_rows_are_independent_of_their_batch():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    params = SamplingParams(temperature=0.9, top_p=0.95)
    gens = lambda idx: [torch.Generator().manual_seed(derive_seed(7, i, 0)) for i in idx]  # noqa: E731
    together, _ = sample_tokens(logits, params, gens([0, 1, 2]))
    alone, _ = sample_tokens(logits[1:2], params, gens([1]))
    assert together[1] == alone[0]


def test_greedy_logprob_is_raw():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    tok, lp = sample_tokens(logits, SamplingParams(temperature=0), [torch.Generator()])
    assert tok.item() == 0
    assert torch.allclose(lp, token_logprobs(logits, tok, 1.0))


def test_a_tool_use_reply_stops_at_its_first_closed_call_or_answer():
    from spadework.policy.base import cut_at_move

    two = ('I look first. <tool_call>{"name": "a", "arguments": {}}</tool_call> then '
           '<tool_call>{"name": "b", "arguments": {}}</tool_call>')
    assert cut_at_move(two, "tool-use") == (two[: two.index("</tool_call>") + 12], True)
    assert cut_at_move("<answer>7</answer> and more", "tool-use") == ("<answer>7</answer>", True)
    thought = '<think><tool_call>{"name": "a"}</tool_call></think> so <answer>1</answer>'
    assert cut_at_move(thought, "tool-use") == (thought, False)  # a call drafted while thinking
    assert cut_at_move('{"name": "a", "arguments": {}}', "tool-use")[1] is False


class _Chars:
    """A tokenizer of one character per token (what DecodeRow asks of a policy)."""

    stop_token_ids = frozenset({0})

    @staticmethod
    def decode(ids):
        return "".join(chr(i) for i in ids)


def _decode(text, repeat, budget=10_000):
    from spadework.policy.decode import DecodeRow

    row = DecodeRow(budget, repeat)
    for ch in text:
        row.push(ord(ch), -0.1, _Chars, ())
        if row.finished:
            break
    return _Chars.decode(row.ids), row.reason if row.finished else None


def test_a_reply_that_loops_stops_when_it_ends_a_block_of_lines_the_nth_time_in_a_row():
    line = "        self.x = rng.choice([1, 2, 3])\n"
    head = "```python\nclass A:\n"
    text, reason = _decode(head + line * 30, repeat=8)
    assert reason == "repeat" and text == head + line * 8  # stopped at the 8th newline
    assert _decode(head + line * 7 + "```", repeat=8) == (head + line * 7 + "```", None)
    block = "        self.y = 2\n" + line + "        self.z = 3\n"  # a loop of three lines
    text, reason = _decode(head + block * 10, repeat=4)
    assert reason == "repeat" and text == head + block * 4
    apart = "".join(line + f"        self.n += {k}\n" for k in range(9))  # 9 times, never in a row
    assert _decode(apart, repeat=2) == (apart, None)
    short = "    else:\n" * 30  # short lines recur in any module: never a loop
    assert _decode(short, repeat=8) == (short, None)
    items = "".join(f'            "{c}",\n' for c in ("tan", "light tan", "gray", "light gray"))
    text, reason = _decode(head + "    x = [\n" + items * 20, repeat=4)  # a block of short lines
    assert reason == "repeat" and text == head + "    x = [\n" + items * 4
    names = "    names = [" + ", ".join(f'"item{i}"' for i in range(200))  # one line, no end
    text, reason = _decode(head + names, repeat=4)
    assert reason == "repeat" and text == head + names[:400]  # asked every 16 tokens from 100 on
    task = "    return " + repr(" ".join(sorted({*dir(str), *dir(list), *dir(dict)})))  # no loop
    assert len(task) > 400 and _decode(head + task, repeat=4) == (head + task, None)
    assert _decode(head + line * 30, repeat=None)[1] is None  # off: runs to its budget
    assert _decode(head + line * 30, repeat=None, budget=50) == ((head + line * 30)[:50], "length")

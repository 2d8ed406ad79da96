"""The OpenAI-compatible client against real servers on loopback.

The model server is `spadework serve` (our stdlib server over the hf backend), started as a
subprocess on the real default model. The failure cases use real sockets too: a closed port, a
server that replies garbage, one that never replies.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from spadework.errors import PolicyError
from spadework.policy.base import Conversation, SamplingParams
from spadework.policy.openai import OpenAIPolicy

GREEDY = SamplingParams(temperature=0, max_tokens=10)


def test_chat_mode_returns_server_token_ids_equal_to_local_sampling(server_url, hf_policy):
    client = OpenAIPolicy(server_url, "smollm2")
    assert client.context_length == 8192
    convs = ["What is the capital of France?", "Name three colours."]
    remote = client.chat(convs, GREEDY)
    local = hf_policy.chat(convs, GREEDY)
    for r, l in zip(remote, local):
        assert r.ids_from == "server"
        assert (r.text, r.prompt_ids, r.output_ids) == (l.text, l.prompt_ids, l.output_ids)
        assert max(abs(a - b) for a, b in zip(r.logprobs, l.logprobs)) < 1e-3
        assert r.finish_reason == l.finish_reason


def test_completions_mode_is_token_in_token_out(server_url, hf_policy):
    client = OpenAIPolicy(server_url, "smollm2", mode="completions", tokenizer=hf_policy.tokenizer,
                          concurrency=3)
    convs = [Conversation(messages=({"role": "user", "content": p},))
             for p in ("Say hi.", "What is 2+2?", "Name a fruit.")]
    params = SamplingParams(temperature=0.7, max_tokens=8, n=2, seed=3)
    done = client.chat(convs, params)
    assert len(done) == 6
    assert done[0].prompt_ids == tuple(hf_policy.prompt_ids(convs[0]))
    assert all(len(c.logprobs) == len(c.output_ids) > 0 for c in done)
    again = client.chat(convs, params)
    assert [c.output_ids for c in again] == [c.output_ids for c in done]


def test_without_server_ids_the_client_retokenizes_and_says_so(server_url, hf_policy):
    client = OpenAIPolicy(server_url, "smollm2", tokenizer=hf_policy.tokenizer,
                          extra_body={"return_token_ids": False, "return_tokens_as_token_ids": False})
    (c,) = client.chat(["What is the capital of France?"], GREEDY)
    assert c.ids_from == "retokenized" and "Paris" in c.text
    assert c.prompt_ids == tuple(hf_policy.prompt_ids("What is the capital of France?"))


@pytest.mark.timeout(60)
def test_a_request_the_server_rejects_is_not_retried(server_url):
    # a retry would first sleep 300 s of backoff and trip the timeout
    client = OpenAIPolicy(server_url, "smollm2", retries=3, backoff_s=300.0)
    with pytest.raises(PolicyError, match="HTTP 400.*context is 8192"):
        client.chat(["x " * 9000], GREEDY)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_down_server_is_a_policy_error_not_a_hang():
    client = OpenAIPolicy(f"http://127.0.0.1:{_free_port()}", "m", retries=2, backoff_s=0.01,
                          timeout_s=2)
    with pytest.raises(PolicyError, match="cannot reach.*after 3 attempts"):
        client.chat(["hi"], GREEDY)


class _Garbage(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "9")
        self.end_headers()
        self.wfile.write(b"not json!")

    def log_message(self, *args):
        pass


@pytest.fixture
def garbage_url():
    server = HTTPServer(("127.0.0.1", 0), _Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_garbage_reply_is_a_policy_error(garbage_url):
    with pytest.raises(PolicyError, match="not JSON"):
        OpenAIPolicy(garbage_url, "m").chat(["hi"], GREEDY)


@pytest.mark.timeout(60)
def test_a_silent_server_times_out_as_a_policy_error():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections (backlog), never answers
    try:
        client = OpenAIPolicy(f"http://127.0.0.1:{listener.getsockname()[1]}", "m",
                              timeout_s=0.5, retries=1, backoff_s=0.01)
        with pytest.raises(PolicyError, match="timed out.*gave up after 2 attempts"):
            client.chat(["hi"], GREEDY)
    finally:
        listener.close()


def test_the_official_client_streams_chat_and_completions(server_url, hf_policy):
    """``stream: true`` comes back as server-sent events the openai client reads; the streamed
    text is the non-streamed text (same seed)."""
    openai = pytest.importorskip("openai", reason="the openai client is a dev dependency")
    client = openai.OpenAI(base_url=server_url, api_key="none", max_retries=0, timeout=120)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    whole = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=10,
                                           temperature=0)
    chunks = list(client.chat.completions.create(
        model="smollm2", messages=messages, max_tokens=10, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content and "Paris" in text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    streamed = list(client.completions.create(model="smollm2", prompt="The capital of France is",
                                              max_tokens=5, temperature=0, stream=True))
    plain = client.completions.create(model="smollm2", prompt="The capital of France is",
                                      max_tokens=5, temperature=0)
    assert "".join(c.choices[0].text for c in streamed) == plain.choices[0].text

"""`spadework serve`'s fairness rules, against the real default model in this process.

Continuous batching: a short request sent while a long one decodes is answered while the long one
still runs; a seeded request samples alike alone and beside others. The rules: max_tokens cut and
reported, a deadline that ends a reply where it is, 503 when the queue is full, 404 for an unknown
model, and clients that go away dropped without a traceback (their rows leave the batch).
"""

from __future__ import annotations

import json
import socket
import threading
import time

import openai
import pytest

from spadework.errors import ConfigError
from spadework.policy.base import SamplingParams
from spadework.policy.serve import PolicyServer

COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"  # greedy continues it for hundreds of tokens


@pytest.fixture()
def server(hf_policy):
    servers: list[PolicyServer] = []

    def start(**rules):
        s = PolicyServer(hf_policy, "smollm2", max_batch=4, **rules)
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def client(s: PolicyServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=s.url, api_key="none", max_retries=0, timeout=300)


def until(cond, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.02)


def test_a_short_request_is_answered_while_a_long_one_decodes(server):
    s = server()
    long_reply: dict = {}

    def long_request():
        long_reply["r"] = client(s).completions.create(
            model="smollm2", prompt=COUNTING, max_tokens=400, temperature=0)

    t = threading.Thread(target=long_request)
    t.start()
    until(lambda: s._continuous.load[1] == 1)  # the long one is decoding
    short = client(s).chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, temperature=0)
    assert short.usage.completion_tokens <= 4
    assert t.is_alive() and s._continuous.load[1] == 1  # answered before the long one ended
    t.join()
    assert long_reply["r"].usage.completion_tokens > 4


def test_a_seeded_request_samples_alike_alone_and_beside_another(server, hf_policy):
    s = server()
    prompt = hf_policy.prompt_ids([{"role": "user", "content": "Name a colour."}])
    alone = hf_policy.generate_ids(
        [prompt], SamplingParams(temperature=1.0, top_p=0.9, max_tokens=12, row_seeds=(9,)))[0]
    other = s._continuous.submit(
        hf_policy.tokenizer(COUNTING)["input_ids"],
        SamplingParams(temperature=0.0, max_tokens=200, row_seeds=(1,)))
    until(lambda: s._continuous.load[1] == 1)
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "Name a colour."}],
            "max_tokens": 12, "temperature": 1.0, "top_p": 0.9, "seed": 9,
            "return_token_ids": True}
    reply = s.chat_completion(body)
    assert reply["choices"][0]["token_ids"] == list(alone.output_ids)
    s._continuous.cancel(other)


def test_max_tokens_is_cut_to_the_limit_and_the_cut_reported(server):
    s = server(max_tokens_limit=6)
    r = client(s).completions.create(model="smollm2", prompt=COUNTING, max_tokens=10**9,
                                     temperature=0)
    assert r.usage.completion_tokens == 6 and r.choices[0].finish_reason == "length"
    assert r.usage.model_extra["max_tokens_capped_to"] == 6


def test_a_reply_past_its_deadline_ends_where_it_is(server):
    s = server(request_timeout_s=0.3)
    r = client(s).completions.create(model="smollm2", prompt=COUNTING, max_tokens=2000,
                                     temperature=0)
    assert r.choices[0].finish_reason == "length" and 0 < r.usage.completion_tokens < 2000
    assert r.usage.model_extra["deadline_exceeded"] is True


def test_a_full_queue_answers_503_and_frees_up(server):
    s = server(max_queue=1)
    t = threading.Thread(target=lambda: client(s).completions.create(
        model="smollm2", prompt=COUNTING, max_tokens=60, temperature=0))
    t.start()
    until(lambda: s._inflight == 1)
    with pytest.raises(openai.APIStatusError) as e:
        client(s).completions.create(model="smollm2", prompt="x", max_tokens=2)
    assert e.value.status_code == 503 and "--max-queue 1" in e.value.message
    assert e.value.response.headers["Retry-After"] == "1"
    t.join()
    assert client(s).completions.create(model="smollm2", prompt="x", max_tokens=2).usage


def test_an_unknown_model_is_404_and_models_lists_the_served_names(server):
    s = server(served_names=("alias",))
    assert [m.id for m in client(s).models.list()] == ["smollm2", "alias"]
    assert client(s).completions.create(model="alias", prompt="x", max_tokens=1).usage
    with pytest.raises(openai.NotFoundError) as e:
        client(s).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert "'gpt-4o' does not exist" in e.value.message and "'alias'" in e.value.message


def _raw(s: PolicyServer, head: bytes, body: bytes) -> socket.socket:
    host, port = s.server_address[:2]
    sock = socket.create_connection((host, port))
    sock.sendall(head + body)
    return sock


def test_clients_that_go_away_are_dropped_without_a_traceback(server, capfd):
    s = server()
    # A body shorter than its Content-Length, then the connection closes.
    _raw(s, b"POST /v1/completions HTTP/1.1\r\nContent-Length: 500\r\n\r\n", b'{"prompt":').close()
    # A full request whose client leaves while its reply is generated: its row leaves the batch.
    body = json.dumps({"model": "smollm2", "prompt": COUNTING, "max_tokens": 2000,
                       "temperature": 0}).encode()
    sock = _raw(s, b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body), body)
    until(lambda: s._continuous.load[1] == 1)
    sock.close()
    until(lambda: s._continuous.load == (0, 0) and s._inflight == 0, timeout=10)
    assert client(s).completions.create(model="smollm2", prompt="x", max_tokens=1).usage
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "Error" not in err


def test_between_requests_waits_for_the_rows_decoding(server, hf_policy):
    s = server()
    req = s._continuous.submit(hf_policy.tokenizer(COUNTING)["input_ids"],
                               SamplingParams(temperature=0.0, max_tokens=30, row_seeds=(1,)))
    until(lambda: s._continuous.load[1] == 1)
    with s.between_requests():
        assert req.done.is_set() and len(req.result[0].output_ids) == 30


def test_bad_rules_are_refused_with_what_to_fix(hf_policy):
    with pytest.raises(ConfigError, match="max_queue must be >= 1"):
        PolicyServer(hf_policy, "m", max_queue=0)
    with pytest.raises(ConfigError, match="request_timeout_s must be > 0"):
        PolicyServer(hf_policy, "m", request_timeout_s=0)

"""``OpenAIPolicy`` against a real third-party server: llama.cpp's OpenAI-compatible server
(``python -m llama_cpp.server`` from ``llama-cpp-python[server]``) on loopback, serving the
default model's GGUF.

That server reports logprobs as text pieces, not token ids, and does not return prompt ids, so
the client rebuilds ids from text with the local tokenizer and says so (``ids_from ==
"retokenized"``); the test checks those ids are the ones the text encodes and that the logprobs
line up with them one to one.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from spadework.policy.base import Conversation, SamplingParams
from spadework.policy.openai import OpenAIPolicy

pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is a dev dependency")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(default_model_dir):
    gguf = next(default_model_dir.parent.glob("*.gguf"))
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--verbose", "False",
         "--model_alias", "smollm2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"llama_cpp.server exited: {proc.stderr.read()[-800:]!r}")
                if time.monotonic() > deadline:
                    pytest.fail("llama_cpp.server did not answer within 120 s")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_chat_mode_gets_text_logprobs_and_ids(llama_server, hf_policy):
    client = OpenAIPolicy(llama_server, "smollm2", tokenizer=hf_policy.tokenizer,
                          context_length=2048, timeout_s=60, retries=0)
    conv = Conversation(messages=({"role": "user", "content": "What is the capital of France?"},))
    (c,) = client.chat([conv], SamplingParams(temperature=0, max_tokens=12, seed=3))
    assert "Paris" in c.text
    assert c.ids_from == "retokenized"
    assert list(c.output_ids) == hf_policy.tokenizer(c.text, add_special_tokens=False)["input_ids"]
    assert c.prompt_ids == tuple(hf_policy.prompt_ids(conv))
    assert len(c.logprobs) == len(c.output_ids) > 0
    assert all(lp <= 0 and math.isfinite(lp) for lp in c.logprobs)


def test_completions_mode_sends_token_ids_and_reads_logprobs(llama_server, hf_policy):
    client = OpenAIPolicy(llama_server, "smollm2", mode="completions",
                          tokenizer=hf_policy.tokenizer, context_length=2048, retries=0)
    done = client.chat(["Name three colours.", "Say hi."],
                       SamplingParams(temperature=0.7, max_tokens=8, seed=1))
    assert len(done) == 2
    for c in done:
        assert c.prompt_ids == tuple(hf_policy.prompt_ids(Conversation(
            messages=({"role": "user", "content": "Name three colours." if c is done[0]
                       else "Say hi."},))))
        assert c.text and len(c.output_ids) >= 1
        assert not c.logprobs or len(c.logprobs) == len(c.output_ids)

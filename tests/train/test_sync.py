"""Weight sync: in process (same module) and vLLM's runtime LoRA loading over HTTP."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from spadework.errors import PolicyError
from spadework.train import InProcessSync, Learner, TrainConfig, VLLMLoraSync
from tests.train.conftest import make_tiny_policy


class _Recorder(BaseHTTPRequestHandler):
    """Answers like vLLM's LoRA endpoints (plain-text success), or 404 when ``fail`` is set."""

    def do_POST(self):  # noqa: N802 (http.server naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls.append((self.path, body))
        if self.server.fail:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"detail":"Not Found"}')
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(f"Success: LoRA adapter '{body['lora_name']}' done.".encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    srv.calls, srv.fail = [], False
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_in_process_sync_checks_the_policy_trains_in_place():
    policy = make_tiny_policy()
    learner = Learner(policy, TrainConfig())
    InProcessSync(policy).push(learner)  # the learner wrapped this policy's module: nothing to move
    with pytest.raises(PolicyError, match="different module"):
        InProcessSync(make_tiny_policy()).push(learner)


def test_vllm_lora_sync_loads_each_adapter_and_unloads_the_previous(server, tmp_path):
    learner = Learner(make_tiny_policy(), TrainConfig())
    client = SimpleNamespace(model="base")
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    sync = VLLMLoraSync(url, tmp_path, policy=client)
    sync.push(learner)
    learner.steps = 3
    sync.push(learner)
    paths = [p for p, _ in server.calls]
    assert paths == ["/v1/load_lora_adapter", "/v1/load_lora_adapter", "/v1/unload_lora_adapter"]
    first, second, unload = (b for _, b in server.calls)
    assert first["lora_name"] == "spadework-0" and second["lora_name"] == "spadework-3"
    assert unload == {"lora_name": "spadework-0"}
    assert client.model == "spadework-3"
    folder = Path(second["lora_path"])
    assert folder.is_absolute() and (folder / "adapter_config.json").is_file()
    assert any(f.name.startswith("adapter_model") for f in folder.iterdir())


def test_vllm_lora_sync_says_how_to_enable_runtime_loading(server, tmp_path):
    server.fail = True
    learner = Learner(make_tiny_policy(), TrainConfig())
    sync = VLLMLoraSync(f"http://127.0.0.1:{server.server_address[1]}", tmp_path)
    with pytest.raises(PolicyError, match="VLLM_ALLOW_RUNTIME_LORA_UPDATING"):
        sync.push(learner)


def _vllm_ready() -> bool:
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available() and bool(os.environ.get("SPADEWORK_VLLM_URL"))


@pytest.mark.skipif(not _vllm_ready(), reason="needs a GPU, vllm and SPADEWORK_VLLM_URL (a server "
                    "started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)")
def test_real_vllm_server_samples_with_the_pushed_adapter(tmp_path):
    from spadework.policy.base import SamplingParams
    from spadework.policy.hf import load_hf_policy
    from spadework.policy.openai import OpenAIPolicy

    url = os.environ["SPADEWORK_VLLM_URL"]
    local = load_hf_policy(device="cuda")
    learner = Learner(local, TrainConfig(lora_r=8))
    remote = OpenAIPolicy(url, model=os.environ.get("SPADEWORK_VLLM_MODEL", "default"))
    VLLMLoraSync(url, tmp_path, policy=remote).push(learner)
    out = remote.chat([[{"role": "user", "content": "Say hi."}]], SamplingParams(max_tokens=8))
    assert remote.model == "spadework-0" and out[0].output_ids


def test_weight_sync_for_the_learners_own_policy_is_in_process():
    from spadework.errors import ConfigError
    from spadework.policy.load import learner_policy
    from spadework.train import weight_sync_for

    policy = make_tiny_policy()
    assert learner_policy(policy) is policy
    learner = Learner(policy, TrainConfig())
    assert isinstance(weight_sync_for(policy, learner), InProcessSync)
    with pytest.raises(ConfigError, match="no weight sync for a HFPolicy"):
        weight_sync_for(make_tiny_policy(), learner)

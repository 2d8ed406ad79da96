"""Roles on separate models and frozen roles: which policy each stage samples from, which
learner gets which samples, where each model's checkpoint goes, and that resume restores them all.
Scripted policies over the real sandbox and archive; the real adapter switch of both backends is
tested in ``tests/train/test_llamacpp_sync.py``."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace

import pytest
from scripted_policy import RecordingLearner, RecordingSync, ScriptedPolicy, half_solving_script

from spadework.config import override, preset
from spadework.errors import ConfigError
from spadework.loop import Models, run


def is_design(conv) -> bool:
    return conv.messages[0]["role"] == "system" and "design" in conv.messages[0]["content"]


def is_designer_call(conv) -> bool:
    """A design request or a hint request (the designer role writes hints; a game turn has no
    system message)."""
    return conv.messages[0]["role"] == "system"


class SwitchablePolicy(ScriptedPolicy):
    """A scripted policy with an adapter switch: records, per chat call, whether the call was
    a design request and whether the adapter was off."""

    def __init__(self, script):
        super().__init__(script)
        self.off, self.seen = False, []

    @contextlib.contextmanager
    def base_weights(self):
        self.off = True
        try:
            yield self
        finally:
            self.off = False

    def chat(self, conversations, params):
        from spadework.policy.base import as_conversation

        self.seen += [(is_designer_call(as_conversation(c)), self.off) for c in conversations]
        return super().chat(conversations, params)


@pytest.fixture
def cfg():
    return override(preset("smoke"), {"iterations": 1, "train": True, "plays": 4, "checkpoint_every": 1,
                                      "curriculum": {"designs_per_regen": 2},
                                      "design": {"max_tokens": 1024}})


@pytest.mark.slow
def test_a_frozen_designer_on_a_shared_model_designs_with_the_adapter_off_and_is_not_trained(tmp_path, cfg):
    policy, learner = SwitchablePolicy(half_solving_script), RecordingLearner()
    out = run(override(cfg, {"frozen": ["designer"]}), tmp_path,
              Models(policy, learner, RecordingSync(learner)))
    designs = [off for design, off in policy.seen if design]
    plays = [off for design, off in policy.seen if not design]
    assert designs and all(designs)  # every design and hint request sampled the base weights
    assert plays and not any(plays)  # the agent plays with the trained adapter
    (samples,) = learner.steps
    assert {s.role for s in samples} == {"agent"}
    train = out[0].values["train"]
    assert train["designer_samples"] == 0 and train["frozen"] == ["designer"]
    from spadework.archive import Archive, archive_path

    with Archive.open(archive_path(tmp_path)) as a:  # credited and consumed, not left waiting
        assert a.ready_attempts() == [] and all(x.trained_iteration == 0 for x in a.attempts())
        assert a.load_state("config")["frozen"] == ["designer"]


def test_a_designer_of_its_own_trains_apart_checkpoints_apart_and_both_resume(tmp_path, cfg):
    cfg = override(cfg, {"designer_model": "another-model"})
    assert not cfg.shared

    def parts():
        agent, designer = ScriptedPolicy(half_solving_script), ScriptedPolicy(half_solving_script)
        la, ld = RecordingLearner(), RecordingLearner()
        return {"policy": agent, "learner": la, "sync": RecordingSync(la), "designer": designer,
                "designer_learner": ld, "designer_sync": RecordingSync(ld)}

    first = parts()
    out = run(cfg, tmp_path, Models(**first))
    assert any(is_design(c) for batch in first["designer"].calls for c in batch)
    assert not any(is_design(c) for batch in first["policy"].calls for c in batch)
    (agent_step,), (designer_step,) = first["learner"].steps, first["designer_learner"].steps
    assert {s.role for s in agent_step} == {"agent"} and {s.role for s in designer_step} == {"designer"}
    assert first["designer_sync"].pushed_after == [1] and first["sync"].pushed_after == [1]
    train = out[0].values["train"]
    assert set(train["learners"]) == {"agent", "designer"} and train["designer_samples"] == 2
    ckpt = tmp_path / "checkpoints"
    assert json.loads((ckpt / "latest.json").read_text())["dir"] == "iter_0000"
    assert json.loads((ckpt / "designer" / "latest.json").read_text())["dir"] == "iter_0000"

    again = parts()
    assert [m.iteration for m in run(override(cfg, {"iterations": 2}), tmp_path, Models(**again), resume=True)] == [1]
    assert again["learner"].loaded == ckpt / "iter_0000"
    assert again["designer_learner"].loaded == ckpt / "designer" / "iter_0000"


def test_a_frozen_designer_of_its_own_needs_no_learner_and_a_trained_one_does(tmp_path, cfg):
    cfg = override(cfg, {"designer_model": "another-model"})
    agent, learner = ScriptedPolicy(half_solving_script), RecordingLearner()
    with pytest.raises(ConfigError, match="designer_learner"):
        run(cfg, tmp_path / "a", Models(agent, learner, designer=ScriptedPolicy(half_solving_script)))
    run(override(cfg, {"frozen": ["designer"]}), tmp_path / "b",
        Models(agent, learner, designer=ScriptedPolicy(half_solving_script)))
    assert {s.role for s in learner.steps[0]} == {"agent"}
    assert not (tmp_path / "b" / "checkpoints" / "designer").exists()


def test_only_a_frozen_role_of_its_own_samples_from_the_quantised_file(monkeypatch):
    """A frozen designer with its own model never trains, so it may sample from the GGUF as
    pulled; the trained agent, and a frozen role on the shared model, keep the 16-bit copy."""
    import spadework.policy.load as load
    from spadework.commands import load_roles

    asked = []
    monkeypatch.setattr(load, "load_policy", lambda backend, model, **kw: asked.append((model, kw["weights"])) or model)
    base = override(preset("cpu"), {"train": False})
    load_roles(override(base, {"designer_model": "qwen2.5-coder-1.5b-instruct", "frozen": ["designer"]}))
    load_roles(override(base, {"frozen": ["designer"]}))
    load_roles(override(base, {"designer_model": "qwen2.5-coder-1.5b-instruct", "frozen": ["designer"],
                               "frozen_weights": "bf16"}))
    assert asked == [(None, "bf16"), ("qwen2.5-coder-1.5b-instruct", "gguf"), (None, "bf16"),
                     (None, "bf16"), ("qwen2.5-coder-1.5b-instruct", "bf16")]
    with pytest.raises(ConfigError, match="frozen_weights must be one of"):
        override(base, {"frozen_weights": "q2"})


def test_each_role_s_engine_uses_flash_attention_as_the_run_says(monkeypatch):
    """``flash_attn`` lists the roles whose engine computes attention as flash attention (the
    mechanism preset's agent runs without it, its designer with it); a shared model's one
    engine follows the agent's entry; anything but a list of roles is refused."""
    import spadework.policy.load as load
    from spadework.commands import load_roles

    asked = []
    monkeypatch.setattr(load, "load_policy",
                        lambda backend, model, **kw: asked.append((model, kw["flash_attn"]))
                        or model)
    base = override(preset("cpu"), {"train": False})
    assert base.flash_attn == ("agent", "designer")
    split = {"designer_model": "qwen2.5-coder-1.5b-instruct", "frozen": ["designer"]}
    load_roles(base)
    load_roles(override(base, {**split, "flash_attn": ["designer"]}))
    load_roles(override(base, {"flash_attn": ["designer"]}))
    assert asked == [(None, True), (None, False), ("qwen2.5-coder-1.5b-instruct", True),
                     (None, False)]
    assert preset("cpu-qwen").flash_attn == ("designer",)
    with pytest.raises(ConfigError, match="flash_attn lists roles"):
        override(base, {"flash_attn": ["critic"]})
    with pytest.raises(ConfigError, match="flash_attn must be a list"):
        override(base, {"flash_attn": "designer"})


def test_role_settings_are_checked_with_what_to_do():
    base = preset("cpu")
    assert base.shared and base.trained_roles == ("agent", "designer")
    split = override(base, {"designer_model": "qwen2.5-coder-1.5b-instruct", "frozen": ["designer"]})
    assert not split.shared and split.trained_roles == ("agent",) and split.role_model("agent") is None
    assert override(base, {"agent_model": base.model}).shared  # naming the shared model keeps it shared
    assert override(base, {"train": False, "frozen": ["designer", "agent"]}).trained_roles == ()
    for values, words in [
        ({"frozen": ["designer", "agent"]}, "nothing trains"),
        ({"frozen": ["critic"]}, "lists roles"),
        ({"frozen": ["agent", "agent"]}, "each once"),
        ({"designer_model": "http://localhost:8000/v1"}, "#MODEL"),
        ({"designer_model": "http://localhost:8000/v1#m"}, "--freeze designer"),
        ({"agent_model": "http://localhost:8000/v1#m"}, "only the designer"),
        # a designer-reward ablation with the designer frozen would be the blend run again
        ({"frozen": ["designer"], "reward": {"variant": "solve_rate"}}, "take \"designer\" out of frozen"),
        # full fine-tuning changes the weights a frozen role on the shared model samples from
        ({"frozen": ["designer"], "learner": {"lora": False}}, "lora = true, or give the frozen role its own"),
        # the Ray engines serve the trained weights to both roles
        ({"frozen": ["designer"], "ray": {"enabled": True}}, "not supported with --ray"),
    ]:
        with pytest.raises(ConfigError, match=words):
            override(base, values)
    assert override(base, {"train": False, "frozen": ["designer"],
                           "reward": {"variant": "solve_rate"}}).reward.variant == "solve_rate"
    endpoint = override(base, {"designer_model": "http://localhost:8000/v1#m", "frozen": ["designer"]})
    assert not endpoint.shared
    # a frozen role of its own model, or no training at all, leaves nothing to drift
    assert override(base, {"designer_model": "qwen2.5-coder-1.5b-instruct", "frozen": ["designer"],
                           "learner": {"lora": False}}).learner.lora is False
    assert override(base, {"train": False, "frozen": ["designer"], "learner": {"lora": False}})


def test_the_designer_endpoint_is_an_openai_policy_for_the_named_model():
    from spadework.policy.load import load_endpoint
    from spadework.policy.openai import OpenAIPolicy

    p = load_endpoint("http://localhost:8000/v1#Qwen/Qwen3-4B")
    assert isinstance(p, OpenAIPolicy) and p.model == "Qwen/Qwen3-4B"
    assert p.base_url == "http://localhost:8000/v1"


def test_the_shipped_ablation_configs_load_and_change_one_thing_each():
    from pathlib import Path

    from spadework.config import load_config

    base = preset("cpu-qwen")
    root = Path(__file__).resolve().parents[1] / "configs"
    solve = load_config(root / "cpu-qwen-solve-rate.toml")
    fixed = load_config(root / "cpu-qwen-fixed-pool.toml")
    quiet = load_config(root / "cpu-qwen-no-feedback.toml")
    assert (quiet.design.feedback, quiet.design.mutation_ratio) == (False, 0.0)
    assert quiet.curriculum == base.curriculum and quiet.play == base.play
    assert fixed.curriculum.adapt_levels and base.design.feedback  # the controller in all three
    assert solve.reward.variant == "solve_rate" and solve.curriculum == base.curriculum
    assert solve.trained_roles == ("agent", "designer") and not solve.shared
    assert fixed.curriculum.designs_per_regen == 0 and fixed.reward == base.reward
    tools, tools_fixed = preset("cpu-qwen-tools"), load_config(root / "cpu-qwen-tools-fixed-pool.toml")
    assert tools_fixed.curriculum == replace(tools.curriculum, designs_per_regen=0)
    assert (tools_fixed.play, tools_fixed.design, tools_fixed.iterations) == (
        tools.play, tools.design, tools.iterations)
    assert base.frozen == ("designer",) and not base.shared and base.trained_roles == ("agent",)

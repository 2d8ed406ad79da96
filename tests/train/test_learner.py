"""The learner on a tiny real Llama: maths invariances, LoRA in place, sync, checkpoints."""

from __future__ import annotations

import random

import numpy as np
import pytest

from spadework.errors import ArchiveError, ConfigError
from spadework.policy.decode import teacher_forced_logprobs
from spadework.train import Learner, Sample, TrainConfig
from spadework.types import Sampling
from tests.train.conftest import make_tiny_policy


def samples_for(policy, n=6, seed=1):
    """Mixed-length samples whose logprobs are the model's own (on-policy), advantages +-1."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        prompt = tuple(rng.randrange(2, 64) for _ in range(rng.randrange(3, 12)))
        output = tuple(rng.randrange(2, 64) for _ in range(rng.randrange(2, 9)))
        lps = tuple(teacher_forced_logprobs(policy.model, prompt, output, 1.0))
        out.append(Sample("agent" if i % 3 else "designer", prompt, output, lps,
                          1.0 if i % 2 else -1.0, Sampling(1.0), key=str(i)))
    return out


def lora_state(learner):
    return {n: t.clone() for n, t in learner.trainable_state().items()}


def max_diff(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_on_policy_first_step_has_unit_ratios_despite_padding(tiny_policy):
    learner = Learner(tiny_policy, TrainConfig(micro_batch_size=4))
    stats = learner.step(samples_for(tiny_policy))
    r = stats["importance_ratio"]["all"]
    assert abs(r["mean"] - 1) < 1e-5 and r["max"] < 1 + 1e-4
    assert stats["clip_frac"] == 0.0 and stats["ratio_mean"] == 1.0
    assert stats["samples"] == 6 and stats["samples_designer"] == 2
    assert stats["grad_norm"] > 0 and stats["entropy"] > 0


def test_progress_is_told_after_each_micro_batch(tiny_policy):
    told = []
    Learner(tiny_policy, TrainConfig(micro_batch_size=2)).step(
        samples_for(tiny_policy, n=5), progress=lambda done, total: told.append((done, total)))
    assert told == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_role_losses_add_up_to_the_loss_and_follow_each_roles_advantages(tiny_policy, aggregation):
    samples = samples_for(tiny_policy, n=9)
    learner = Learner(tiny_policy, TrainConfig(micro_batch_size=2, aggregation=aggregation,
                                               pack_turns=aggregation == "token"))
    stats = learner.step(samples)
    assert stats["loss_agent"] + stats["loss_designer"] == pytest.approx(stats["loss"], abs=1e-6)
    for role in ("agent", "designer"):
        mine = [s for s in samples if s.role == role]
        assert stats[f"tokens_{role}"] == sum(s.n_tokens for s in mine)
        assert stats[f"adv_mean_{role}"] == pytest.approx(sum(s.advantage for s in mine) / len(mine))
        assert stats[f"entropy_{role}"] > 0
    # on policy the ratio and TIS weights are 1, so a role's loss is minus its weighted advantage
    total = sum(s.n_tokens for s in samples)
    for role in ("agent", "designer"):
        mine = [s for s in samples if s.role == role]
        if aggregation == "token":
            expected = -sum(s.advantage * s.n_tokens for s in mine) / total
        else:
            expected = -sum(s.advantage for s in mine) / len(samples)
        assert stats[f"loss_{role}"] == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_zero_advantage_samples_are_not_run_and_the_update_is_unchanged(aggregation):
    import dataclasses

    updates = []
    for zero in (0.0, 1e-30):  # 1e-30: run, but with a gradient far below float precision
        policy = make_tiny_policy()
        learner = Learner(policy, TrainConfig(lr=1e-3, micro_batch_size=2, aggregation=aggregation,
                                              pack_turns=aggregation == "token"))
        batch = [dataclasses.replace(s, advantage=zero) if i % 3 == 0 else s
                 for i, s in enumerate(samples_for(policy, n=9))]
        before = lora_state(learner)
        stats = learner.step(batch)
        assert stats["zero_advantage_samples"] == (3 if zero == 0 else 0)
        assert stats["tokens"] == sum(s.n_tokens for s in batch) and learner.steps == 1
        after = lora_state(learner)
        updates.append({k: after[k] - before[k] for k in after})
    # equal up to float summation order (the micro-batches differ): within 0.5% of the largest
    # element (about lr = 1e-3 under Adam; 1.08e-6 apart on an AMD EPYC, under 1e-6 elsewhere)
    largest = max(float(d.abs().max()) for d in updates[0].values())
    assert largest > 0 and max_diff(updates[0], updates[1]) < 5e-3 * largest, (max_diff(updates[0], updates[1]), largest)
    policy = make_tiny_policy()
    learner = Learner(policy, TrainConfig())
    before = lora_state(learner)
    stats = learner.step([dataclasses.replace(s, advantage=0.0) for s in samples_for(policy)])
    assert stats["step_skipped"] == 1 and learner.steps == 0 and max_diff(lora_state(learner), before) == 0


def test_a_batch_of_one_role_reports_none_for_the_other(tiny_policy):
    samples = [s for s in samples_for(tiny_policy, n=6) if s.role == "agent"]
    stats = Learner(tiny_policy, TrainConfig()).step(samples)
    assert stats["loss_agent"] == pytest.approx(stats["loss"], abs=1e-6)
    assert stats["loss_designer"] is None and stats["adv_mean_designer"] is None
    assert stats["entropy_designer"] is None and stats["tokens_designer"] == 0


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_micro_batching_does_not_change_the_update(aggregation):
    updates = []
    # one big batch; one sample per pass; rows capped by tokens; activations recomputed
    for mbs, tokens, ckpt in ((16, 8192, False), (1, 8192, False), (4, 30, False), (3, 8192, True)):
        policy = make_tiny_policy()
        learner = Learner(policy, TrainConfig(lr=1e-3, micro_batch_size=mbs, aggregation=aggregation,
                                              pack_turns=aggregation == "token",
                                              micro_batch_tokens=tokens, gradient_checkpointing=ckpt))
        assert ckpt == any(getattr(m, "gradient_checkpointing", False) for m in policy.model.modules())
        before = lora_state(learner)
        stats = learner.step(samples_for(policy))
        after = lora_state(learner)
        updates.append(({k: after[k] - before[k] for k in after}, stats["loss"]))
    for delta, loss in updates[1:]:
        assert max_diff(delta, updates[0][0]) < 1e-6
        assert loss == pytest.approx(updates[0][1], abs=1e-6)


@pytest.mark.parametrize("lora", [True, False])
def test_the_head_in_chunks_gives_the_update_of_one_pass(lora):
    """The LM head and softmax a few positions at a time, each chunk recomputed in the backward
    pass, change no figure and no weight's update (the full fine-tune trains the head too)."""
    results = []
    for chunk in (0, 3, 1):
        policy = make_tiny_policy()
        learner = Learner(policy, TrainConfig(lr=1e-3, micro_batch_size=3, head_chunk=chunk, lora=lora,
                                              kl_coef=0.05))
        before = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
        stats = learner.step(samples_for(policy))
        delta = {n: p.detach() - before[n] for n, p in policy.model.named_parameters() if n in before}
        results.append((delta, stats))
    (d0, s0), *rest = results
    assert any("lm_head" in n for n in d0) != lora
    for delta, stats in rest:
        assert max_diff(delta, d0) < 1e-6
        for key in ("loss", "pg_loss", "kl", "entropy", "entropy_agent", "grad_norm"):
            assert stats[key] == pytest.approx(s0[key], abs=1e-6), key


@pytest.mark.parametrize("compute, checkpointing", [
    ("bfloat16", False), ("bfloat16-linear", False), ("bfloat16-linear", True)])
def test_bfloat16_compute_stays_on_policy_and_moves_the_weights_the_same_way(compute, checkpointing):
    """Matmuls in bfloat16 (under autocast, or the linear layers' products alone; the head and
    softmax in fp32): the on-policy ratio stays 1 within bfloat16's rounding, and the update
    points where the fp32 one does. With recomputation the backward pass runs the layers again
    inside the step's bfloat16-linear context (a dtype change would fail the recomputation)."""
    import torch

    deltas, stats = [], []
    for dtype in ("float32", compute):
        policy = make_tiny_policy()
        learner = Learner(policy, TrainConfig(lr=1e-3, micro_batch_size=3, compute_dtype=dtype,
                                              gradient_checkpointing=checkpointing))
        before = lora_state(learner)
        stats.append(learner.step(samples_for(policy)))
        after = lora_state(learner)
        deltas.append(torch.cat([(after[k] - before[k]).flatten() for k in sorted(after)]))
    r = stats[1]["importance_ratio"]["all"]
    assert abs(r["mean"] - 1) < 1e-3 and r["max"] < 1.01
    assert float(torch.nn.functional.cosine_similarity(deltas[0], deltas[1], dim=0)) > 0.95
    assert stats[1]["loss"] == pytest.approx(stats[0]["loss"], abs=1e-2)


def test_a_packed_episode_updates_exactly_as_its_turns_do():
    """Three turns whose prompts continue each other, one advantage: the packed sequence (the
    host's messages in between untrained) gives the unpacked step's loss, ratios and update
    under the token aggregation, running fewer tokens."""
    from spadework.train.batch import pack_turns

    rng = random.Random(5)
    policy = make_tiny_policy()
    prompt, turns = [rng.randrange(2, 64) for _ in range(9)], []
    for k in range(3):
        output = tuple(rng.randrange(2, 64) for _ in range(4 + k))
        lps = tuple(teacher_forced_logprobs(policy.model, prompt, output, 0.7))
        turns.append(Sample("agent", tuple(prompt), output, lps, 0.8, Sampling(0.7), key=k))
        prompt = [*prompt, *output, *(rng.randrange(2, 64) for _ in range(5))]  # the host's reply
    other = samples_for(policy, n=3)  # an unpackable rest of the batch
    (packed,) = pack_turns(turns)
    assert packed.n_tokens == sum(t.n_tokens for t in turns) and packed.length < sum(t.length for t in turns)
    results = []
    for batch in (turns + other, [packed] + other):
        p = make_tiny_policy()
        learner = Learner(p, TrainConfig(lr=1e-3, micro_batch_size=2))
        before = lora_state(learner)
        stats = learner.step(batch)
        after = lora_state(learner)
        results.append(({k: after[k] - before[k] for k in after}, stats))
    (d0, s0), (d1, s1) = results
    assert max_diff(d0, d1) < 1e-6
    for key in ("loss", "entropy", "tokens", "loss_agent"):
        assert s1[key] == pytest.approx(s0[key], abs=1e-6), key
    assert s1["importance_ratio"]["all"]["mean"] == pytest.approx(s0["importance_ratio"]["all"]["mean"], abs=1e-6)


def test_lora_trains_in_place_and_the_sampler_sees_it(tiny_policy):
    base = {n: p.detach().clone() for n, p in tiny_policy.model.named_parameters()}
    prompt, output = (5, 9, 11, 3), (7, 7, 20)
    lp0 = teacher_forced_logprobs(tiny_policy.model, prompt, output, 1.0)
    learner = Learner(tiny_policy, TrainConfig(lr=1e-2))
    assert tiny_policy.model is learner.model  # wrapped in place
    assert teacher_forced_logprobs(tiny_policy.model, prompt, output, 1.0) == pytest.approx(lp0, abs=1e-6)
    for _ in range(3):
        learner.step(samples_for(tiny_policy))
    lp1 = teacher_forced_logprobs(tiny_policy.model, prompt, output, 1.0)
    assert max(abs(a - b) for a, b in zip(lp0, lp1)) > 1e-3
    after = {n.replace("base_model.model.", "").replace(".base_layer", ""): p
             for n, p in tiny_policy.model.named_parameters() if "lora_" not in n}
    assert all(float((after[n] - base[n]).abs().max()) == 0.0 for n in base)  # base frozen


def test_each_sample_is_scored_at_the_temperature_it_was_drawn_with(tiny_policy):
    """Designer samples drawn at 0.6 and agent samples at 1.0 in one batch: on policy, both
    roles' ratios are 1 (a learner scoring every sample at one temperature gets them wrong)."""
    rng = random.Random(3)
    batch = []
    for i in range(6):
        role, temp = ("designer", 0.6) if i % 2 else ("agent", 1.0)
        prompt = tuple(rng.randrange(2, 64) for _ in range(rng.randrange(3, 10)))
        output = tuple(rng.randrange(2, 64) for _ in range(rng.randrange(2, 8)))
        lps = tuple(teacher_forced_logprobs(tiny_policy.model, prompt, output, temp))
        batch.append(Sample(role, prompt, output, lps, 1.0 if i % 3 else -1.0, Sampling(temp, 0.95, 20)))
    stats = Learner(tiny_policy, TrainConfig(micro_batch_size=4)).step(batch)
    for role in ("agent", "designer", "all"):
        r = stats["importance_ratio"][role]
        assert abs(r["mean"] - 1) < 1e-5 and r["max"] < 1 + 1e-4 and r["capped_share"] == 0.0


def test_positive_advantage_raises_its_tokens_probability(tiny_policy):
    s = samples_for(tiny_policy, n=1)[0]
    good = Sample("agent", s.prompt_ids, s.output_ids, s.logprobs, 1.0, s.sampling)
    learner = Learner(tiny_policy, TrainConfig(lr=1e-2))
    for _ in range(3):
        learner.step([good])
    after = teacher_forced_logprobs(tiny_policy.model, s.prompt_ids, s.output_ids, 1.0)
    assert sum(after) > sum(s.logprobs) + 0.1


def test_full_fine_tuning_moves_every_weight():
    policy = make_tiny_policy()
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    learner = Learner(policy, TrainConfig(lora=False, lr=1e-3))
    learner.step(samples_for(policy))
    moved = [n for n, p in policy.model.named_parameters() if float((p.detach() - before[n]).abs().max()) > 0]
    trainable = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert trainable == list(before) and moved == trainable, set(before) - set(moved)  # all 21


@pytest.mark.parametrize("lora", [True, False])
def test_kl_to_the_reference_starts_at_zero_and_grows(lora):
    policy = make_tiny_policy()
    learner = Learner(policy, TrainConfig(lora=lora, lr=1e-2 if lora else 1e-3, kl_coef=0.1))
    batch = samples_for(policy)
    first = learner.step(batch)
    assert first["kl"] == pytest.approx(0.0, abs=1e-9)
    learner.step(batch)
    assert learner.step(batch)["kl"] > 1e-6


def test_checkpoint_round_trip_reproduces_the_next_step(tmp_path):
    cfg = TrainConfig(lr=1e-2)
    policy = make_tiny_policy()
    learner = Learner(policy, cfg)
    batches = [samples_for(policy, seed=s) for s in (1, 2, 3)]
    learner.step(batches[0])
    learner.save(tmp_path / "ckpt")
    rng_after_save = (random.random(), np.random.rand())
    learner.step(batches[1])
    x = lora_state(learner)
    lp_x = teacher_forced_logprobs(policy.model, (4, 5, 6), (7, 8), 1.0)

    other = make_tiny_policy()
    fresh = Learner(other, cfg)
    fresh.load(tmp_path / "ckpt")
    assert fresh.steps == 1
    assert (random.random(), np.random.rand()) == rng_after_save
    fresh.step(batches[1])
    assert max_diff(lora_state(fresh), x) < 1e-6
    assert teacher_forced_logprobs(other.model, (4, 5, 6), (7, 8), 1.0) == pytest.approx(lp_x, abs=1e-6)
    assert (tmp_path / "ckpt" / "adapter" / "adapter_config.json").is_file()


def test_checkpoint_refuses_mismatched_or_incomplete(tmp_path):
    learner = Learner(make_tiny_policy(), TrainConfig())
    learner.save(tmp_path / "c")
    with pytest.raises(ConfigError, match="lora_r"):
        Learner(make_tiny_policy(), TrainConfig(lora_r=4)).load(tmp_path / "c")
    for name in ("optimizer.pt", "trainable.safetensors"):  # cut to half on disk
        learner.save(tmp_path / "c")
        data = (tmp_path / "c" / name).read_bytes()
        (tmp_path / "c" / name).write_bytes(data[: len(data) // 2])
        with pytest.raises(ArchiveError, match=f"checkpoint .*/c is damaged: {name} cannot be "
                           "read .*Restore that folder from a copy"):
            learner.load(tmp_path / "c")
    (tmp_path / "c" / "learner.json").unlink()
    with pytest.raises(ArchiveError, match="learner.json"):
        learner.load(tmp_path / "c")


def test_a_damaged_latest_checkpoint_falls_back_to_the_one_before(tmp_path):
    """A run keeps its latest two checkpoints; when the latest cannot be read the one before is
    loaded, the damaged folder kept aside and ``latest.json`` pointed at what was loaded."""
    import json

    import torch

    from spadework.train.checkpoint import checkpoint_folders, restore_latest, save_rotating

    learner, root = Learner(make_tiny_policy(), TrainConfig()), tmp_path / "checkpoints"
    trainable = [p for p in learner.model.parameters() if p.requires_grad]
    saved = {}
    for it in range(3):
        with torch.no_grad():
            trainable[0].add_(1.0)
        learner.steps = it + 1
        saved[it] = trainable[0].detach().clone()
        save_rotating(learner, root, it, keep=it == 0)
    assert [i for i, _ in checkpoint_folders(root)] == [2, 1, 0]  # 0 kept, 1 the one before
    save_rotating(learner, root, 3, keep=False)
    assert [i for i, _ in checkpoint_folders(root)] == [3, 2, 0]  # 1 neither kept nor recent

    cut = root / "iter_0003" / "optimizer.pt"
    cut.write_bytes(cut.read_bytes()[:100])
    fresh = Learner(make_tiny_policy(), TrainConfig())
    it, folder, passed = restore_latest(fresh, root)
    assert (it, folder.name) == (2, "iter_0002") and fresh.steps == 3
    assert torch.equal(next(p for p in fresh.model.parameters() if p.requires_grad), saved[2])
    assert len(passed) == 1 and "iter_0003 is damaged: optimizer.pt cannot be read" in passed[0]
    assert (root / "iter_0003.damaged" / "optimizer.pt").is_file()
    assert json.loads((root / "latest.json").read_text()) == {"iteration": 2, "dir": "iter_0002"}
    assert restore_latest(fresh, root)[1:] == (folder, [])  # the next resume: nothing to pass over

    # every folder damaged: refused with the latest's reason, nothing moved
    for name in ("iter_0002", "iter_0000"):
        (root / name / "trainable.safetensors").write_bytes(b"\0" * 10)
    with pytest.raises(ArchiveError, match=r"iter_0002 is damaged: trainable.safetensors .*"
                       r"\(1 earlier checkpoint\(s\) fail to load too\)"):
        restore_latest(fresh, root)
    assert (root / "iter_0002").is_dir() and (root / "iter_0000").is_dir()

    # a corrupt pointer: the newest folder that loads
    learner.save(root / "iter_0000")
    (root / "latest.json").write_text("{not json")
    assert restore_latest(fresh, root)[:2] == (0, root / "iter_0000")
    # another adapter shape is the command's fault: refused at once, no fallback
    with pytest.raises(ConfigError, match="lora_r"):
        restore_latest(Learner(make_tiny_policy(), TrainConfig(lora_r=4)), root)
    assert restore_latest(Learner(make_tiny_policy(), TrainConfig()), tmp_path / "none") is None


def test_config_errors_say_what_to_set():
    with pytest.raises(ConfigError, match="aggregation"):
        TrainConfig(aggregation="mean")
    with pytest.raises(ConfigError, match="pack_turns = false"):
        TrainConfig(aggregation="sequence")
    with pytest.raises(ConfigError, match="target_modules"):
        Learner(make_tiny_policy(), TrainConfig(target_modules=("no_such_layer",)))
    with pytest.raises(ValueError, match="at least one"):
        Learner(make_tiny_policy(), TrainConfig()).step([])
    with pytest.raises(ConfigError, match="compute_dtype must be"):
        TrainConfig(compute_dtype="fp16")
    with pytest.raises(ConfigError, match="head_chunk must be >= 0"):
        TrainConfig(head_chunk=-1)


def shared_prefix_batch(policy, seed=3):
    """Samples whose prompts begin with one of two long common beginnings (the turns of two
    environments' episodes), one of them a packed episode with untrained tokens, plus two that
    share nothing; on-policy logprobs, mixed advantages and temperatures."""
    from spadework.train.batch import pack_turns

    rng = random.Random(seed)
    tokens = lambda n: tuple(rng.randrange(2, 64) for _ in range(n))
    heads = (tokens(24), tokens(18))
    out = []
    for i in range(8):
        prompt, output = heads[i % 2] + tokens(rng.randrange(1, 7)), tokens(rng.randrange(2, 7))
        temp = 0.7 if i % 3 else 1.0
        lps = tuple(teacher_forced_logprobs(policy.model, prompt, output, temp))
        out.append(Sample("agent", prompt, output, lps, (-1.0) ** i * (1 + i / 10), Sampling(temp), key=i))
    first = out[0]
    host = tokens(3)
    second = tokens(4)
    prompt2 = first.prompt_ids + first.output_ids + host
    lps2 = tuple(teacher_forced_logprobs(policy.model, prompt2, second, 1.0))
    out[0], = pack_turns([first, Sample("agent", prompt2, second, lps2, first.advantage, first.sampling)])
    assert out[0].trained and not all(out[0].trained)
    for i in range(2):
        prompt, output = tokens(5 + i), tokens(4)
        out.append(Sample("agent", prompt, output, tuple(teacher_forced_logprobs(policy.model, prompt, output, 1.0)),
                          0.5 - i, Sampling(1.0)))
    return out


def shared_prefix_step(policy, **settings):
    """One step of a learner (lr 1e-3, rows of at most 3 and 120 tokens, a KL term, then
    ``settings``) over :func:`shared_prefix_batch`: each LoRA weight's change, the step's
    figures, the batch."""
    learner = Learner(policy, TrainConfig(**{"lr": 1e-3, "micro_batch_size": 3, "micro_batch_tokens": 120,
                                             "kl_coef": 0.05, **settings}))
    batch = shared_prefix_batch(policy)
    before = lora_state(learner)
    stats = learner.step(batch)
    after = lora_state(learner)
    return {k: after[k] - before[k] for k in after}, stats, batch


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("ckpt", [False, True])
def test_samples_sharing_a_prompt_prefix_run_it_once_for_the_same_update(attention, ckpt):
    """Rows of samples that share their prompts' beginning (run once, each sample attending to it
    and to itself only, at its own positions) give the update, loss, entropy and ratios of one
    row per sample, in fewer tokens; with a KL term the reference pass shares them too."""
    results = []
    for share in (0, 4):
        policy = make_tiny_policy()
        policy.model.set_attn_implementation(attention)
        results.append(shared_prefix_step(policy, share_prefix=share, gradient_checkpointing=ckpt))
    (d0, s0, batch), (d1, s1, _) = results
    assert s1["tokens_run"] < s0["tokens_run"] == sum(s.length for s in batch)
    # another summation order: float noise, which Adam's first step (about lr * sign(g)) scales
    # up where a gradient is near its epsilon; the logprobs agree to 1e-6
    assert max_diff(d0, d1) < 1e-5 and max(float(d.abs().max()) for d in d0.values()) > 0
    for key in ("loss", "pg_loss", "kl", "entropy", "grad_norm", "tokens"):
        assert s1[key] == pytest.approx(s0[key], abs=1e-5), key
    r0, r1 = s0["importance_ratio"]["all"], s1["importance_ratio"]["all"]
    assert abs(r1["mean"] - 1) < 1e-5 and r1["max"] == pytest.approx(r0["max"], abs=1e-5)


def test_shared_rows_stay_within_the_token_budget_and_keep_every_sample():
    from spadework.train.forward import micro_batches, samples_of

    policy = make_tiny_policy()
    batch = shared_prefix_batch(policy)
    for budget in (40, 80, 200):
        micros = micro_batches(batch, 2, budget, 4)
        assert sorted(id(s) for m in micros for s in samples_of(m)) == sorted(id(s) for s in batch)
        assert any(len(r.samples) > 1 for m in micros for r in m)
        for m in micros:
            assert len(m) == 1 or (len(m) <= 2 and len(m) * max(r.width for r in m) <= budget)
            for r in m:
                assert len(r.samples) == 1 or r.width <= budget
                assert r.shared < min(len(s.prompt_ids) for s in r.samples) or len(r.samples) == 1
                assert all(s.prompt_ids[:r.shared] == r.samples[0].prompt_ids[:r.shared] for s in r.samples)
    with pytest.raises(ConfigError, match="share_prefix"):
        TrainConfig(share_prefix=-1)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_a_shared_row_scores_each_sample_as_it_was_sampled(attention):
    """Each trained token of a shared row gets the logprob the sampler gave it alone."""
    import torch

    from spadework.train.forward import micro_batches, pack, samples_of, selected_logprobs

    policy = make_tiny_policy()
    policy.model.set_attn_implementation(attention)
    batch = shared_prefix_batch(policy)
    micros = micro_batches(batch, 3, 120, 4)
    assert any(len(r.samples) > 2 for m in micros for r in m)
    with torch.no_grad():
        for m in micros:
            ids, attn, select, targets, positions = pack(m, 0, "cpu")
            temps = torch.tensor([s.sampling.scoring_temperature for s in samples_of(m) for _ in range(s.n_tokens)])
            logp, _ = selected_logprobs(policy.model, ids, attn, select, targets, temps, positions=positions)
            want = torch.tensor([lp for s in samples_of(m) for lp in s.logprobs])
            assert float((logp - want).abs().max()) < 1e-5


@pytest.mark.parametrize("ckpt", [False, True])
def test_attention_by_segments_gives_the_update_of_the_masks(ckpt):
    """Rows attended segment by segment (spadework.train.attention) give the update, loss,
    entropy and ratios of the same rows through L x L masks, recomputed layers included, with
    and without shared prefixes, and the model still generates as on sdpa."""
    from spadework.train.attention import NAME

    policies = [make_tiny_policy(), make_tiny_policy()]
    (d0, s0, _), (d1, s1, _) = (
        shared_prefix_step(p, share_prefix=4, gradient_checkpointing=ckpt, segment_attention=segments)
        for p, segments in zip(policies, (False, True)))
    p0, p1 = policies
    assert p0.model.config._attn_implementation == "sdpa" and p1.model.config._attn_implementation == NAME
    assert max_diff(d0, d1) < 1e-5 and max(float(d.abs().max()) for d in d0.values()) > 0
    for key in ("loss", "pg_loss", "kl", "entropy", "grad_norm", "tokens", "tokens_run"):
        assert s1[key] == pytest.approx(s0[key], abs=1e-5), key
    assert s1["importance_ratio"]["all"]["max"] == pytest.approx(s0["importance_ratio"]["all"]["max"], abs=1e-5)
    # without a layout the implementation is sdpa's: the same logits with padding as p0's
    import torch

    ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    p0.model.load_state_dict(p1.model.state_dict())
    with torch.no_grad():
        a = p0.model(input_ids=ids, attention_mask=mask).logits
        b = p1.model(input_ids=ids, attention_mask=mask).logits
    assert float((a - b)[mask.bool()].abs().max()) < 1e-6


def test_segment_layouts_score_each_sample_as_it_was_sampled():
    """Each trained token of a row attended by segments (a shared prefix, samples, padding)
    gets the logprob the sampler gave it alone."""
    import torch

    from spadework.train.attention import use_segments
    from spadework.train.forward import layouts, micro_batches, pack, samples_of, selected_logprobs

    policy = make_tiny_policy()
    batch = shared_prefix_batch(policy)
    assert use_segments(policy.model)
    micros = micro_batches(batch, 3, 120, 4)
    assert any(len(r.samples) > 2 for m in micros for r in m) and any(len(m) > 1 for m in micros)
    with torch.no_grad():
        for m in micros:
            ids, attn, select, targets, positions = pack(m, 0, "cpu")
            temps = torch.tensor([s.sampling.scoring_temperature for s in samples_of(m) for _ in range(s.n_tokens)])
            logp, _ = selected_logprobs(policy.model, ids, attn, select, targets, temps, positions=positions,
                                        segments=layouts(m))
            want = torch.tensor([lp for s in samples_of(m) for lp in s.logprobs])
            assert float((logp - want).abs().max()) < 1e-5


def test_a_model_on_another_attention_keeps_its_masks():
    from spadework.train.attention import use_segments

    policy = make_tiny_policy()
    policy.model.set_attn_implementation("eager")
    learner = Learner(policy, TrainConfig(segment_attention=True))
    assert not learner._segments and policy.model.config._attn_implementation == "eager"
    assert not use_segments(policy.model)


def test_logprobs_of_a_batch_are_the_samplers_on_policy():
    """Learner.logprobs scores every trained token of a batch (shared rows, a packed episode,
    padding) as it was sampled, in the samples' order."""
    policy = make_tiny_policy()
    learner = Learner(policy, TrainConfig(micro_batch_size=3, micro_batch_tokens=120, share_prefix=4))
    batch = shared_prefix_batch(policy)
    got = learner.logprobs(batch)
    assert [len(g) for g in got] == [s.n_tokens for s in batch]
    assert max(abs(a - b) for g, s in zip(got, batch) for a, b in zip(g, s.logprobs)) < 1e-5

"""The learner: one GRPO optimizer step over a batch of samples of both roles, LoRA or full.

``Learner(policy, cfg)`` wraps ``policy.model`` with a peft LoRA adapter *in place*
(``policy.model`` becomes the ``PeftModel``), so the policy's next ``chat`` samples from the
updated weights: in-process weight sync is free. With ``lora=False`` every parameter trains.

``step(samples)`` recomputes the logprobs of every output token by a teacher-forced pass over
``prompt_ids + output_ids`` (right-padded micro-batches; only output positions go through the
LM head, a chunk of positions at a time), each sample at the temperature it was drawn with, by
the same ``scaled_log_softmax`` the sampler's ``token_logprobs`` uses, then minimises the loss of :mod:`spadework.train.loss` with gradient accumulation over micro-batches,
clips the gradient norm and takes one AdamW step. Entropy is logged, not optimised.

The importance ratio, one convention for every backend: a sample's ``logprobs`` and the learner's
scores are both the log-probability of the sampled token under the model's full softmax at the
sampling temperature, before top-k/top-p truncation (:mod:`spadework.policy.base`), so the ratio
measures only how far the weights that scored a token moved from those that sampled it, which
is what clipping and the TIS cap bound. The sampler's real distribution is the truncated one;
the difference is the log of the kept set's mass, the same for sampler and learner while the
token stays in the set. Measured (``benchmarks/kept_mass.py``, the base Qwen2.5-Coder-0.5B
playing the starters at cpu-qwen's T 0.7, top-k 20, top-p 0.95; 4,591 sampled tokens): the kept
mass is below 0.9 for 0.2% of tokens and below 0.99 for 19%, at least 0.77, median 1.0; a
truncated logprob exceeds the convention's by 0.007 nats a token on average, 0.26 at most.
transformers, llama.cpp, ``spadework serve`` and SGLang report the convention; vLLM cannot (no
logprobs mode gives the tempered distribution before truncation) and reports the truncated
one, so on vLLM ``train.importance_ratio`` reads low by about that much (a mean of about 0.993
for these settings), well inside the clip range [0.8, 1.28] and the TIS cap; the figure shows
it.

Departure from the reference: the default learning rate is 1e-5, not its 1e-6, because only the
LoRA matrices train (B starts at zero, and a rank-16 update moves the output far less per unit
of step than full fine-tuning); 1e-6 on a LoRA barely moves a 135M model in a CPU-sized run.
Short CPU runs that must show learning want 1e-4 to 3e-4 (docs/results.md, "Measured", has
the learning test's figures per rate); 1e-5 is the conservative default for long runs.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from spadework.cores import allowed_cores, free_cores
from spadework.errors import ConfigError
from spadework.settings.learner import TrainConfig
from spadework.train.attention import use_segments
from spadework.train.batch import ROLES, Sample
from spadework.train.checkpoint import load_learner, save_learner
from spadework.train.forward import (
    Row,
    layouts,
    micro_batches,
    pack,
    resolve_compute,
    samples_of,
    selected_logprobs,
)
from spadework.train.heap import bound_heap
from spadework.train.linear16 import Linear16
from spadework.train.loss import grpo_token_loss, token_weights
from spadework.train.parallel import (
    DataParallel,
    fully_shard_model,
    load_sharded_optimizer_state,
    merge_figures,
    shard_micro_batches,
    sharded_optimizer_state,
    sum_gradients,
    whole,
)
from spadework.types import Sampling


class Learner:
    """Trains ``policy.model`` in place; see the module docstring. Not thread-safe.

    ``dp``: this learner is one replica of a data-parallel group (:class:`DataParallel`)."""

    def __init__(self, policy: Any, cfg: TrainConfig | None = None, *,
                 dp: DataParallel | None = None) -> None:
        import torch

        self.policy = policy
        self.cfg = cfg or TrainConfig()
        bound_heap(self.cfg.mmap_threshold)
        self._compute = resolve_compute(self.cfg.compute_dtype, next(policy.model.parameters()).device.type)
        self.dp = dp if dp is not None and dp.world > 1 else None
        self._root: Any = None  # the FSDP root module when sharded (see parallel.fully_shard_model)
        self.steps = 0
        if self.cfg.lora:
            policy.model = _wrap_lora(policy.model, self.cfg)
        else:
            policy.model.requires_grad_(True)
        if self.cfg.gradient_checkpointing:
            enable = (getattr(policy.model, "activation_checkpointing_enable", None)
                      or policy.model.gradient_checkpointing_enable)  # the name before transformers 5.x
            enable({"use_reentrant": False})  # the checkpoint kwargs, first in both signatures
        if self.sharded:
            if self.cfg.kl_coef and not self.cfg.lora:
                raise ConfigError("kl_coef with a full fine-tune keeps a frozen copy of the model, "
                                  "which sharded replicas (fsdp) do not build: set kl_coef = 0, or "
                                  "lora = true, or fsdp = false")
            self._root = fully_shard_model(policy.model, self.dp, selected_logprobs)
        self._ref = _frozen_copy(policy.model) if (self.cfg.kl_coef and not self.cfg.lora) else None
        if self._compute == "bfloat16-linear" and self.sharded:
            if self.cfg.compute_dtype != "auto":
                raise ConfigError('compute_dtype = "bfloat16-linear" patches the model\'s layers, '
                                  'which sharded replicas (fsdp) do not allow: use "bfloat16" '
                                  '(autocast) or "float32", or fsdp = false')
            self._compute = "bfloat16"
        # the decoder's products in bfloat16 inside the learner's passes (spadework.train.linear16)
        linear16 = self._compute == "bfloat16-linear"
        self._linear16 = Linear16(policy.model) if linear16 else nullcontext()
        self._ref_linear16 = Linear16(self._ref) if linear16 and self._ref is not None else nullcontext()
        # attention by the rows' layout instead of an L x L mask (spadework.train.attention)
        self._segments = self.cfg.segment_attention and use_segments(policy.model)
        self._ref_segments = self._ref is not None and self.cfg.segment_attention and use_segments(self._ref)
        self.params = [p for p in policy.model.parameters() if p.requires_grad]
        if not self.params:
            raise ConfigError("no trainable parameters; check target_modules against the model")
        self.optimizer = torch.optim.AdamW(
            self.params, lr=self.cfg.lr, betas=self.cfg.betas, eps=self.cfg.adam_eps,
            weight_decay=self.cfg.weight_decay,
        )

    @property
    def model(self) -> Any:
        return self.policy.model

    @property
    def sharded(self) -> bool:
        """Whether this replica holds a shard of the weights (FSDP), not all of them."""
        return self.dp is not None and self.dp.shard

    @property
    def writes(self) -> bool:
        """Whether this learner writes checkpoint files (rank 0 of a group, or alone)."""
        return self.dp is None or self.dp.rank == 0

    def trainable_state(self) -> dict[str, Any]:
        """Name -> detached tensor of every trainable parameter (what a checkpoint stores);
        whole tensors, gathered from every replica when sharded (all replicas must call it)."""
        return {n: whole(p.detach()) for n, p in self.model.named_parameters() if p.requires_grad}

    def step(self, samples: Sequence[Sample], progress: Callable[[int, int], None] | None = None
             ) -> dict[str, float]:
        """One optimizer step over all ``samples``; returns the step's statistics (floats).
        ``progress(done, total)`` is told after each micro batch's backward pass (a step of a
        large model takes minutes on a CPU).

        Keys: loss, pg_loss, kl, entropy (nats per token), clip_frac, ratio_mean, ratio_max (PPO
        ratio), tis_mean (the capped weight), grad_norm (before clipping), step_skipped (1 when
        the gradient was not finite and no update was made), tokens, samples, samples_agent,
        samples_designer, adv_mean, seconds, tokens_run (every token the passes ran, prompts
        included, a prefix shared by a row's samples once: what the passes cost); per role (``agent``, ``designer``): ``loss_ROLE``
        (the role's share of ``loss``: the two add up to it), ``entropy_ROLE``, ``tokens_ROLE``
        and ``adv_mean_ROLE`` (None for a role with no samples in the batch); and
        ``importance_ratio``: for each role and for ``all`` tokens, the sampler-to-learner ratio
        ``exp(logp_learner - logp_sampler)`` of the sampled tokens that were run, as ``mean``,
        ``max`` and ``capped_share`` (the share above ``tis_cap``), or None when no token of that
        role was run. On policy with an exact sampler it is 1; a sampler on other kernels or
        weights (a quantised engine, a stale designer sample) moves it.

        Samples whose advantage is 0 have no gradient when ``kl_coef`` is 0 (their loss is
        ``0 * ratio``), so they are not run at all: they still count in the normalisation
        (``total_tokens``, ``total_samples``), so the update is the same as with them, and
        ``zero_advantage_samples`` says how many were left out. The per-token statistics
        (entropy, ratios, KL) are over the tokens that were run. When no sample is left, no
        update is made and ``step_skipped`` is 1.
        """
        import torch

        if not samples:
            raise ValueError("step() needs at least one sample")
        before = torch.get_num_threads()
        threads = free_cores() if self.cfg.threads == "auto" else (
            self.cfg.threads or len(allowed_cores()))
        torch.set_num_threads(threads)
        try:
            with self._linear16:  # a step's backward recomputes layers: it spans the whole step
                return {**self._step(samples, progress), "threads": float(threads)}
        finally:
            torch.set_num_threads(before)

    def _step(self, samples: Sequence[Sample], progress: Callable[[int, int], None] | None
              ) -> dict[str, float]:
        import torch

        t0 = time.perf_counter()
        cfg = self.cfg
        total_tokens = sum(s.n_tokens for s in samples)
        run = [s for s in samples if s.advantage != 0 or cfg.kl_coef]
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums: Counter[str] = Counter()
        by_role: dict[str, Counter[str]] = {role: Counter() for role in ROLES}
        maxima = {"ratio_max": 0.0}
        ratios = _RatioFigures(cfg.tis_cap)
        every = micro_batches(run, cfg.micro_batch_size, cfg.micro_batch_tokens, cfg.share_prefix)
        micros = every if self.dp is None else shard_micro_batches(every, self.dp.rank, self.dp.world)
        if self.sharded:  # FSDP gathers each layer collectively: every replica runs as many passes
            rounds = max(len(shard_micro_batches(every, r, self.dp.world)) for r in range(self.dp.world))
            for _ in range(rounds - len(micros)):
                loss, _, _ = self._micro_loss(every[0], total_tokens, len(samples))
                (loss * 0.0).backward()
        for done, micro in enumerate(micros, 1):
            loss, terms, extra = self._micro_loss(micro, total_tokens, len(samples))
            (loss * self.dp.world if self.sharded else loss).backward()  # FSDP averages: make it a sum
            sums["loss"] += float(loss.detach())
            sums["pg_loss"] += extra["pg_loss"]
            sums["entropy"] += extra["entropy_sum"]
            for role, figures in extra["roles"].items():
                by_role[role].update(figures)
            sums["kl"] += float(terms["kl"].sum())
            sums["clip"] += float(terms["clipped"].sum())
            sums["ratio"] += float(terms["ratio"].sum())
            sums["tis"] += float(terms["tis"].sum())
            ratios.add(terms["sample_ratio"], [s.role for s in samples_of(micro) for _ in range(s.n_tokens)])
            maxima["ratio_max"] = max(maxima["ratio_max"], float(terms["ratio"].max()))
            if progress is not None:
                progress(done, len(micros))
        if self.dp is not None:
            if not self.sharded:  # FSDP has reduce-scattered them already
                sum_gradients(self.params, self.dp)
            merge_figures(self.dp, sums, by_role, maxima, ratios.sums, ratios.max)
        grad_norm = whole(torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm))
        finite = bool(torch.isfinite(grad_norm))
        if finite and run:  # a NaN/inf gradient would poison the weights and Adam's moments for good
            self.optimizer.step()
            self.steps += 1
        self.optimizer.zero_grad(set_to_none=True)
        roles = Counter(s.role for s in samples)
        n = float(sum(s.n_tokens for s in run)) or 1.0
        return {
            "loss": sums["loss"], "pg_loss": sums["pg_loss"], "kl": sums["kl"] / n,
            "entropy": sums["entropy"] / n, "clip_frac": sums["clip"] / n,
            "ratio_mean": sums["ratio"] / n, "ratio_max": maxima["ratio_max"],
            "tis_mean": sums["tis"] / n, "importance_ratio": ratios.figures(),
            "grad_norm": float(grad_norm), "step_skipped": float(not (finite and run)),
            "tokens": float(total_tokens), "tokens_run": float(sum(r.width for m in every for r in m)),
            "samples": float(len(samples)),
            "zero_advantage_samples": float(len(samples) - len(run)),
            "samples_agent": float(roles["agent"]), "samples_designer": float(roles["designer"]),
            "adv_mean": sum(s.advantage for s in samples) / len(samples),
            "seconds": time.perf_counter() - t0,
            **_role_figures(samples, by_role),
        }

    def _micro_loss(self, rows: list[Row], total_tokens: int,
                    total_samples: int) -> tuple[Any, dict[str, Any], dict[str, float]]:
        import torch

        cfg = self.cfg
        dev = next(self.model.parameters()).device
        ids, attn, select, targets, temps, positions, segments = self._pass_inputs(rows)
        micro = samples_of(rows)
        logp, entropy = self._logprobs(self.model, ids, attn, select, targets, temps, entropy=True,
                                       positions=positions, segments=segments)
        logp_sampling = torch.tensor([lp for s in micro for lp in s.logprobs], device=dev)
        adv = torch.tensor([s.advantage for s in micro for _ in range(s.n_tokens)], device=dev)
        weights = torch.tensor(token_weights(
            [s.n_tokens for s in micro], cfg.aggregation,
            total_tokens=total_tokens, total_samples=total_samples), device=dev)
        logp_ref = (self._ref_logprobs(ids, attn, select, targets, temps, positions, segments)
                    if cfg.kl_coef else None)
        loss, terms = grpo_token_loss(
            logp, logp.detach(), logp_sampling, adv, weights, clip_low=cfg.clip_low,
            clip_high=cfg.clip_high, tis_cap=cfg.tis_cap, logp_ref=logp_ref, kl_coef=cfg.kl_coef,
        )
        with torch.no_grad():
            pg = (weights * terms["tis"] * torch.maximum(
                -adv * terms["ratio"],
                -adv * terms["ratio"].clamp(1 - cfg.clip_low, 1 + cfg.clip_high))).sum()
            role_of = [s.role for s in micro for _ in range(s.n_tokens)]
            roles = {}
            for role in set(role_of):
                mask = torch.tensor([r == role for r in role_of], device=dev)
                roles[role] = {"loss": float(terms["weighted"][mask].sum()),
                               "entropy": float(entropy[mask].sum()), "tokens": int(mask.sum())}
        return loss, terms, {"pg_loss": float(pg), "entropy_sum": float(entropy.sum()),
                             "roles": roles}

    def _pass_inputs(self, rows: Sequence[Row]) -> tuple[Any, ...]:
        """A micro-batch's pass inputs: :func:`pack`'s ids, mask, selection and targets, each
        trained token's scoring temperature, the positions, and the rows' :func:`layouts` when
        the model attends by segments (else None)."""
        import torch

        dev = next(self.model.parameters()).device
        ids, attn, select, targets, positions = pack(rows, self.policy.pad_token_id, dev)
        temps = torch.tensor([s.sampling.scoring_temperature for s in samples_of(rows) for _ in range(s.n_tokens)],
                             device=dev)
        return ids, attn, select, targets, temps, positions, layouts(rows) if self._segments else None

    def _logprobs(self, model: Any, ids: Any, attn: Any, select: Any, targets: Any, temps: Any,
                  entropy: bool = False, positions: Any = None, segments: Any = None) -> tuple[Any, Any]:
        """:func:`selected_logprobs` of ``model`` (the trained one), through the FSDP root when
        sharded, so that its hooks gather the weights for the pass and reduce its gradients."""
        if self._root is not None and model is self.model:
            return self._root(ids, attn, select, targets, temps, self.cfg.head_chunk, entropy,
                              self._compute, positions, segments)
        return selected_logprobs(model, ids, attn, select, targets, temps, self.cfg.head_chunk, entropy,
                                 self._compute, positions, segments)

    def logprobs(self, samples: Sequence[Sample]) -> list[list[float]]:
        """Each sample's trained tokens' logprobs under the current weights, each at the
        temperature it was drawn with, through the step's own passes (its rows, attention, head
        and compute dtype) without gradients: what a step compares with ``Sample.logprobs`` in
        its importance ratios (``benchmarks/drift.py --batch``). Every replica must call it when
        sharded."""
        import torch

        cfg = self.cfg
        out: dict[int, list[float]] = {}
        with torch.no_grad(), self._linear16:
            for micro in micro_batches(samples, cfg.micro_batch_size, cfg.micro_batch_tokens, cfg.share_prefix):
                ids, attn, select, targets, temps, positions, segments = self._pass_inputs(micro)
                logp, _ = self._logprobs(self.model, ids, attn, select, targets, temps, positions=positions,
                                         segments=segments)
                at = 0
                for s in samples_of(micro):
                    out[id(s)] = [float(x) for x in logp[at : at + s.n_tokens]]
                    at += s.n_tokens
        return [out[id(s)] for s in samples]

    def score(self, prompt_ids: Sequence[int], output_ids: Sequence[int], temperature: float = 1.0) -> list[float]:
        """Teacher-forced logprobs of ``output_ids`` after ``prompt_ids`` under the current
        weights, at ``temperature`` (every replica must call it when sharded)."""
        import torch

        sample = Sample("agent", tuple(prompt_ids), tuple(output_ids), (0.0,) * len(output_ids), 0.0,
                        Sampling(temperature))
        dev = next(self.model.parameters()).device
        ids, attn, select, targets, _ = pack([Row((sample,))], self.policy.pad_token_id, dev)
        with torch.no_grad(), self._linear16:
            temps = torch.full((len(output_ids),), sample.sampling.scoring_temperature, device=dev)
            return [float(x) for x in self._logprobs(self.model, ids, attn, select, targets, temps)[0]]

    def _ref_logprobs(self, ids: Any, attn: Any, select: Any, targets: Any, temps: Any,
                      positions: Any = None, segments: Any = None) -> Any:
        import torch

        with torch.no_grad():
            if self._ref is not None:
                with self._ref_linear16:
                    return selected_logprobs(self._ref, ids, attn, select, targets, temps, self.cfg.head_chunk,
                                             compute=self._compute, positions=positions,
                                             segments=segments if self._ref_segments else None)[0]
            with self.model.disable_adapter():
                return self._logprobs(self.model, ids, attn, select, targets, temps, positions=positions,
                                      segments=segments)[0]

    def save(self, directory: str | Path) -> Path:
        """Write a checkpoint (see :mod:`spadework.train.checkpoint`); returns the folder."""
        return save_learner(self, Path(directory))

    def load(self, directory: str | Path) -> None:
        """Restore a checkpoint written by :meth:`save` into this learner (same config)."""
        load_learner(self, Path(directory))

    def save_adapter(self, directory: str | Path) -> Path:
        """The LoRA adapter in peft's folder format (what vLLM's LoRA loading reads)."""
        if not self.cfg.lora:
            raise ConfigError("save_adapter needs lora=True; a full fine-tune saves the model")
        path = Path(directory)
        if not self.sharded:
            self.model.save_pretrained(str(path))
            return path
        state = self.trainable_state()  # gathered on every replica, written by rank 0
        if self.writes:
            self.model.save_pretrained(str(path), state_dict=state)
        return path

    def save_model(self, directory: str | Path) -> Path:
        """The whole model in transformers' folder format (safetensors): what an engine loads
        after a full fine-tune; gathered from every replica when sharded, written by rank 0."""
        path = Path(directory)
        if not self.sharded:
            self.model.save_pretrained(str(path), safe_serialization=True)
            return path
        state = {k: whole(v).to("cpu") for k, v in self.model.state_dict().items()}
        if self.writes:
            self.model.save_pretrained(str(path), state_dict=state, safe_serialization=True)
        return path

    def optimizer_state(self) -> dict[str, Any]:
        """AdamW's state as a checkpoint stores it: the optimizer's own ``state_dict`` for one
        process; for sharded replicas the whole state by parameter name (gathered)."""
        return self.optimizer.state_dict() if not self.sharded else sharded_optimizer_state(self._root, self.optimizer)

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`optimizer_state`."""
        if not self.sharded:
            self.optimizer.load_state_dict(state)
        else:
            load_sharded_optimizer_state(self._root, self.optimizer, state)


class _RatioFigures:
    """Sums of the sampler-to-learner ratios of one step, per role and overall."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.sums: dict[str, Counter[str]] = {k: Counter() for k in (*ROLES, "all")}
        self.max: dict[str, float] = {}

    def add(self, ratio: Any, roles: Sequence[str]) -> None:
        values = ratio.tolist()
        for role, r in zip(roles, values, strict=True):
            for key in (role, "all"):
                self.sums[key].update(n=1, sum=r, capped=r > self.cap)
                self.max[key] = max(self.max.get(key, r), r)

    def figures(self) -> dict[str, dict[str, float] | None]:
        return {key: {"mean": c["sum"] / c["n"], "max": self.max[key],
                      "capped_share": c["capped"] / c["n"]} if c["n"] else None
                for key, c in self.sums.items()}


def _wrap_lora(model: Any, cfg: TrainConfig) -> Any:
    """``model`` with a fresh LoRA adapter (seeded from ``cfg.seed``); an existing one is kept."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model

    if isinstance(model, PeftModel):
        return model
    dev = next(model.parameters()).device
    lcfg = LoraConfig(
        r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.target_modules), bias="none", task_type="CAUSAL_LM",
    )
    devices = [dev.index or 0] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), warnings.catch_warnings():
        # peft reads transformers' deprecated is_gradient_checkpointing; the warning is theirs
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        torch.manual_seed(cfg.seed)
        try:
            return get_peft_model(model, lcfg)
        except ValueError as e:
            raise ConfigError(f"LoRA target_modules {cfg.target_modules} do not fit this model: {e}") from e


def _frozen_copy(model: Any) -> Any:
    import copy

    ref = copy.deepcopy(model).eval()
    ref.requires_grad_(False)
    return ref


def _role_figures(samples: Sequence[Sample], by_role: dict[str, Counter[str]]) -> dict[str, Any]:
    """``loss_ROLE``, ``entropy_ROLE`` (nats per token), ``tokens_ROLE`` and ``adv_mean_ROLE``
    for each role; None where the batch has no sample of the role."""
    out: dict[str, Any] = {}
    for role in ROLES:
        mine = [s.advantage for s in samples if s.role == role]
        n = by_role[role]["tokens"]  # the tokens that were run
        out[f"loss_{role}"] = float(by_role[role]["loss"]) if mine else None
        out[f"entropy_{role}"] = by_role[role]["entropy"] / n if n else None
        out[f"tokens_{role}"] = float(sum(s.n_tokens for s in samples if s.role == role))
        out[f"adv_mean_{role}"] = sum(mine) / len(mine) if mine else None
    return out

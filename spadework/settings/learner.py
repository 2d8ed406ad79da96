"""``[learner]``: the GRPO learner (optimiser, clipping, LoRA, batching, precision)."""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError

AGGREGATIONS = ("token", "sequence")


#: Linear layers that take LoRA in Llama/Qwen/Mistral-style models (attention and MLP).
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def is_thread_setting(value: object) -> bool:
    """Whether ``value`` is a valid ``threads`` setting: an integer >= 1, ``"auto"`` or None
    (a bool is not a count)."""
    if value is None or value == "auto":
        return True
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class TrainConfig:
    """Learner settings; the reference recipe's values unless stated.

    ``lr``: AdamW learning rate, constant (1e-5 for LoRA; see the module docstring). ``clip_low``
    / ``clip_high``: the PPO ratio is clipped to ``[1 - clip_low, 1 + clip_high]``. ``tis_cap``:
    truncated importance weight cap. ``kl_coef``: weight of the k3 KL to the reference model (the
    base model with adapters off; a frozen copy when ``lora=False``); 0 skips its forward pass.
    ``aggregation``: ``token`` or ``sequence`` (see ``token_weights``). ``micro_batch_size``:
    rows per forward/backward pass, and ``micro_batch_tokens`` the most padded tokens
    (rows x widest row) in one, a wider row going alone (memory, not maths). ``share_prefix``:
    samples whose prompts begin with at least this many of the same tokens run as one row,
    those tokens once, each sample's own tokens attending to them and to themselves only
    (``spadework.train.forward.shared_rows``); 0 runs every sample as its own row. The maths is
    the same either way. The turns of a tool-use episode sampled from the latest observation
    (``play.history_turns = 0``) all begin with the same system block of tool schemas and
    task, about 1,000 of their 1,100 to 1,700 prompt tokens: sharing it runs a step's samples
    in a fraction of the tokens (``benchmarks/shared_prefix.py``).
    ``gradient_checkpointing`` recomputes activations in the backward pass (less memory, about a
    third more compute). ``threads``: torch threads during a step (None: every core this process
    may use; ``"auto"``: those cores less the ones other processes keep busy when the step
    starts, :func:`spadework.cores.free_cores`: on the 2-core machine one step ran 59 tokens/s
    on two threads and 35 on one when alone, and 21 on two against 35 on one beside a process
    spinning a core, ``benchmarks/threads.py``); the caller's thread count is restored after,
    and the step's figures say how many ran (``threads``). ``seed``: LoRA initialisation.
    There is no temperature here: each sample is scored at the temperature it was drawn with
    (``Sample.sampling``), so a designer sample drawn at 0.6 and an agent turn drawn at 0.7
    each get the sampler's convention.
    ``pack_turns``: train an episode's turns as one sequence where their prompts continue each
    other (``spadework.train.batch.pack_turns``): the same update under the ``token``
    aggregation for fewer tokens run (``benchmarks/packing.py`` on a ``cpu`` run's 144 trained
    turns: 35k tokens instead of 80k, 2.3x); it needs ``aggregation = "token"``.
    ``head_chunk``: the LM head, softmax and entropy run over at most this many trained
    positions at a time, each chunk recomputed in the backward pass, so that the full-vocabulary
    logits are never held for a whole micro-batch (Qwen2.5's 151,936 columns in fp32 are 0.6 MB a
    position, and the one-pass softmax, its gradient and the entropy held about six such copies);
    0 runs them in one pass. The maths is the same either way (:func:`spadework.train.forward.selected_logprobs`).
    ``segment_attention``: a model on transformers' ``sdpa`` attention runs each row's attention
    segment by segment (a shared prefix causally, each sample over the prefix and itself:
    :mod:`spadework.train.attention`) instead of through a mask over the whole row, which makes
    the kernel score every token against every other; the maths is the same. False passes the
    masks (as any other attention implementation gets them).
    ``mmap_threshold``: from the learner's construction on, the process's ``malloc`` serves
    blocks of at least this many bytes by ``mmap``, so that a step's freed activations leave
    memory instead of staying resident in a fragmented heap (:mod:`spadework.train.heap`: a
    0.5B step's peak 6.4 -> 3.9 GiB, about 20% slower); 0 leaves malloc as it is.
    ``compute_dtype``: ``float32``; ``bfloat16`` to run the decoder under ``torch.autocast``
    (every product in bfloat16, and the activations between them rounded too); or
    ``bfloat16-linear``: the decoder's linear layers multiply in bfloat16 with fp32 output and
    everything between them stays fp32, the rounding llama.cpp's BF16 matmul applies
    (:mod:`spadework.train.linear16`); or ``auto``: ``bfloat16-linear`` on a CPU with native
    bfloat16 arithmetic (``bfloat16`` when sharded), else float32. LoRA weights, gradients,
    AdamW, the LM head and the softmax stay fp32 in all of them. Measured on the main job's own
    step (run k's iteration 2, at the weights the engine sampled with; ``benchmarks/drift.py
    --run``), the learner-sampler gap per trained token, mean / max nats: fp32 0.0020 / 0.033,
    bfloat16-linear 0.0025 / 0.080, bfloat16 0.0152 / 0.347 (a ratio of 1.40). cpu-qwen uses
    ``auto``.
    """

    lr: float = 1e-5
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-8
    clip_low: float = 0.2
    clip_high: float = 0.28
    tis_cap: float = 2.0
    kl_coef: float = 0.0
    aggregation: str = "token"
    max_grad_norm: float = 1.0
    lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    target_modules: tuple[str, ...] = DEFAULT_TARGETS
    micro_batch_size: int = 4
    micro_batch_tokens: int = 8192
    share_prefix: int = 64
    gradient_checkpointing: bool = False
    threads: int | str | None = None
    seed: int = 0
    pack_turns: bool = True
    head_chunk: int = 512
    segment_attention: bool = True
    compute_dtype: str = "float32"
    mmap_threshold: int = 1 << 20

    def __post_init__(self) -> None:
        checks = [
            (self.lr > 0, f"lr must be > 0, got {self.lr}"),
            (self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}"),
            (all(0 <= b < 1 for b in self.betas), f"betas must lie in [0, 1), got {self.betas}"),
            (0 <= self.clip_low < 1, f"clip_low must lie in [0, 1), got {self.clip_low}"),
            (self.clip_high >= 0, f"clip_high must be >= 0, got {self.clip_high}"),
            (self.tis_cap > 0, f"tis_cap must be > 0, got {self.tis_cap}"),
            (self.kl_coef >= 0, f"kl_coef must be >= 0, got {self.kl_coef}"),
            (self.aggregation in AGGREGATIONS,
             f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}"),
            (self.max_grad_norm > 0, f"max_grad_norm must be > 0, got {self.max_grad_norm}"),
            (self.lora_r >= 1, f"lora_r must be >= 1, got {self.lora_r}"),
            (0 <= self.lora_dropout < 1, f"lora_dropout must lie in [0, 1), got {self.lora_dropout}"),
            (bool(self.target_modules), "target_modules is empty; name the layers to adapt"),
            (self.micro_batch_size >= 1, f"micro_batch_size must be >= 1, got {self.micro_batch_size}"),
            (self.micro_batch_tokens >= 1,
             f"micro_batch_tokens must be >= 1, got {self.micro_batch_tokens}"),
            (isinstance(self.share_prefix, int) and self.share_prefix >= 0,
             f"share_prefix must be an int >= 0 (0: no sharing), got {self.share_prefix!r}"),
            (self.mmap_threshold >= 0, f"mmap_threshold must be >= 0 (0: leave malloc as it "
                                       f"is), got {self.mmap_threshold}"),
            (self.compute_dtype in COMPUTE_DTYPES,
             f"compute_dtype must be one of {', '.join(COMPUTE_DTYPES)}, got {self.compute_dtype!r}"),
            (self.head_chunk >= 0, f"head_chunk must be >= 0 (0: one pass), got {self.head_chunk}"),
            (is_thread_setting(self.threads),
             f'threads must be an integer >= 1, "auto" or unset, got {self.threads!r}'),
            (not self.pack_turns or self.aggregation == "token",
             "pack_turns gives the unpacked update only under aggregation = \"token\" (a packed "
             "episode would count as one sequence): set pack_turns = false for \"sequence\""),
        ]
        for ok, reason in checks:
            if not ok:
                raise ConfigError(reason)


#: ``TrainConfig.compute_dtype`` values; ``auto`` is bfloat16-linear on a CPU with native
#: bfloat16 arithmetic (oneDNN's check: AVX-512 BF16 or AMX), else float32.
COMPUTE_DTYPES = ("float32", "bfloat16", "bfloat16-linear", "auto")

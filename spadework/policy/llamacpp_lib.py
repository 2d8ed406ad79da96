"""The ``llama_cpp`` library as the engine uses it: imported on first use (it loads a shared
library), its logging silenced once per process, and the default thread count."""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any

from spadework.cores import allowed_cores
from spadework.errors import PolicyError
from spadework.policy.decode import DecodeRow


def _quiet_log(level: int, text: bytes, user_data: Any) -> None:
    """llama.cpp logs model loading at INFO to stderr; failures come back as ``PolicyError``."""


def llama() -> Any:
    """The ``llama_cpp`` module, imported on first use (it loads a shared library), with
    llama.cpp's logging silenced and its backend initialised."""
    try:
        import llama_cpp
    except ImportError as e:
        raise PolicyError("the llama.cpp backend needs llama-cpp-python; run `make setup` "
                          "(or pip install -e '.[models]')") from e
    _silence(llama_cpp)
    return llama_cpp


@functools.cache
def _silence(ll: Any) -> Any:
    """Install the quiet log callback once per process. Cached, never freed: llama.cpp keeps
    the pointer for good, so a callback owned by one policy would dangle once it is collected."""
    callback = ll.llama_log_callback(_quiet_log)
    ll.llama_log_set(callback, ctypes.c_void_p(0))
    ll.llama_backend_init()
    return callback


def default_threads() -> int:
    """Half the cores this process may use, at least 1 (one on this project's 2-core machines,
    where two threads ran 1.7x faster on a quiet machine and 8x slower on a busy one)."""
    return max(1, len(allowed_cores()) // 2)


def context_params(ll: Any, n_seq: int, cells: int, threads: int, kv_type: str,
                   flash_attn: bool) -> Any:
    """llama.cpp context parameters for ``n_seq`` sequences of ``cells`` KV cells each."""
    p = ll.llama_context_default_params()
    p.n_ctx = n_seq * cells
    p.n_batch = n_seq * cells  # a step may prefill every waiting prompt at once
    p.n_seq_max = n_seq
    p.n_threads = p.n_threads_batch = threads
    p.kv_unified = False  # one KV stream per sequence: attention reads only its own cells
    p.type_k = p.type_v = ll.GGML_TYPE_F32 if kv_type == "f32" else ll.GGML_TYPE_F16
    p.flash_attn_type = (ll.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                         else ll.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    p.no_perf = True
    return p


def by_sequence(entries: list[tuple[int, int, int, bool]], at: list[int]
                ) -> tuple[list[tuple[int, int, int, bool]], list[int]]:
    """``entries`` (token, position, sequence, wants logits) ordered by sequence, each
    sequence's tokens in their order, and ``at`` (batch indices whose logits are read) mapped to
    the new order.

    Why: with one KV stream per sequence (``kv_unified = False``) llama.cpp splits a batch into
    micro-batches of sequences with consecutive ids in batch order, so a decode step whose rows
    sit on sequences 5, 2, 9 and 3 ran as four forward passes, each reading every weight for
    one token. Ordered, sequences 2 and 3 share one. A play stage's decode step cost about the
    same per row as a lone row's step before (``benchmarks/play.py``, docs/engine.md).

    >>> by_sequence([(7, 0, 5, True), (8, 0, 2, False), (9, 1, 2, True), (4, 3, 3, True)],
    ...             [0, 2, 3])
    ([(8, 0, 2, False), (9, 1, 2, True), (4, 3, 3, True), (7, 0, 5, True)], [3, 1, 2])
    """
    order = sorted(range(len(entries)), key=lambda k: entries[k][2])
    where = [0] * len(entries)
    for new, old in enumerate(order):
        where[old] = new
    return [entries[k] for k in order], [where[i] for i in at]


@dataclass(eq=False)
class Row:
    """One reply being decoded (local to
    :meth:`~spadework.policy.llamacpp.LlamaCppPolicy._run`): its prompt, token budget,
    sampler, move to stop at, stream key, the caller's ``tag``, its sequence and its share of
    the engine's seconds."""

    prompt: list[int]
    budget: int
    seed: int
    move: str | None
    key: Any
    tag: Any
    seq: int = -1
    seconds: float = 0.0
    repeat: int | None = None  # SamplingParams.stop_at_repeat

    def __post_init__(self) -> None:
        import torch

        self.gen = torch.Generator().manual_seed(self.seed)
        self.out = DecodeRow(self.budget, self.repeat)

    @property
    def cells(self) -> int:
        """KV cells the row may need: its prompt and its whole budget."""
        return len(self.prompt) + self.budget

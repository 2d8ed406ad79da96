"""The C heap under a learner's large, short-lived tensors.

PyTorch's CPU tensors come from ``malloc``. glibc serves a block from ``mmap`` only above a
threshold that it raises, up to 32 MiB, each time such a block is freed; after the first few
frees a training step's activations (tens of MiB each) come from the heap instead, and a heap
returns memory to the system only from its top, so the freed blocks stay resident between
steps, fragmented. Measured on the Qwen2.5-Coder-0.5B (``benchmarks/learner.py``, one LoRA
step over two 1,700-token sequences with activations recomputed): the decoder's forward pass
over one sequence kept 3.0 GiB resident with glibc's defaults against 0.4 GiB with the
threshold fixed at 1 MiB, and the step's peak fell from 6.4 to 3.9 GiB; the page faults of the
``mmap`` blocks made the step about 20% slower (97 s against 82 s, ``--settings
"mmap_threshold=0;"``).

:func:`bound_heap` fixes the threshold (which also stops glibc moving it), through ``mallopt``,
for the whole process: a learner calls it when it is built (``TrainConfig.mmap_threshold``).
The same effect from the shell is ``MALLOC_MMAP_THRESHOLD_=1048576``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_MMAP_THRESHOLD = -3  # glibc's malloc.h


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018 -- musl and macOS have no mallopt
    except (OSError, AttributeError, TypeError):
        return None
    return libc


def bound_heap(threshold: int) -> bool:
    """Serve every ``malloc`` of at least ``threshold`` bytes by its own ``mmap`` from now on,
    so that it goes back to the system when freed. Returns whether it took effect (False off
    glibc, or when ``threshold`` is 0: leave malloc as it is)."""
    libc = _libc()
    if threshold <= 0 or libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, ctypes.c_int(threshold)))

"""The bounded heap: a freed large block leaves memory, where glibc's default keeps it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spadework.errors import ConfigError
from spadework.train import TrainConfig
from spadework.train.heap import _libc

PROBE = """
import ctypes, sys
from spadework.train.heap import bound_heap, _libc
libc = _libc()
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
if sys.argv[1] == "bounded":
    assert bound_heap(1 << 20)
size = 16 << 20
before = resident()
for _ in range(3):  # glibc raises its threshold after the first free: the later blocks are heap
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    pin = libc.malloc(4096)  # a live block above it, as a step's other tensors are
    libc.free(p)
print(resident() - before)
"""


def _kept(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(_libc() is None or not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_a_freed_block_leaves_memory_only_with_the_heap_bounded():
    assert _kept("default") >= 8 << 20  # glibc kept the 16 MiB block resident
    assert _kept("bounded") < 1 << 20


def test_a_negative_threshold_is_refused():
    with pytest.raises(ConfigError, match="mmap_threshold"):
        TrainConfig(mmap_threshold=-1)

"""A 16-bit (or 8-bit) copy of a quantised GGUF, made once, for llama.cpp to sample from.

Why: llama.cpp multiplies Q4_1 weights by activations it first rounds to 8 bits (Q8_1), one
matrix-vector product per row of a batch; on the machines this project targets that costs about
0.1 nats of noise per sampled token against the learner and gains nothing from batching. The
same weights, dequantised (exactly what the learner's fp32 copy holds) and stored as BF16 (the
default; AVX512-BF16 kernels where the CPU has them) or F16, run through llama.cpp's 16-bit
matrix-matrix kernels: a batch of 16 rows is faster, and sampler and learner agree far more
closely (figures in :mod:`spadework.policy.llamacpp` and ``tests/policy/test_llamacpp.py``).

The copy is made once from the verified GGUF and never changes afterwards: LoRA updates are
applied on top of it at run time (:mod:`spadework.policy.gguf_lora`), nothing is re-quantised,
so the base cannot drift. A Q8_0 copy (``q8_0``) re-quantises the dequantised weights to 8
bits per weight in blocks of 32: measured on the 0.5B agent in a cpu-qwen play stage (40
episodes, 21.1k prompt tokens computed; ``benchmarks/play.py --weights q8_0``), it decodes
a row alone in 19 ms against BF16's 22 but its prefill steps ran at 255 tokens/s against 450,
so the stage took 101 s against 71; its logprobs are
0.012 nats from the fp32 learner on average (max 0.17) against BF16's 0.0045 (max 0.058).
Tensor names, shapes and layout (including llama's permuted q/k rows)
and every metadata key are kept; only the tensor types and ``general.file_type`` change. 1-D
tensors (norms) stay F32.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from spadework.errors import ConfigError, PolicyError
from spadework.settings.run import WEIGHTS

#: Weight types a copy can be made in, and their llama.cpp ``general.file_type`` codes.
FILE_TYPES = {"f16": 1, "bf16": 32, "q8_0": 7}
#: The ``weights`` whose file llama.cpp runs through quantised kernels (probed before loading).
QUANTISED = ("gguf", "q8_0")


def dequantised_copy(src: str | Path, dst: str | Path, dtype: str = "f16") -> Path:
    """Write ``src`` with every quantised 2-D tensor dequantised to ``dtype`` into ``dst``
    (atomically: a half-written copy is never left under that name). Returns ``dst``."""
    import gguf
    import numpy as np

    if dtype not in FILE_TYPES:
        raise PolicyError(f"a GGUF copy can be {' or '.join(FILE_TYPES)}, not {dtype!r}")
    try:
        reader = gguf.GGUFReader(str(src))
    except (OSError, ValueError) as e:
        raise PolicyError(f"cannot read {src} as GGUF: {e}") from e
    dst = Path(dst)
    tmp = dst.with_name(f"{dst.name}.{os.getpid()}.tmp")  # two processes may race: both rename
    writer = gguf.GGUFWriter(str(tmp), str(reader.fields["general.architecture"].contents()))
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # written by the writer itself
        value = FILE_TYPES[dtype] if name == "general.file_type" else field.contents()
        writer.add_key_value(name, value, field.types[0],
                             field.types[1] if len(field.types) > 1 else None)
    q = gguf.GGMLQuantizationType
    for t in reader.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        if data.ndim == 1 or t.tensor_type == q.F32:
            writer.add_tensor(t.name, data)
        elif dtype == "f16":
            writer.add_tensor(t.name, data.astype(np.float16))
        else:
            kind = q.BF16 if dtype == "bf16" else q.Q8_0
            writer.add_tensor(t.name, gguf.quants.quantize(data, kind), raw_dtype=kind)
    return finish_gguf(writer, tmp, dst)


def finish_gguf(writer: Any, tmp: Path, dst: Path) -> Path:
    """Write a ``gguf.GGUFWriter`` opened on ``tmp`` (header, metadata, tensors), close it, and
    rename ``tmp`` to ``dst``, so that ``dst`` is whole or absent; returns ``dst``."""
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    tmp.replace(dst)
    return dst


#: A child that loads a GGUF with logits for every token (what logprobs need) and decodes a
#: few tokens; it dies by a signal where this machine's llama.cpp build cannot run the file's
#: kernels. Its second argument, "plain", loads without llama.cpp's extra buffer types
#: (``use_extra_bufts``: the weights repacked for AMX tiles or wider SIMD blocks).
_PROBE = """
import sys
import llama_cpp
import llama_cpp.llama_cpp as lib  # where Llama() takes its model parameters from
default_params = lib.llama_model_default_params
def params():
    p = default_params()
    p.use_extra_bufts = sys.argv[2] != "plain"
    return p
lib.llama_model_default_params = params
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, logits_all=True,
                      verbose=False)
llm("Say hi.", max_tokens=3, logprobs=1, temperature=0.0)
print("ok")
"""

#: What a probe's marker holds when the file runs only without extra buffer types.
PLAIN = "plain"


def _marker(gguf: Path) -> Path:
    """Where :func:`check_runs` remembers its answer for ``gguf``: beside it, named after the
    file's size and mtime and this llama.cpp build."""
    import hashlib

    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    build = hashlib.sha256(b"".join(p.read_bytes()[:1 << 16] + str(p.stat().st_size).encode()
                                    for p in sorted(lib.glob("*.so")))).hexdigest()[:12]
    stat = gguf.stat()
    return gguf.with_name(f".{gguf.name}.runs-{stat.st_size}-{int(stat.st_mtime)}-{build}")


def _probe(gguf: Path, buffers: str, timeout: float) -> str | None:
    """None when a child decoded from ``gguf`` (``buffers``: "extra" or "plain"), else how it
    failed; PolicyError when it ran past ``timeout``."""
    import subprocess
    import sys

    try:
        out = subprocess.run([sys.executable, "-c", _PROBE, str(gguf), buffers],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise PolicyError(f"llama.cpp did not decode 3 tokens from {gguf.name} within "
                          f"{timeout:g} s; use weights='bf16' (the 16-bit copy)") from e
    if out.returncode == 0 and "ok" in out.stdout:
        return None
    last = (out.stderr.strip().splitlines() or ["no message"])[-1][-300:]
    return (f"died by signal {-out.returncode}" if out.returncode < 0
            else f"exited with {out.returncode} ({last})")


def check_runs(gguf: Path, timeout: float = 300.0) -> Path:
    """``gguf`` once a child process has decoded a few tokens from it with logprobs, else
    PolicyError saying why and what to use instead. The answer is remembered beside the file
    (per llama.cpp build), so the probe runs once; :func:`extra_buffers` reads it.

    Why: quantised kernels are compiled for the CPU they were built on (pip builds llama.cpp
    with ``-march=native`` and caches the wheel), and on one machine serving the default
    model's Q4_1 file killed the server on its first request (a general protection fault with
    logprobs, an illegal instruction without), while the 16-bit copy answered both. A crash in
    this process would take the run with it, so the quantised path is tried in a child first.
    On a Sapphire Rapids machine (2026-12-06) a build with AMX died on its first quantised
    product (``tilezero``, SIGILL: the CPU lists AMX, but the machine gives a process no tile
    state), through llama.cpp's extra buffer types, which repack quantised weights for AMX; the
    same file decoded loaded without them. So a child that dies by a signal is followed by one
    that loads without extra buffers, and where that one decodes, the file is loaded so.
    """
    marker = _marker(gguf)
    if marker.is_file():
        return gguf
    failed = _probe(gguf, "extra", timeout)
    if failed is not None and failed.startswith("died by signal"):
        if _probe(gguf, PLAIN, timeout) is None:
            marker.write_text(PLAIN)
            return gguf
    if failed is not None:
        raise PolicyError(f"this machine's llama.cpp build cannot run {gguf.name}: a probe that "
                          f"decoded a few tokens from it {failed}. Use weights='bf16' or 'f16' "
                          "(a 16-bit copy, the default), or rebuild llama-cpp-python for this "
                          "CPU (pip install --no-cache-dir --force-reinstall llama-cpp-python)")
    marker.touch()
    return gguf


def extra_buffers(gguf: Path) -> bool:
    """Whether llama.cpp may load ``gguf`` with its extra buffer types: False only where
    :func:`check_runs` found that this build runs the file without them and not with them."""
    marker = _marker(gguf)
    return not (marker.is_file() and marker.read_text().strip() == PLAIN)


def weights_file(gguf: Path, weights: str) -> Path:
    """The file to load for ``weights``: ``gguf`` itself, or its 16-bit or 8-bit copy (made on
    first use; named after the source's size and mtime, so a re-pulled source gets a fresh
    copy). A quantised file (``gguf``, ``q8_0``) is returned once :func:`check_runs` has seen
    this machine's llama.cpp decode from it."""
    if weights not in WEIGHTS:
        raise ConfigError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    if not gguf.is_file():
        raise PolicyError(f"no GGUF file at {gguf}")
    if weights == "gguf":
        return check_runs(gguf)
    stat = gguf.stat()
    copy = gguf.with_name(f"{gguf.stem}.{weights}-{stat.st_size}-{int(stat.st_mtime)}.gguf")
    copy = copy if copy.is_file() else dequantised_copy(gguf, copy, weights)
    return check_runs(copy) if weights in QUANTISED else copy

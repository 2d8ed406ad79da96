"""A 16-bit copy of a quantised GGUF, made once, for llama.cpp to sample from.

Why: llama.cpp multiplies Q4_1 weights by activations it first rounds to 8 bits (Q8_1), one
matrix-vector product per row of a batch; on the machines this project targets that costs about
0.1 nats of noise per sampled token against the learner and gains nothing from batching. The
same weights, dequantised (exactly what the learner's fp32 copy holds) and stored as BF16 (the
default; AVX512-BF16 kernels where the CPU has them) or F16, run through llama.cpp's 16-bit
matrix-matrix kernels: a batch of 16 rows is faster, and sampler and learner agree far more
closely (figures in :mod:`spadework.policy.llamacpp` and ``tests/policy/test_llamacpp.py``).

The copy is made once from the verified GGUF and never changes afterwards: LoRA updates are
applied on top of it at run time (:mod:`spadework.policy.gguf_lora`), nothing is re-quantised,
so the base cannot drift. Tensor names, shapes and layout (including llama's permuted q/k rows)
and every metadata key are kept; only the tensor types and ``general.file_type`` change. 1-D
tensors (norms) stay F32.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from spadework.errors import ConfigError, PolicyError

#: Weight types a copy can be made in, and their llama.cpp ``general.file_type`` codes.
FILE_TYPES = {"f16": 1, "bf16": 32}


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
            writer.add_tensor(t.name, gguf.quants.quantize(data, q.BF16), raw_dtype=q.BF16)
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


WEIGHTS = ("f16", "bf16", "gguf")


def weights_file(gguf: Path, weights: str) -> Path:
    """The file to load for ``weights``: ``gguf`` itself, or its 16-bit copy (made on first
    use; named after the source's size and mtime, so a re-pulled source gets a fresh copy)."""
    if weights not in WEIGHTS:
        raise ConfigError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    if weights == "gguf":
        return gguf
    if not gguf.is_file():
        raise PolicyError(f"no GGUF file at {gguf}")
    stat = gguf.stat()
    copy = gguf.with_name(f"{gguf.stem}.{weights}-{stat.st_size}-{int(stat.st_mtime)}.gguf")
    return copy if copy.is_file() else dequantised_copy(gguf, copy, weights)

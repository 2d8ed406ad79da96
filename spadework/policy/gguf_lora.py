"""A peft LoRA adapter, written as a llama.cpp GGUF adapter for the quantised base it was
trained on.

The learner trains LoRA on the fp32 transformers copy that the registry dequantised from the
GGUF; llama.cpp applies a GGUF adapter on top of that same, unchanged quantised base (``y = W x +
s * B (A x)``). Nothing is merged and nothing is re-quantised, so a small update never rounds
away and the base never drifts.

The format (what llama.cpp's adapter loader reads): ``general.type = "adapter"``,
``general.architecture`` equal to the base's, ``adapter.type = "lora"``, ``adapter.lora.alpha``,
and for each adapted weight ``W`` of the base, called ``NAME.weight`` there, two tensors
``NAME.weight.lora_a`` (peft's ``lora_A``, ``[r, in]``) and ``NAME.weight.lora_b`` (peft's
``lora_B``, ``[out, r]``). llama.cpp scales by ``adapter_scale * alpha / r`` when ``alpha`` is set
and by ``adapter_scale`` alone when it is 0. We write ``alpha = 0`` and fold peft's own scaling
(``lora_alpha / r``, or ``/ sqrt(r)`` with rsLoRA, per module) into ``lora_b``, so any peft
scaling, per-module patterns included, comes out exact with ``adapter_scale = 1``.

Two layout facts the conversion must honour:

- llama.cpp's ``llama`` architecture stores ``attn_q`` / ``attn_k`` with their rows permuted for
  its rope kernel (transformers undoes that permutation when it loads the GGUF). ``lora_b`` maps
  into the rows, so its rows take the same permutation; ``lora_a`` is unchanged. Qwen2 stores
  them unpermuted.
- Tensors are written in F32: the adapter is a few MB, and F16 would round the small updates
  this module exists to carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadework.errors import PolicyError
from spadework.policy.gguf_copy import finish_gguf

#: GGUF architectures whose adapters this module writes, and whether q/k rows are permuted.
PERMUTES_QK = {"llama": True, "qwen2": False}


@dataclass(frozen=True)
class LoraPair:
    """One adapted linear layer: ``a`` is ``[r, in]``, ``b`` is ``[out, r]`` (float32 numpy),
    ``scaling`` the factor peft multiplies ``b @ a`` by."""

    a: Any
    b: Any
    scaling: float


@dataclass(frozen=True)
class BaseShape:
    """What the conversion needs to know about the base model (read from its GGUF)."""

    arch: str
    n_blocks: int
    n_head: int
    n_head_kv: int

    @classmethod
    def from_gguf(cls, path: str | Path) -> BaseShape:
        """Read architecture, block count and head counts from a GGUF file's metadata."""
        import gguf

        try:
            reader = gguf.GGUFReader(str(path))
        except (OSError, ValueError) as e:
            raise PolicyError(f"cannot read GGUF metadata from {path}: {e}") from e

        def field(key: str) -> Any:
            if key not in reader.fields:
                raise PolicyError(f"{path} has no {key} in its metadata")
            return reader.fields[key].contents()

        arch = str(field("general.architecture"))
        return cls(arch=arch, n_blocks=int(field(f"{arch}.block_count")),
                   n_head=int(field(f"{arch}.attention.head_count")),
                   n_head_kv=int(field(f"{arch}.attention.head_count_kv")))


def permute_rows(b: Any, n_head: int) -> Any:
    """The row permutation llama.cpp's ``llama`` conversion applies to ``attn_q`` / ``attn_k``:
    within each head, the two rope halves are interleaved.

    >>> import numpy as np
    >>> permute_rows(np.arange(8).reshape(8, 1), 2)[:, 0].tolist()
    [0, 2, 1, 3, 4, 6, 5, 7]
    """
    rows = b.shape[0]
    if rows % (2 * n_head):
        raise PolicyError(f"{rows} rows do not split into {n_head} heads of two rope halves")
    return (b.reshape(n_head, 2, rows // n_head // 2, *b.shape[1:])
            .swapaxes(1, 2).reshape(b.shape))


def lora_pairs(model: Any, adapter: str = "default") -> dict[str, LoraPair]:
    """Every LoRA layer of a peft model, by the base model's module name
    (``model.layers.0.self_attn.q_proj``), as float32 numpy copies.

    Raises ``PolicyError`` for a model without LoRA layers or with a variant llama.cpp cannot
    apply as ``B (A x)`` (DoRA).
    """
    from peft.tuners.lora import LoraLayer

    out: dict[str, LoraPair] = {}
    for name, module in model.named_modules():
        if not isinstance(module, LoraLayer) or adapter not in module.lora_A:
            continue
        if module.use_dora.get(adapter):
            raise PolicyError(f"{name} uses DoRA, which llama.cpp adapters cannot express; "
                              "train plain LoRA (use_dora=False)")
        base = name.removeprefix("base_model.model.")
        out[base] = LoraPair(
            a=module.lora_A[adapter].weight.detach().float().cpu().numpy().copy(),
            b=module.lora_B[adapter].weight.detach().float().cpu().numpy().copy(),
            scaling=float(module.scaling[adapter]),
        )
    if not out:
        raise PolicyError(f"the model has no LoRA layers for adapter {adapter!r}; "
                          "is it a peft model built by the Learner with lora=True?")
    return out


def write_adapter(path: str | Path, pairs: Mapping[str, LoraPair], base: BaseShape) -> Path:
    """Write ``pairs`` as a GGUF LoRA adapter for ``base`` (see the module docstring).

    The file is written to a temporary name and renamed, so a reader never sees half of it.
    """
    import gguf
    import numpy as np

    if base.arch not in PERMUTES_QK:
        raise PolicyError(f"writing adapters for architecture {base.arch!r} is not supported "
                          f"(supported: {', '.join(PERMUTES_QK)})")
    arch_enum = next((a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == base.arch), None)
    names = gguf.get_tensor_name_map(arch_enum, base.n_blocks)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), base.arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, 0.0)  # scaling is folded into lora_b
    for module, pair in sorted(pairs.items()):
        target = names.get_name(module + ".weight", try_suffixes=(".weight",))
        if target is None:
            raise PolicyError(f"no GGUF tensor corresponds to {module}; LoRA on it cannot be "
                              "applied by llama.cpp (adapt attention and MLP projections only)")
        b = np.ascontiguousarray(pair.b, dtype=np.float32) * np.float32(pair.scaling)
        if PERMUTES_QK[base.arch] and target.endswith(("attn_q.weight", "attn_k.weight")):
            heads = base.n_head if target.endswith("attn_q.weight") else base.n_head_kv
            b = permute_rows(b, heads)
        writer.add_tensor(target + ".lora_a", np.ascontiguousarray(pair.a, dtype=np.float32))
        writer.add_tensor(target + ".lora_b", np.ascontiguousarray(b))
    return finish_gguf(writer, tmp, path)

"""Loading a registry model into the llama.cpp engine: its GGUF (or the 16-bit or 8-bit copy of
its weights made beside it), and the tokenizer and generation config of its converted folder."""

from __future__ import annotations

from pathlib import Path

from spadework.errors import PolicyError
from spadework.policy.gguf_copy import weights_file
from spadework.policy.llamacpp import LlamaCppPolicy
from spadework.policy.registry import DEFAULT_MODEL, known_models, model_dir, resolve_model


def load_llamacpp_policy(
    model: str | Path | None = None, *, max_batch_size: int = 16,
    context_length: int | None = None, threads: int | None = None, kv_type: str = "f16",
    flash_attn: bool = True, weights: str = "bf16", gguf: str | Path | None = None,
    cache_dir: Path | None = None,
) -> LlamaCppPolicy:
    """A ``LlamaCppPolicy`` for a registry model (its pulled GGUF and converted tokenizer).

    ``model`` is a registry name (default: the default model; pulled first if licensed) or a
    converted folder; a folder needs ``gguf=`` naming the GGUF it was converted from (a hub id
    has no GGUF here). Nothing is downloaded except a licensed registry pull.

    ``weights``: ``"bf16"`` (default) or ``"f16"`` sample from a 16-bit copy of the GGUF's
    dequantised weights, made once beside it (:mod:`spadework.policy.gguf_copy`: faster in
    batches and much closer to the learner; BF16 is the faster of the two, F16 the closer);
    ``"q8_0"`` from an 8-bit copy of them (half the memory of BF16; on the 0.5B it decodes
    small batches faster but prefills 1.8x slower, and drifts about 3x further from the
    learner, ``benchmarks/drift.py``); ``"gguf"`` samples from the quantised file itself. A
    quantised file is loaded without llama.cpp's extra buffer types where this machine runs it
    only so (:func:`spadework.policy.gguf_copy.check_runs`). ``flash_attn``: attention as
    flash attention (default) or as matrix products (``RunConfig.flash_attn``, which is faster
    depends on the model and the work: docs/engine.md).
    """
    from transformers import AutoTokenizer, GenerationConfig

    path, local_only = resolve_model(model, cache_dir=cache_dir)
    if gguf is None:
        name = str(model) if model is not None else DEFAULT_MODEL
        if name not in known_models():
            raise PolicyError(f"the llama.cpp backend needs a GGUF: {model!r} is not a registry "
                              "model, so pass gguf= (the file the folder was converted from)")
        gguf = model_dir(name, cache_dir) / f"{name}.gguf"
    gguf = weights_file(Path(gguf), weights)
    if not local_only:
        raise PolicyError(f"the llama.cpp backend runs offline models only, not hub id {model!r}")
    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        gen = GenerationConfig.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as e:
        raise PolicyError(f"cannot load the tokenizer of {model!r} from {path}: {e}") from e
    eos = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    return LlamaCppPolicy(gguf, tok, max_batch_size=max_batch_size, context_length=context_length,
                          threads=threads, kv_type=kv_type, flash_attn=flash_attn,
                          eos_token_ids=[i for i in eos if i is not None], hf_dir=path)

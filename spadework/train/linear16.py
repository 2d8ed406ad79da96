"""The decoder's linear layers multiplied in bfloat16, everything between them in fp32.

``TrainConfig.compute_dtype = "bfloat16-linear"`` (what ``auto`` picks on a CPU with native
bfloat16 arithmetic): inside a learner's pass each ``nn.Linear`` of the decoder (not the LM head,
not a LoRA adapter's own small matrices) rounds its input to bfloat16, multiplies by a bfloat16
copy of its weight with fp32 accumulation, and hands back fp32 (its bias added in fp32). Norms,
activations, residual additions, attention and the LoRA path stay in fp32. That is the rounding
llama.cpp's own CPU matmul applies to a BF16 model (its activations are converted to the
weights' type for the product, the result is fp32), so the learner stays as close to the sampler
as fp32 does, where ``torch.autocast`` (``compute_dtype = "bfloat16"``) also rounds every
activation between the products and drifted from the sampler after the first updates.

Measured on the main job's own step (cpu-qwen, run k, iteration 2: 554 trained tokens at the
weights the engine sampled them with; ``benchmarks/drift.py --run``), the gap between the
learner's and the sampler's logprob per trained token, mean / max: fp32 0.0020 / 0.033, this
0.0025 / 0.080, autocast 0.0152 / 0.347 (ratio up to 1.40). Its step takes 1.26x less than
fp32's where autocast's takes 1.37x less (eight samples of an iteration-0 batch).

Frozen weights get their bfloat16 copy once per :class:`Linear16` context (a step, a scoring
pass), not once per call: the copies (2 bytes a weight: 0.7 GB for the 0.5B's decoder) live only
while the context is open. A trainable weight (a full fine-tune) is cast at each call, so its
gradient flows back to the fp32 master. Outside a context the layers are plain fp32 ``Linear``
(generation from the learner's own module, checkpoints and adapters are untouched).
"""

from __future__ import annotations

import functools
from typing import Any


class Linear16:
    """Patches the decoder's linear layers of ``model`` once; ``with`` an instance, they
    multiply in bfloat16 (see the module docstring). Re-entrant: nested contexts share the
    outer one's copies."""

    def __init__(self, model: Any) -> None:
        import torch

        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        self.layers = [m for name, m in model.named_modules()
                       if isinstance(m, torch.nn.Linear) and m is not head
                       and "lora_" not in name and not name.endswith("lm_head")]
        self._copies: dict[int, Any] = {}
        self._depth = 0
        for m in self.layers:
            m.forward = functools.partial(_forward, m, self)

    def __enter__(self) -> Linear16:
        import torch

        if self._depth == 0:
            with torch.no_grad():
                self._copies = {id(m): m.weight.detach().to(torch.bfloat16) for m in self.layers
                                if not m.weight.requires_grad}
        self._depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._copies = {}

    @property
    def active(self) -> bool:
        return self._depth > 0


def _forward(module: Any, state: Linear16, x: Any) -> Any:
    import torch
    import torch.nn.functional as F

    if not state.active or x.dtype != torch.float32:
        return F.linear(x, module.weight, module.bias)
    weight = state._copies.get(id(module))
    if weight is None:
        weight = module.weight.to(torch.bfloat16)  # trainable: the cast carries the gradient back
    y = F.linear(x.to(torch.bfloat16), weight).to(torch.float32)
    return y if module.bias is None else y + module.bias

"""Training: batch assembly for both roles, the GRPO learner, checkpoints and weight sync.

Heavy imports (torch, peft) happen inside the functions that need them; importing this package
is cheap.
"""

from spadework.train.batch import (
    Assembly,
    Sample,
    agent_assembly,
    agent_samples,
    attempt_key,
    designer_assembly,
    designer_samples,
    reference_designer_scale,
)
from spadework.train.grpo import Learner, TrainConfig
from spadework.train.sync import (
    InProcessSync,
    LlamaCppLoraSync,
    VLLMLoraSync,
    WeightSync,
    weight_sync_for,
)

__all__ = [
    "Assembly", "InProcessSync", "Learner", "LlamaCppLoraSync", "Sample", "TrainConfig",
    "VLLMLoraSync", "WeightSync", "agent_assembly", "agent_samples", "attempt_key", "designer_assembly", "designer_samples",
    "reference_designer_scale", "weight_sync_for",
]

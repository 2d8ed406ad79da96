"""Training: the samples of a batch, the GRPO learner, checkpoints and weight sync.

Designer samples are built by :mod:`spadework.designer.credit`. Heavy imports (torch, peft)
happen inside the functions that need them; importing this package is cheap.
"""

from spadework.policy.backends import weight_sync_for
from spadework.policy.sync import InProcessSync, LlamaCppLoraSync, VLLMLoraSync, WeightSync
from spadework.train.batch import Assembly, Sample, agent_assembly
from spadework.train.grpo import Learner, TrainConfig

__all__ = [
    "Assembly", "InProcessSync", "Learner", "LlamaCppLoraSync", "Sample", "TrainConfig",
    "VLLMLoraSync", "WeightSync", "agent_assembly", "weight_sync_for",
]

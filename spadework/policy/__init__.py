"""Models: the ``Policy`` protocol and its backends (transformers, OpenAI-compatible servers).

Only the light records are re-exported here; backends import torch or open sockets, so import
them from their modules (``spadework.policy.hf``, ``spadework.policy.openai``).
"""

from spadework.policy.base import (
    Completion,
    Conversation,
    Policy,
    SamplingParams,
    as_conversation,
)
from spadework.policy.registry import DEFAULT_MODEL

__all__ = [
    "DEFAULT_MODEL", "Completion", "Conversation", "Policy", "SamplingParams", "as_conversation",
]

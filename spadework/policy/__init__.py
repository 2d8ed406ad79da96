"""Models: the ``Policy`` protocol and its backends (transformers, llama.cpp, OpenAI-compatible
servers).

Only the light records and the factory are re-exported here; backends import torch, load shared
libraries or open sockets, so they are imported by ``load_policy`` when called, or from their
modules (``spadework.policy.hf``, ``spadework.policy.llamacpp``, ``spadework.policy.openai``).
"""

from spadework.policy.base import Completion, Conversation, Policy, SamplingParams, as_conversation
from spadework.policy.load import learner_policy, load_policy
from spadework.policy.registry import DEFAULT_MODEL
from spadework.settings.run import BACKENDS

__all__ = [
    "BACKENDS", "DEFAULT_MODEL", "Completion", "Conversation", "Policy", "SamplingParams",
    "as_conversation", "learner_policy", "load_policy",
]

"""The designer: a model writes environments from documents, the checker judges them, the
archive keeps every attempt, and one module decides what each attempt earns.

- :mod:`~spadework.designer.prompts`: the system prompt, task parts, fresh-design, mutation
  and repair prompts, and the guide to subclassing ``ToolEnv``;
- :mod:`~spadework.designer.judge`: screening, extraction and checking of one reply;
- :mod:`~spadework.designer.run`: one design call (:func:`design_environments`): slots, batched
  attempts, repair turns, archiving;
- :mod:`~spadework.designer.parents`: parent choice and direction for mutation slots;
- :mod:`~spadework.designer.credit`: every designer crediting rule.
"""

from spadework.designer.credit import (
    credit_attempts,
    designer_assembly,
    designer_reward,
    env_credit,
    is_repair,
    reference_designer_scale,
    rejection_progress,
)
from spadework.designer.judge import REPLY_STAGE, VALIDATION_ORDER, Judgement, judge_reply, screen_reply
from spadework.designer.parents import Parent, choose_parent, mutation_direction, wants_mutation
from spadework.designer.prompts import (
    DIFFICULTIES,
    MemoryExample,
    build_design_prompt,
    build_mutation_prompt,
    repair_messages,
)
from spadework.designer.run import DesignConfig, DesignResult, DesignSummary, design_environments, summarize

__all__ = [
    "DIFFICULTIES", "REPLY_STAGE", "VALIDATION_ORDER", "DesignConfig", "DesignResult",
    "DesignSummary", "Judgement", "MemoryExample", "Parent", "build_design_prompt",
    "build_mutation_prompt", "choose_parent", "credit_attempts", "design_environments",
    "designer_assembly", "designer_reward", "env_credit", "is_repair", "judge_reply",
    "mutation_direction", "reference_designer_scale", "rejection_progress", "repair_messages",
    "screen_reply", "summarize", "wants_mutation",
]

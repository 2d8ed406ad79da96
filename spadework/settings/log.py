"""``[log]``: where a run's figures go besides metrics.jsonl (TensorBoard, Weights & Biases)."""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError


@dataclass(frozen=True)
class LogConfig:
    """The ``[log]`` section.

    ``tensorboard``: write TensorBoard event files to ``RUN_DIR/tensorboard``. ``wandb``: log to
    Weights & Biases, in ``wandb_mode`` (``offline``, the default: nothing leaves the machine;
    ``online`` uploads as it goes) under project ``wandb_project``.
    """

    tensorboard: bool = False
    wandb: bool = False
    wandb_project: str = "spadework"
    wandb_mode: str = "offline"

    def __post_init__(self) -> None:
        if self.wandb_mode not in ("offline", "online"):
            raise ConfigError(f"[log] wandb_mode must be offline or online, got {self.wandb_mode!r}")
        if not self.wandb_project:
            raise ConfigError("[log] wandb_project must not be empty")

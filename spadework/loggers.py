"""Experiment loggers: each iteration's metrics also go to TensorBoard and Weights & Biases.

Off unless the ``[log]`` section asks; neither package is required by spadework. A logger that
is asked for but not installed is a :class:`ConfigError` when the run starts (before a model is
loaded), not a silent no-op. What is logged: every numeric leaf of the iteration's
``metrics.jsonl`` line under its path with ``/`` separators (``agent_return/no_hint``,
``train/importance_ratio/agent/mean``), at step = iteration; lists (histograms, intervals) and
the per-environment table are left to the report (``spadework report``).

TensorBoard event files go to ``RUN_DIR/tensorboard`` (``tensorboard --logdir RUN_DIR``),
written by ``torch.utils.tensorboard`` (needs the ``tensorboard`` package) or by ``tensorboardX``.
W&B runs in offline mode by default (``RUN_DIR/wandb``; ``wandb sync`` uploads later), with the
run's config, resumed under the same id when the run is resumed.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from spadework.errors import ConfigError
from spadework.settings.log import LogConfig

#: Keys of a metrics line that are not curves (high-cardinality tables, labels).
SKIPPED = ("per_env", "preset", "eval/dir")


def scalars(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Every numeric leaf of a metrics line by its ``/``-joined path (booleans, None, strings,
    lists and the :data:`SKIPPED` keys left out).

    >>> scalars({"iteration": 3, "agent_return": {"hint": 0.5, "no_hint": None},
    ...          "regenerated": True, "win_rate_histogram": [1, 2], "per_env": {"ab": {"r": 1}}})
    {'iteration': 3.0, 'agent_return/hint': 0.5}
    """
    out: dict[str, float] = {}
    for k, v in metrics.items():
        path = f"{prefix}{k}"
        if path in SKIPPED:
            continue
        if isinstance(v, Mapping):
            out.update(scalars(v, path + "/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[path] = float(v)
    return out


class MetricsLogger(Protocol):
    """Takes one iteration's metrics line at a time; ``close`` flushes."""

    def log(self, iteration: int, metrics: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_available(cfg: LogConfig) -> None:
    """Refuse, with what to install, a logger the config asks for whose package is missing."""
    if cfg.tensorboard and not (_installed("tensorboard") or _installed("tensorboardX")):
        raise ConfigError("[log] tensorboard = true needs the tensorboard package (pip install "
                          "tensorboard) or tensorboardX; or set it to false")
    if cfg.wandb and not _installed("wandb"):
        raise ConfigError("[log] wandb = true needs the wandb package (pip install wandb); or set it "
                          "to false")


class TensorBoardLogger:
    """Scalars to TensorBoard event files under ``log_dir``."""

    def __init__(self, log_dir: Path) -> None:
        if _installed("tensorboard") and _installed("torch"):
            from torch.utils.tensorboard import SummaryWriter
        else:
            from tensorboardX import SummaryWriter
        self._writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, iteration: int, metrics: Mapping[str, Any]) -> None:
        for tag, value in scalars(metrics).items():
            if tag != "iteration":
                self._writer.add_scalar(tag, value, iteration)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class WandbLogger:
    """One W&B run per run directory (its id derives from the directory, so a resume continues it)."""

    def __init__(self, cfg: LogConfig, run_dir: Path, config: Mapping[str, Any]) -> None:
        import wandb

        run_id = "spadework-" + hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:12]
        self._run = wandb.init(project=cfg.wandb_project, mode=cfg.wandb_mode, dir=str(run_dir),
                               name=run_dir.name, id=run_id, resume="allow", config=dict(config))

    def log(self, iteration: int, metrics: Mapping[str, Any]) -> None:
        self._run.log({k: v for k, v in scalars(metrics).items() if k != "iteration"}, step=iteration)

    def close(self) -> None:
        self._run.finish()


def open_loggers(cfg: LogConfig, run_dir: str | Path, config: Mapping[str, Any]) -> list[MetricsLogger]:
    """The loggers ``cfg`` asks for (none by default)."""
    check_available(cfg)
    run_dir = Path(run_dir)
    out: list[MetricsLogger] = []
    if cfg.tensorboard:
        out.append(TensorBoardLogger(run_dir / "tensorboard"))
    if cfg.wandb:
        out.append(WandbLogger(cfg, run_dir, config))
    return out

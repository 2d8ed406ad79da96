"""Configuration: small, nested, validated once at the edge.

Only this module and ``cli.py`` read ``os.environ``. Sections (``SandboxConfig``, ``PlayConfig``,
...) are frozen dataclasses whose ``__post_init__`` says what to set when a value is wrong.
"""

from __future__ import annotations

import os
from pathlib import Path


def home_dir() -> Path:
    """Where spadework keeps caches (models, corpus): ``$SPADEWORK_HOME``, else ``~/.cache/spadework``."""
    env = os.environ.get("SPADEWORK_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "spadework"


def model_cache_dir() -> Path:
    """Where pulled models live: ``home_dir() / "models"`` (see ``spadework.policy.registry``)."""
    return home_dir() / "models"

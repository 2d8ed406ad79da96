"""Where spadework keeps its caches: a leaf module that anything may import.

It reads one environment variable, ``SPADEWORK_HOME``, and nothing else; with ``config.py`` and
the ``spadework.cli`` package it is the only module that reads the process environment.
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

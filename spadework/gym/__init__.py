"""spadework environments as Gymnasium environments (the ``gym`` extra: ``pip install
'spadework[gym]'``).

``make(source, **kwargs)`` returns a :class:`SpadeworkEnv` (a ``gymnasium.Env``) for a starter
environment by name (``make("maze")``), a module file (``make("my_game.py")``) or an archived
environment (``make("runs/a/archive.sqlite", env_id="3f2a")``); its code runs only in the
sandbox (see :mod:`spadework.gym.env` for what an instance costs and how to share a fork
server). The starters are also registered with Gymnasium as ``spadework/<Name>-v0``
(``spadework/Maze-v0``, ``spadework/ToolCalendar-v0``), never on import: call
:func:`register_envs`, or name the registering module in the id, Gymnasium's own form,
``gymnasium.make("spadework.gym.envs:spadework/Maze-v0")``; gymnasium releases that still load
plugins (0.26-0.29) call :func:`register_envs` through the ``gymnasium.envs`` entry point that
the package declares.
"""

from __future__ import annotations

try:
    import gymnasium  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without the extra
    from spadework.errors import ConfigError

    raise ConfigError("spadework.gym needs gymnasium: pip install 'spadework[gym]'") from e

from spadework.gym.env import MAX_ACTION_CHARS, SpadeworkEnv
from spadework.gym.registration import NAMESPACE, gym_id, register_envs
from spadework.gym.spaces import DEFAULT_CHARSET, text_space
from spadework.integrations.hosted import DEFAULT_MAX_TURNS, MAX_OBS_CHARS

__all__ = [
    "DEFAULT_CHARSET", "DEFAULT_MAX_TURNS", "MAX_ACTION_CHARS", "MAX_OBS_CHARS", "NAMESPACE",
    "SpadeworkEnv", "gym_id", "make", "register_envs", "text_space",
]


def make(source, **kwargs) -> SpadeworkEnv:
    """A sandboxed :class:`SpadeworkEnv` for ``source`` (see the module docstring); keyword
    arguments go to its constructor (``env_id``, ``max_turns``, ``sandbox``, ``limits``,
    ``charset``, ``max_obs_chars``, ``max_action_chars``, ``render_mode``, ``on_error``,
    ``allow_rejected``). Close it (or use it as a context manager) to free its processes."""
    return SpadeworkEnv(source, **kwargs)

"""Gymnasium ids for the starter library: ``spadework/<Name>-v0``, registered on request only.

Importing spadework registers nothing. :func:`register_envs` does, and is what Gymnasium calls:
releases with a plugin system (0.26-0.29) call it through the ``gymnasium.envs`` entry point in
spadework's package metadata; Gymnasium 1.x dropped plugins in favour of ids that name a module
to import first, which :mod:`spadework.gym.envs` is (``"spadework.gym.envs:spadework/Maze-v0"``).
Each id's entry point is the string ``"spadework.gym.env:SpadeworkEnv"``, so nothing is
imported or started until an environment is made.
"""

from __future__ import annotations

from spadework.library import starter_envs

#: The Gymnasium namespace of spadework's environments.
NAMESPACE = "spadework"
ENTRY_POINT = "spadework.gym.env:SpadeworkEnv"


def gym_id(starter: str) -> str:
    """The Gymnasium id of a starter environment.

    >>> gym_id("maze"), gym_id("tool_calendar")
    ('spadework/Maze-v0', 'spadework/ToolCalendar-v0')
    """
    return f"{NAMESPACE}/{''.join(part.capitalize() for part in starter.split('_'))}-v0"


def register_envs() -> list[str]:
    """Register every starter environment with Gymnasium (again is a no-op); their ids."""
    from gymnasium.envs.registration import register, registry

    ids = []
    for env in starter_envs():
        env_id = gym_id(env.name or "")
        if env_id not in registry:
            register(id=env_id, entry_point=ENTRY_POINT, kwargs={"source": env.name})
        ids.append(env_id)
    return ids

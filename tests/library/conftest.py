"""Fixtures for the starter-library tests: one parameter per starter game (see starter_helpers)."""

from __future__ import annotations

import pytest
from starter_helpers import load_class

from spadework.library import starter_envs
from spadework.types import EnvSource

GAMES = starter_envs("games")


@pytest.fixture(params=GAMES, ids=[g.name for g in GAMES])
def game(request) -> EnvSource:
    return request.param


@pytest.fixture
def env_class(game) -> type:
    return load_class(game)

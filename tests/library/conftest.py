"""Helpers for the starter-library tests.

The sandbox is not part of these tests, so the environments run in this process. That is safe
only because they are our own files, reviewed and shipped in the package; generated code never
runs this way. Each module is executed into a fresh, isolated module object that is not
registered in ``sys.modules``, so no test sees another's state.
"""

from __future__ import annotations

import importlib.util
import random
import re
import types

import pytest

from spadework.library import starter_envs
from spadework.types import EnvSource

GAMES = starter_envs("games")


def load_class(src: EnvSource) -> type:
    """Execute trusted starter source into an isolated module and return its environment class."""
    spec = importlib.util.spec_from_loader(f"starter_{src.name}", loader=None)
    module = importlib.util.module_from_spec(spec)
    assert isinstance(module, types.ModuleType)
    exec(compile(src.code, f"<starter {src.name}>", "exec"), module.__dict__)  # trusted: ours
    return getattr(module, src.class_name)


@pytest.fixture(params=GAMES, ids=[g.name for g in GAMES])
def game(request) -> EnvSource:
    return request.param


@pytest.fixture
def env_class(game) -> type:
    return load_class(game)


def as_actions(solution) -> list[str]:
    return [solution] if isinstance(solution, str) else list(solution)


def play(env, actions) -> tuple[list[tuple], bool]:
    """Step through actions until the episode ends; (step results, won)."""
    results = []
    for action in actions:
        result = env.step(action)
        results.append(result)
        _, reward, terminated, truncated, _ = result
        if terminated or truncated:
            return results, bool(terminated and reward > 0)
    return results, False


_WORD = re.compile(r"[A-Za-z]+|\d+")


def random_action(rng: random.Random, observation: str) -> str:
    """A random boxed reply in the spirit of the game: built from the observation's own words and
    numbers (so it often has the right shape), from small integers, or from direction words."""
    tokens = _WORD.findall(observation) or ["x"]
    numbers = [t for t in tokens if t.isdigit()] or ["1"]
    kind = rng.randrange(8)
    if kind == 0:
        body = str(rng.randint(0, 100))
    elif kind == 1:
        body = " ".join(rng.choice(numbers) for _ in range(rng.randint(1, 5)))
    elif kind == 2:
        body = " ".join(str(rng.randint(1, 9)) for _ in range(rng.randint(1, 6)))
    elif kind == 3:
        body = rng.choice(["up", "down", "left", "right"]) + rng.choice(["", f" {rng.randint(1, 4)}"])
    elif kind == 4:
        body = rng.choice(tokens) + " " + " ".join(rng.choice(numbers) for _ in range(rng.randint(1, 4)))
    elif kind == 5:
        body = f"{rng.choice(numbers)} {rng.choice('+-*/')} {rng.choice(numbers)}"
    elif kind == 6:
        body = f"{rng.choice(tokens)} {rng.choice(numbers)} {rng.choice(tokens)}"
    else:
        body = " ".join(rng.choice(tokens) for _ in range(rng.randint(1, 4)))
    return f"\\boxed{{{body}}}"

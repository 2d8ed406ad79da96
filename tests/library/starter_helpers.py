"""Helpers for the starter-library tests: loading trusted starter source, playing episodes,
random replies, and one random legal-move agent per game.

The sandbox is not part of these tests, so the environments run in this process. That is safe
only because they are our own files, reviewed and shipped in the package; generated code never
runs this way. Each module is executed into a fresh, isolated module object that is not
registered in ``sys.modules``, so no test sees another's state. (This module has a unique name
because test folders here are not packages: every folder's ``conftest`` shares one module name.)
"""

from __future__ import annotations

import random
import re
import sys
import types

import spadework.env.gameenv as gameenv
from spadework.types import EnvSource


def load_class(src: EnvSource) -> type:
    """Execute trusted starter source into an isolated module and return its environment class,
    with ``gameenv`` resolved to spadework's copy of the games kit (the import the sandbox
    provides to generated code)."""
    module = types.ModuleType(f"starter_{src.name}")
    saved = sys.modules.get("gameenv")
    sys.modules["gameenv"] = gameenv
    try:
        exec(compile(src.code, f"<starter {src.name}>", "exec"), module.__dict__)  # trusted: ours
    finally:
        if saved is None:
            del sys.modules["gameenv"]
        else:
            sys.modules["gameenv"] = saved
    return getattr(module, src.class_name)


def levels(env_class: type) -> range:
    """The levels a starter declares, 1 to LEVELS."""
    return range(1, getattr(env_class, "LEVELS", 1) + 1)


def top(env_class: type) -> int:
    """Its hardest level, where trivial play must fail."""
    return getattr(env_class, "LEVELS", 1)


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


# Random agents that only make legal moves. They know the rules (and read the visible state
# through the environment's attributes) but not the answer: a game passes when such an agent
# wins rarely. Every starter game needs one here, so that a new game cannot skip the check.

def _box(body: str) -> str:
    return "\\boxed{" + body + "}"


def nim(rng: random.Random, env) -> str:
    i = rng.choice([k for k, p in enumerate(env.piles) if p])
    return _box(f"{i + 1} {rng.randint(1, env.piles[i])}")


def mastermind(rng: random.Random, env) -> str:
    return _box(" ".join(rng.choice(env.colours) for _ in range(env.length)))


def coin_balance(rng: random.Random, env) -> str:
    if rng.random() < 0.8:
        k = rng.randint(1, env.n // 2)
        coins = rng.sample(env.coins, 2 * k)
        return _box(f"weigh {' '.join(map(str, coins[:k]))} vs {' '.join(map(str, coins[k:]))}")
    return _box(f"answer {rng.choice(env.coins)} {rng.choice(['heavy', 'light'])}")


def maze(rng: random.Random, env) -> str:
    r, c = env.pos  # an open direction when there is one (walking into a wall is legal too)
    steps = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    open_ = [d for d, (dr, dc) in steps.items() if env.grid[r + dr][c + dc] != "#"]
    return _box(f"{rng.choice(open_ or list(steps))} {rng.randint(1, 5)}")


def sliding_puzzle(rng: random.Random, env) -> str:
    return _box(str(rng.choice(env.movable())))  # a tile next to the empty square


def sequence(rng: random.Random, env) -> str:
    last, before = env.terms[env.known - 1], env.terms[env.known - 2]
    return _box(str(2 * last - before + rng.randint(-10, 10)))


def knapsack(rng: random.Random, env) -> str:
    return _box(" ".join(str(i + 1) for i in range(len(env.weights)) if rng.random() < 0.45))


def light_switches(rng: random.Random, env) -> str:
    if rng.random() < 0.8:
        return _box(f"toggle {rng.randint(1, env.n_switches)}")
    return _box("answer " + " ".join(str(rng.randint(1, env.n_switches)) for _ in env.names))


def countdown(rng: random.Random, env) -> str:
    if len(env.pool) < 2 or (env.history and rng.random() < 0.1):
        return _box("undo")
    a, b = rng.sample(env.pool, 2)
    return _box(f"{a} {rng.choice('+-*/')} {b}")


def cipher_machine(rng: random.Random, env) -> str:
    if rng.random() < 0.7:
        return _box("encode " + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)))
    word = env.challenge  # guess a simple transformation of the challenge word
    k = rng.randint(1, 25)
    guesses = [word[::-1], word[k % len(word):] + word[:k % len(word)],
               "".join(chr((ord(c) - 97 + k) % 26 + 97) for c in word)]
    return _box("answer " + rng.choice(guesses))


def delivery_route(rng: random.Random, env) -> str:
    order = list(range(1, env.stops + 1))
    rng.shuffle(order)
    return _box(" ".join(map(str, order)))


def garden_trial(rng: random.Random, env) -> str:
    n = len(env.treatments)
    if rng.random() < 0.8:
        return _box("test " + " ".join(rng.choice("01") for _ in range(n)))
    return _box("answer " + " ".join(str(rng.randint(-4, 9)) for _ in range(n)))


AGENTS = {f.__name__: f for f in (nim, mastermind, coin_balance, maze, sliding_puzzle, sequence,
                                  knapsack, light_switches, countdown, cipher_machine,
                                  delivery_route, garden_trial)}

"""Seeds derived from (run seed, ..., index): every random choice is reproducible.

Python's ``hash()`` is salted per process, so it is never used for seeds (the reference's hint
plays used it, which made them irreproducible).
"""

from __future__ import annotations

import hashlib
import random


def derive_seed(*parts: int | str) -> int:
    """A 63-bit seed from any parts, stable across processes and platforms.

    >>> derive_seed(0, "abc", 3) == derive_seed(0, "abc", 3)
    True
    >>> derive_seed(0, "abc", 3) != derive_seed(0, "abc", 4)
    True
    >>> derive_seed(1, 2)
    5246620512528340494
    """
    text = "\x1f".join(f"{type(p).__name__}:{p}" for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1


def derive_rng(*parts: int | str) -> random.Random:
    """A ``random.Random`` seeded by :func:`derive_seed` over the same parts."""
    return random.Random(derive_seed(*parts))


def episode_seed(run_seed: int, env_id: str, play_index: int) -> int:
    """The instance seed of play ``play_index`` of an environment: the same in both regret arms.

    Kept below 2**31 so that environments may pass it to any seeding API.

    >>> episode_seed(0, "ab" * 32, 0) == episode_seed(0, "ab" * 32, 0)
    True
    """
    return derive_seed(run_seed, env_id, play_index) % (2**31 - 1)

"""Episodes with their turns: written and read as a unit, keyed by (iteration, env, arm, play)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from spadework.archive import rows as R
from spadework.types import Episode

Exec = Callable[[str, Sequence[Any]], sqlite3.Cursor]
WriteMany = Callable[[str, Sequence[Sequence[Any]]], None]

_KEY = "iteration = ? AND env_id = ? AND arm = ? AND play_index = ?"


def write_episodes(exec_: Exec, write_many: WriteMany, iteration: int,
                   episodes: Sequence[Episode]) -> int:
    """Upsert episodes and replace their turns; the caller holds a transaction. Returns how many
    keys were new. Every episode is checked before anything is written."""
    for ep in episodes:
        R.check_episode(ep)
    updates = ", ".join(f"{c} = excluded.{c}" for c in R.EPISODE_COLUMNS[4:])
    upsert = (f"INSERT INTO episodes {R.placeholders(R.EPISODE_COLUMNS)} ON CONFLICT"
              f"(iteration, env_id, arm, play_index) DO UPDATE SET {updates}")
    new = 0
    for ep in episodes:
        head, turns = R.episode_rows(iteration, ep)
        key = head[:4]
        existed = exec_(f"SELECT 1 FROM episodes WHERE {_KEY}", key).fetchone() is not None
        new += not existed
        exec_(upsert, head)
        if existed:
            exec_(f"DELETE FROM turns WHERE {_KEY}", key)
        write_many(f"INSERT INTO turns {R.placeholders(R.TURN_COLUMNS)}", turns)
    return new


def read_episodes(exec_: Exec, iteration: int | None, env_id: str | None,
                  arm: str | None) -> list[Episode]:
    """Episodes matching every given filter, ordered by their key, each with all its turns."""
    where, params = [], []
    for col, val in (("iteration", iteration), ("env_id", env_id), ("arm", arm)):
        if val is not None:
            where.append(f"{col} = ?")
            params.append(val)
    cond = f" WHERE {' AND '.join(f'e.{w}' for w in where)}" if where else ""
    order = " ORDER BY iteration, env_id, arm, play_index"
    heads = exec_("SELECT * FROM episodes AS e" + cond + order, params).fetchall()
    turns = exec_(
        "SELECT t.* FROM turns AS t JOIN episodes AS e ON e.iteration = t.iteration AND "
        "e.env_id = t.env_id AND e.arm = t.arm AND e.play_index = t.play_index" + cond
        + " ORDER BY t.iteration, t.env_id, t.arm, t.play_index, t.turn_index", params,
    ).fetchall()
    by_key: dict[tuple, list[sqlite3.Row]] = {}
    for t in turns:
        by_key.setdefault((t["iteration"], t["env_id"], t["arm"], t["play_index"]), []).append(t)
    return [
        R.episode_from_rows(h, by_key.get((h["iteration"], h["env_id"], h["arm"], h["play_index"]), []))
        for h in heads
    ]

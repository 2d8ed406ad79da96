"""Named reads over the archive for the report, the run comparison, the loop and the commands.

Every SQL statement the package runs lives in :mod:`spadework.archive`; callers outside it read
through these functions (or :class:`~spadework.archive.store.Archive`'s own methods), so a change
of schema is made here and nowhere else. Each returns plain rows (``sqlite3.Row``, read by column
name) or plain Python values, reads only, and works on an archive opened read-only.
:meth:`Archive.query` stays for a user's own ad-hoc SQL.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spadework.archive.store import Archive

Row = sqlite3.Row


# -- environments ------------------------------------------------------------------------------

def env_row(archive: Archive, env_id: str) -> Row | None:
    """Every stored column of one environment (code, report, hint, document, lineage), or None."""
    rows = archive.query("SELECT * FROM envs WHERE env_id = ?", (env_id,))
    return rows[0] if rows else None


def env_table(archive: Archive) -> list[Row]:
    """One row per environment, in the order they were archived: id, class, name, setting,
    skill, origin, iteration, status, failed stage, parent, benchmarks (no code)."""
    return archive.query("SELECT env_id, class_name, name, setting, skill, origin, iteration, "
                         "status, failed_stage, parent_id, benchmarks FROM envs "
                         "ORDER BY iteration, created_at, env_id")


def children_counts(archive: Archive) -> dict[str, int]:
    """Parent id -> how many mutated children the archive holds of it."""
    return {r[0]: r[1] for r in archive.query(
        "SELECT parent_id, count(*) FROM envs WHERE parent_id IS NOT NULL GROUP BY parent_id")}


def children(archive: Archive, env_id: str) -> list[dict[str, Any]]:
    """The mutated children of ``env_id`` (id, class, status), in archive order."""
    return [dict(c) for c in archive.query(
        "SELECT env_id AS id, class_name AS cls, status FROM envs WHERE parent_id = ? "
        "ORDER BY iteration, created_at, env_id", (env_id,))]


def env_count(archive: Archive) -> int:
    """How many environments the archive holds, accepted or rejected."""
    return int(archive.query("SELECT count(*) FROM envs")[0][0])


def accepted_code_mentions(archive: Archive, text: str) -> bool:
    """Whether the code of some accepted environment contains ``text`` (``math_verify``: whether
    the sandbox must preload it)."""
    return bool(archive.query("SELECT 1 FROM envs WHERE status = 'accepted' AND "
                              "instr(code, ?) > 0 LIMIT 1", (text,)))


# -- play statistics ---------------------------------------------------------------------------

def all_env_stats(archive: Archive) -> dict[str, Row]:
    """env id -> its running statistics row (plays, wins, win rate, regret, last iteration)."""
    return {r["env_id"]: r for r in archive.query("SELECT * FROM env_stats")}


def play_history(archive: Archive, env_id: str) -> list[dict[str, Any]]:
    """Per iteration that played ``env_id``: plays, wins, win rate and regret."""
    return [dict(h) for h in archive.query(
        "SELECT iteration, plays, wins, win_rate, regret FROM env_plays WHERE env_id = ? "
        "ORDER BY iteration", (env_id,))]


def win_rates(archive: Archive) -> list[tuple[int, str, float]]:
    """(iteration, env id, win rate) of every play record, by iteration then id."""
    return [(r[0], r[1], r[2]) for r in archive.query(
        "SELECT iteration, env_id, win_rate FROM env_plays ORDER BY iteration, env_id")]


def plays_with_origin(archive: Archive) -> list[Row]:
    """Every play record with its environment's origin: env_id, iteration, plays, wins,
    win_rate, regret, level, origin."""
    return archive.query("SELECT p.env_id, p.iteration, p.plays, p.wins, p.win_rate, p.regret, "
                         "p.level, e.origin FROM env_plays p JOIN envs e USING (env_id)")


# -- design attempts ---------------------------------------------------------------------------

def attempt_counts(archive: Archive) -> list[tuple[int, str | None, str, int]]:
    """(iteration, skill, outcome, attempts) over every design attempt."""
    return [(r[0], r[1], r[2], r[3]) for r in archive.query(
        "SELECT iteration, skill, outcome, count(*) FROM attempts "
        "GROUP BY iteration, skill, outcome")]


def env_attempts(archive: Archive, env_id: str) -> list[dict[str, Any]]:
    """The design attempts that wrote ``env_id``: iteration, slot, attempt, outcome, reason,
    reward, finish reason and the iteration that trained on it."""
    return [dict(a) for a in archive.query(
        "SELECT iteration, slot, attempt, outcome, reason, reward, finish_reason, "
        "trained_iteration FROM attempts WHERE env_id = ? ORDER BY iteration, slot, attempt",
        (env_id,))]


def last_attempt_iteration(archive: Archive) -> int | None:
    """The latest iteration with a design attempt, or None in an archive without one."""
    last = archive.query("SELECT MAX(iteration) FROM attempts")[0][0]
    return None if last is None else int(last)


# -- episodes ----------------------------------------------------------------------------------

def episode_counts(archive: Archive) -> dict[str, int]:
    """env id -> how many episodes of it are stored (both arms, every iteration)."""
    return {r[0]: r[1] for r in archive.query(
        "SELECT env_id, count(*) FROM episodes GROUP BY env_id")}


def episode_heads(archive: Archive, env_id: str) -> list[Row]:
    """Every episode of ``env_id`` without its turns: iteration, arm, play index, seed,
    rewards (packed), terminated, status, error, turn count and opening."""
    return archive.query("SELECT iteration, arm, play_index, seed, rewards, terminated, status, "
                         "error, n_turns, opening FROM episodes WHERE env_id = ?", (env_id,))


def episode_turns(archive: Archive, iteration: int, env_id: str) -> list[Row]:
    """The turns of ``env_id``'s episodes in ``iteration``, by arm, play index and turn."""
    return archive.query("SELECT arm, play_index, turn_index, text, action, observation, reward, "
                         "finish_reason, parsed FROM turns WHERE iteration = ? AND env_id = ? "
                         "ORDER BY arm, play_index, turn_index", (iteration, env_id))


def hinted_rewards(archive: Archive) -> list[tuple[int, bytes, bool]]:
    """(iteration, packed rewards, terminated) of every hinted episode whose instance is scored:
    both its plays (hinted and unhinted, the same seed) ended as games, as
    :func:`spadework.metrics.score_env` counts them, so the hinted win rate is over the same
    instances as the unhinted one (a failed play, of either arm, leaves its instance out)."""
    from spadework.metrics import GAME_ENDS  # here: the scoring module, not needed to open runs

    ends = ", ".join("?" * len(GAME_ENDS))
    return [(r[0], r[1], bool(r[2])) for r in archive.query(
        "SELECT h.iteration, h.rewards, h.terminated FROM episodes h JOIN episodes n "
        "ON n.iteration = h.iteration AND n.env_id = h.env_id AND n.play_index = h.play_index "
        f"AND n.arm = 'no_hint' WHERE h.arm = 'hint' AND h.status IN ({ends}) "
        f"AND n.status IN ({ends})", (*GAME_ENDS, *GAME_ENDS))]


def unhinted_length_cut_share(archive: Archive) -> dict[int, float]:
    """Iteration -> the share of unhinted turns whose reply hit the token limit."""
    return {r[0]: r[1] for r in archive.query(
        "SELECT iteration, avg(finish_reason = 'length') FROM turns WHERE arm = 'no_hint' "
        "GROUP BY iteration")}


# -- iterations --------------------------------------------------------------------------------

def iteration_mark(archive: Archive) -> tuple[int, str | None]:
    """(iterations recorded, when the last was recorded): changes when a run records one."""
    n, last = archive.query("SELECT count(*), max(recorded_at) FROM iterations")[0]
    return int(n), last

"""The archive's SQLite schema, versioned, and the migrations between versions.

The version lives in ``PRAGMA user_version`` and the file is marked as ours by
``PRAGMA application_id``. A fresh file is built by running every migration step in order, so
the steps that upgrade an old archive are the same ones every new archive is built with (they
cannot drift apart). Each step runs in its own ``BEGIN IMMEDIATE`` transaction together with
the version bump: a killed migration leaves the file at the previous version, never between.
Before an existing archive is migrated, a copy is written beside it (``NAME.vN.bak``).

An archive from a newer schema is refused: this code cannot know what a newer version means.

Versions:

1. environments, per-iteration play statistics, designer attempts, episodes and their turns,
   iteration metrics, named state. A turn stores its prompt as ``prompt_shared`` (how many
   leading token ids it shares with the previous turn's prompt) plus the ids after those: a
   multi-turn prompt grows by each turn, so storing it whole would grow quadratically.
2. ``envs.failed_stage`` and ``envs.reason`` as columns (backfilled from the stored check
   report), so listings and memory queries filter without parsing JSON per row; an index on
   (skill, status); the ``env_stats`` view (totals plus the latest iteration's rates).
3. how each sample was drawn: ``temperature``, ``top_p`` and ``top_k`` on ``turns`` and
   ``attempts`` (NULL for rows written before: the learner cannot score those and skips them);
   ``turns.parsed``, whether the host parsed a well-formed action from the reply, backfilled by
   parsing the stored replies once; ``envs.benchmarks``, the benchmark tasks a design's name or
   docstring matches (comma-separated; empty for rows written before).
4. what a reader of a run needs that was kept only in part: ``documents`` (a grounding
   document as the designer read it: id, title, the text placed in its prompt; rows are
   backfilled from the ``<document>`` block of the stored design prompts, so nothing an old
   archive holds is lost, and an id whose prompt is not stored keeps its excerpt on ``envs``);
   ``episodes.opening``, the first message the agent saw (the observation, with the hint in the
   hinted arm; empty for episodes written before).
5. ``imports``: where an imported environment came from and what its source said about it,
   one row per (env_id, format, source sha256): the file it was read from, the sha256 of that
   file's text as found (the stored code is the adapted module, see
   :mod:`spadework.env.reference`), the adaptations in words (JSON list), and the statistics
   the source recorded (for the SPADE reference's ``env_memory.json``: its ``rollout_id``,
   ``actor_win_rate`` as ``win_rate``, ``regret`` and ``metadata``). Those are the reference
   agent's figures, not plays of this archive, so they are kept apart from ``env_plays``.
6. difficulty levels: ``envs.levels``, how many the environment declares and was checked at
   (its ``LEVELS``, less its top levels that gave the same game as the one below them, so 1
   where they all did; backfilled from the stored check
   report, 1 where it names none);
   ``episodes.level`` and ``env_plays.level``, the level an episode and an iteration's plays
   were at (1 for rows written before levels existed, when every environment had one);
   ``level_changes``, every move of the level controller (:mod:`spadework.levels`): the
   iteration whose plays moved it, the level before and after, and those plays and wins.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

from spadework.env.actions import parse_action
from spadework.errors import ArchiveError

#: The schema version this code writes. Bump it only by appending a step to ``STEPS``.
SCHEMA_VERSION = 6

#: ``PRAGMA application_id`` of a spadework archive ("SPDW").
APPLICATION_ID = 0x53504457

_V1 = """
CREATE TABLE envs (
    env_id TEXT PRIMARY KEY,
    code TEXT NOT NULL,
    class_name TEXT NOT NULL,
    setting TEXT NOT NULL,
    skill TEXT,
    name TEXT,
    origin TEXT NOT NULL,
    doc_id TEXT,
    doc_excerpt TEXT,
    parent_id TEXT,
    iteration INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('accepted', 'rejected')),
    report TEXT,
    hint TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE env_plays (
    env_id TEXT NOT NULL REFERENCES envs(env_id) ON DELETE CASCADE,
    iteration INTEGER NOT NULL,
    plays INTEGER NOT NULL CHECK (plays > 0),
    wins INTEGER NOT NULL CHECK (wins >= 0 AND wins <= plays),
    win_rate REAL NOT NULL,
    regret REAL,
    PRIMARY KEY (env_id, iteration)
);
CREATE TABLE attempts (
    iteration INTEGER NOT NULL,
    slot INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    skill TEXT,
    setting TEXT NOT NULL,
    doc_id TEXT,
    messages TEXT NOT NULL,
    reply TEXT NOT NULL,
    prompt_ids BLOB,
    output_ids BLOB,
    logprobs BLOB,
    finish_reason TEXT NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT NOT NULL,
    env_id TEXT REFERENCES envs(env_id),
    memory_ids TEXT NOT NULL,
    reward REAL,
    trained_iteration INTEGER,
    created_at REAL NOT NULL,
    PRIMARY KEY (iteration, slot, attempt)
);
CREATE INDEX attempts_env ON attempts(env_id);
CREATE TABLE episodes (
    iteration INTEGER NOT NULL,
    env_id TEXT NOT NULL REFERENCES envs(env_id) ON DELETE CASCADE,
    arm TEXT NOT NULL,
    play_index INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    rewards BLOB,
    terminated INTEGER NOT NULL,
    truncated INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT NOT NULL,
    seconds REAL NOT NULL,
    n_turns INTEGER NOT NULL,
    PRIMARY KEY (iteration, env_id, arm, play_index)
);
CREATE INDEX episodes_env ON episodes(env_id);
CREATE TABLE turns (
    iteration INTEGER NOT NULL,
    env_id TEXT NOT NULL,
    arm TEXT NOT NULL,
    play_index INTEGER NOT NULL,
    turn_index INTEGER NOT NULL,
    prompt_shared INTEGER NOT NULL,
    prompt_ids BLOB,
    output_ids BLOB,
    logprobs BLOB,
    text TEXT NOT NULL,
    action TEXT NOT NULL,
    observation TEXT NOT NULL,
    reward REAL NOT NULL,
    finish_reason TEXT NOT NULL,
    PRIMARY KEY (iteration, env_id, arm, play_index, turn_index),
    FOREIGN KEY (iteration, env_id, arm, play_index)
        REFERENCES episodes(iteration, env_id, arm, play_index) ON DELETE CASCADE
);
CREATE TABLE iterations (
    iteration INTEGER PRIMARY KEY,
    metrics TEXT NOT NULL,
    recorded_at REAL NOT NULL
);
CREATE TABLE state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""

_V2 = """
ALTER TABLE envs ADD COLUMN failed_stage TEXT;
ALTER TABLE envs ADD COLUMN reason TEXT NOT NULL DEFAULT '';
CREATE INDEX envs_skill_status ON envs(skill, status);
CREATE VIEW env_stats AS
    SELECT t.env_id AS env_id, t.plays AS plays, t.wins AS wins, p.win_rate AS win_rate,
           p.regret AS regret, t.last AS last_played_iteration
    FROM (SELECT env_id, SUM(plays) AS plays, SUM(wins) AS wins, MAX(iteration) AS last
          FROM env_plays GROUP BY env_id) AS t
    JOIN env_plays AS p ON p.env_id = t.env_id AND p.iteration = t.last;
"""


def _step_1(conn: sqlite3.Connection) -> None:
    for stmt in _V1.split(";"):
        if stmt.strip():
            conn.execute(stmt)


def _first_failure(report_json: str | None) -> tuple[str | None, str]:
    """(stage, reason) of the first failed result of a stored report, or (None, "")."""
    if report_json is None:
        return None, ""
    try:
        results = json.loads(report_json)["results"]
    except (ValueError, KeyError, TypeError) as e:
        raise ArchiveError(f"cannot migrate: a stored check report is corrupt ({e})") from e
    for r in results:
        if not r.get("passed"):
            return str(r.get("stage")), str(r.get("reason", ""))
    return None, ""


def _step_2(conn: sqlite3.Connection) -> None:
    for stmt in _V2.split(";"):
        if stmt.strip():
            conn.execute(stmt)
    rows = conn.execute("SELECT env_id, status, report FROM envs").fetchall()
    for env_id, status, report in rows:
        stage, reason = _first_failure(report)
        if status == "rejected" and stage is None:
            stage, reason = "unknown", "archived by schema v1 without a failing check in its report"
        conn.execute("UPDATE envs SET failed_stage = ?, reason = ? WHERE env_id = ?",
                     (stage if status == "rejected" else None, reason, env_id))


def _step_3(conn: sqlite3.Connection) -> None:
    for table in ("turns", "attempts"):
        for column, kind in (("temperature", "REAL"), ("top_p", "REAL"), ("top_k", "INTEGER")):
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    conn.execute("ALTER TABLE turns ADD COLUMN parsed INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE envs ADD COLUMN benchmarks TEXT NOT NULL DEFAULT ''")
    rows = conn.execute("SELECT t.rowid, t.text, e.setting FROM turns AS t "
                        "JOIN envs AS e ON e.env_id = t.env_id").fetchall()
    conn.executemany("UPDATE turns SET parsed = ? WHERE rowid = ?",
                     [(int(parse_action(text, setting).ok), rowid) for rowid, text, setting in rows])


_DOCUMENT_BLOCK = re.compile(r"<document>\n(.*?)\n</document>", re.S)


def document_in_prompt(messages_json: str) -> str | None:
    r"""The text of the ``<document>`` block of a stored design prompt (JSON list of messages),
    or None when it has none (a mutation or repair prompt).

    >>> document_in_prompt('[{"role": "user", "content": "Read.\\n<document>\\nTides rise.\\n</document>"}]')
    'Tides rise.'
    """
    try:
        messages = json.loads(messages_json)
    except ValueError:
        return None
    for m in messages if isinstance(messages, list) else ():
        found = _DOCUMENT_BLOCK.search(str(m.get("content", ""))) if isinstance(m, dict) else None
        if found:
            return found.group(1)
    return None


def _step_4(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE documents (doc_id TEXT PRIMARY KEY, title TEXT, text TEXT NOT NULL, "
                 "created_at REAL NOT NULL)")
    conn.execute("ALTER TABLE episodes ADD COLUMN opening TEXT NOT NULL DEFAULT ''")
    rows = conn.execute("SELECT doc_id, messages, created_at FROM attempts WHERE doc_id IS NOT NULL "
                        "ORDER BY iteration, slot, attempt").fetchall()
    for doc_id, messages, created in rows:
        text = document_in_prompt(messages)
        if text is not None:
            conn.execute("INSERT INTO documents (doc_id, title, text, created_at) VALUES (?, NULL, ?, ?) "
                         "ON CONFLICT(doc_id) DO NOTHING", (doc_id, text, created))


_V5 = """
CREATE TABLE imports (
    env_id TEXT NOT NULL REFERENCES envs(env_id) ON DELETE CASCADE,
    format TEXT NOT NULL,
    source_file TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    adaptations TEXT NOT NULL,
    rollout_id INTEGER,
    win_rate REAL,
    regret REAL,
    metadata TEXT,
    imported_at REAL NOT NULL,
    PRIMARY KEY (env_id, format, source_sha256)
)
"""


def _step_5(conn: sqlite3.Connection) -> None:
    conn.execute(_V5)


def _step_6(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE envs ADD COLUMN levels INTEGER NOT NULL DEFAULT 1")
    conn.execute("ALTER TABLE episodes ADD COLUMN level INTEGER NOT NULL DEFAULT 1")
    conn.execute("ALTER TABLE env_plays ADD COLUMN level INTEGER NOT NULL DEFAULT 1")
    conn.execute("CREATE TABLE level_changes (env_id TEXT NOT NULL REFERENCES envs(env_id) "
                 "ON DELETE CASCADE, iteration INTEGER NOT NULL, from_level INTEGER NOT NULL, "
                 "to_level INTEGER NOT NULL, plays INTEGER NOT NULL, wins INTEGER NOT NULL, "
                 "PRIMARY KEY (env_id, iteration))")
    rows = conn.execute("SELECT env_id, report FROM envs WHERE report IS NOT NULL").fetchall()
    for env_id, report in rows:
        try:
            levels = int(json.loads(report).get("levels", 1))
        except (ValueError, TypeError, AttributeError) as e:
            raise ArchiveError(f"cannot migrate: the check report of {env_id[:12]} is corrupt ({e})") from e
        if levels != 1:
            conn.execute("UPDATE envs SET levels = ? WHERE env_id = ?", (levels, env_id))


#: ``STEPS[i]`` upgrades version ``i`` to ``i + 1``.
STEPS: tuple[Callable[[sqlite3.Connection], None], ...] = (_step_1, _step_2, _step_3, _step_4, _step_5,
                                                           _step_6)
assert len(STEPS) == SCHEMA_VERSION


def _versions(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """(application id, schema version, number of schema objects) read in one statement, so
    from one snapshot: read apart, another opener's migration could commit between the reads
    and pair an old id with a new version."""
    return tuple(conn.execute(
        "SELECT a.application_id, v.user_version, (SELECT count(*) FROM sqlite_master) "
        "FROM pragma_application_id AS a, pragma_user_version AS v").fetchone())


def check_version(conn: sqlite3.Connection, where: str) -> int:
    """The archive's schema version; refuses foreign files and newer schemas with a reason."""
    app, ver, tables = _versions(conn)
    if app == 0 and ver == 0:
        if tables:
            raise ArchiveError(f"{where} is an SQLite file but not a spadework archive; "
                               "give the path of a run's archive or a new file")
        return 0
    if app != APPLICATION_ID:
        raise ArchiveError(f"{where} is an SQLite file of another application (id {app:#x}), "
                           "not a spadework archive")
    if ver > SCHEMA_VERSION:
        raise ArchiveError(
            f"{where} has archive schema v{ver}, newer than this spadework understands "
            f"(v{SCHEMA_VERSION}); upgrade spadework, or open the file with the version that wrote it"
        )
    return ver


def migrate(conn: sqlite3.Connection, where: str, *, target: int = SCHEMA_VERSION,
            backup: Path | None = None) -> int:
    """Bring ``conn`` (autocommit mode) up to schema ``target``; returns the version found.

    Each step runs with its version bump in one immediate transaction, rechecking the version
    under the write lock so that two processes opening one new file do not both build it. When
    an existing archive (version >= 1) needs steps and ``backup`` is given, the file is copied
    there first.
    """
    found = check_version(conn, where)
    if found >= target:
        return found
    if found >= 1 and backup is not None:
        dest = sqlite3.connect(backup)
        try:
            conn.backup(dest)
        finally:
            dest.close()
    for version in range(found, target):
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = check_version(conn, where)
            if current == version:
                STEPS[version](conn)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return found

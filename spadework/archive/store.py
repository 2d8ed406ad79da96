"""The run archive: one SQLite file per run, owned by one :class:`Archive` object.

Contract:

- One ``Archive`` owns one connection, opened in WAL mode with foreign keys on and a busy
  timeout; there is no module-level connection. Use it as a context manager or call ``close()``.
- Every write is a transaction. A stage of the loop wraps all its writes in one
  ``with archive.transaction():`` so that a kill at any moment leaves the stage either wholly
  stored or not at all; nested ``transaction()`` blocks are savepoints (an error inside one undoes
  only it, unless it propagates).
- Writes are idempotent upserts keyed by natural keys: an environment by the sha256 of its code,
  an attempt by (iteration, slot, attempt), an episode by (iteration, env_id, arm, play_index),
  play statistics by (env_id, iteration), metrics by iteration, state by key. Storing the same
  thing twice (a resumed stage) counts once.
- Rows that refer to an environment (attempts with code, stats, episodes) need the environment
  stored first, in the same transaction or before: foreign keys are enforced.
- Thread safety: an ``Archive`` may be shared between threads; a lock serialises its calls, and
  a transaction holds the lock until it ends. For reads that must not wait on another thread's
  transaction, give each thread its own ``Archive`` on the same file: WAL lets readers proceed
  while one writer writes. Processes likewise each open their own.
- Failures of SQLite are raised as :class:`ArchiveError` with a reason; a newer schema is refused
  and an older one migrated (see :mod:`spadework.archive.schema`).
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spadework.archive import rows as R
from spadework.archive.connect import connect, read_only, version
from spadework.archive.episodes import read_episodes, write_episodes
from spadework.archive.memory import (
    memory_examples,
    memory_negatives,
    played_designs,
    recent_attempts,
)
from spadework.archive.records import (
    DesignAttempt,
    EnvRecord,
    EnvStats,
    GroundingDocument,
    ImportRecord,
    IterationRecord,
    MemoryNegative,
    MemoryPositive,
    PlayedDesign,
    report_from_json,
    report_to_json,
    to_json,
)
from spadework.archive.schema import SCHEMA_VERSION, migrate
from spadework.errors import ArchiveError
from spadework.paths import free_space, no_room
from spadework.types import Episode

#: The archive's file name inside a run directory.
ARCHIVE_FILENAME = "archive.sqlite"


def archive_path(run_dir: str | Path) -> Path:
    """Where a run keeps its archive.

    >>> archive_path("runs/a").as_posix()
    'runs/a/archive.sqlite'
    """
    return Path(run_dir) / ARCHIVE_FILENAME


class Archive:
    """A run's archive. Open with :meth:`open`; see the module docstring for the contract."""

    def __init__(self, conn: sqlite3.Connection, path: Path, migrated_from: int) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self._depth = 0
        self.path = path
        #: The schema version the file had when opened (0 for a new file).
        self.migrated_from = migrated_from
        #: What a reader should know about how the file was opened ("" when nothing).
        self.note = ""

    @classmethod
    def open(cls, path: str | Path, *, create: bool = True, busy_timeout_s: float = 30.0) -> Archive:
        """Open (and create or migrate) the archive at ``path``.

        Raises :class:`ArchiveError` when the file is missing and ``create`` is false, is not a
        spadework archive, or has a newer schema than this code.
        """
        path = Path(path)
        if not path.exists():
            if not create:
                raise ArchiveError(f"no archive at {path}; give --db FILE or --run-dir DIR of a run")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ArchiveError(f"cannot create the folder of {path}: {e.strerror or e}") from e
        try:
            conn = connect(path, busy_timeout_s)
        except sqlite3.Error as e:
            raise ArchiveError(f"cannot open {path} as an archive: {e}") from e
        try:
            found = migrate(conn, str(path), backup=path.with_name(f"{path.name}.v{version(conn)}.bak"))
        except (sqlite3.Error, ArchiveError) as e:
            conn.close()
            if isinstance(e, ArchiveError):
                raise
            raise ArchiveError(f"cannot bring {path} to schema v{SCHEMA_VERSION}: {e}") from e
        return cls(conn, path, found)

    @classmethod
    def open_read_only(cls, path: str | Path, *, busy_timeout_s: float = 30.0) -> Archive:
        """Open an existing archive for reading only: it is never created, never switched to
        WAL, never migrated in place (an older schema is migrated in a copy held in memory), and
        a file that is not a spadework archive is refused before anything touches it.

        SQLite opens it with ``mode=ro``; when that fails because a WAL archive lies on
        read-only media without its ``-shm`` file, with ``immutable=1`` instead, and
        :attr:`note` then says that a live writer's recent commits are not seen.
        """
        path = Path(path)
        conn, note, found = read_only(path, busy_timeout_s)
        archive = cls(conn, path, found)
        archive.note = note
        return archive

    @property
    def schema_version(self) -> int:
        return self.query("PRAGMA user_version")[0][0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions and raw access ------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Archive]:
        """All writes inside commit together or not at all; nested blocks are savepoints."""
        with self._lock:
            outer = self._depth == 0
            name = f"sp{self._depth}"
            self._exec("BEGIN IMMEDIATE" if outer else f"SAVEPOINT {name}")
            self._depth += 1
            try:
                yield self
            except BaseException:
                self._depth -= 1
                self._exec("ROLLBACK" if outer else f"ROLLBACK TO {name}")
                if not outer:
                    self._exec(f"RELEASE {name}")
                raise
            self._depth -= 1
            try:
                self._exec("COMMIT" if outer else f"RELEASE {name}")
            except ArchiveError:
                if outer and self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")  # never leave a half-open transaction behind
                raise

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.IntegrityError as e:
            raise ArchiveError(f"{e}: store an environment before the attempts, statistics and "
                               "episodes that refer to it; keys must be unique") from e
        except sqlite3.Error as e:
            raise self._error(e) from e

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Rows of a read-only SQL query (for reports and ad-hoc inspection). A row SQLite cannot
        return (text that is not UTF-8, a damaged page) raises :class:`ArchiveError`."""
        with self._lock:
            cursor = self._exec(sql, params)
            try:
                return cursor.fetchall()
            except sqlite3.Error as e:
                raise self._error(e) from e

    def _error(self, e: sqlite3.Error) -> ArchiveError:
        """SQLite's error as an ArchiveError naming the archive; a write that found no room
        (SQLite says "disk I/O error" or "database or disk is full") says so, with the space
        left: the transaction was rolled back, so what was stored before is intact."""
        why = no_room(self.path, e) if "disk" in str(e) else None
        if why is None:
            return ArchiveError(f"archive {self.path}: {e}")
        return ArchiveError(f"archive {self.path}: {e}: no room to write ({why}; "
                            f"{free_space(self.path)}); what was stored before is intact. Free "
                            "some space (or raise the file-size limit) and run the same command "
                            "again to resume")

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._conn.executemany(sql, rows)
        except sqlite3.Error as e:
            raise self._error(e) from e

    # -- environments -------------------------------------------------------------------------

    def add_env(self, rec: EnvRecord) -> bool:
        """Store an environment unless one with the same code is there; True if it was new.

        The first record of a code wins (its iteration, document and lineage are the origin);
        use :meth:`set_hint` to add a hint later.
        """
        sql = f"INSERT INTO envs {R.placeholders(R.ENV_COLUMNS)} ON CONFLICT(env_id) DO NOTHING"
        with self.transaction():
            return self._exec(sql, R.env_row(rec, time.time())).rowcount == 1

    def set_hint(self, env_id: str, hint: str) -> None:
        with self.transaction():
            if self._exec("UPDATE envs SET hint = ? WHERE env_id = ?", (hint, env_id)).rowcount != 1:
                raise ArchiveError(f"no environment {env_id[:12]} in the archive")

    def get_env(self, env_id: str) -> EnvRecord | None:
        rows = self.query("SELECT * FROM envs WHERE env_id = ?", (env_id,))
        return R.env_from_row(rows[0]) if rows else None

    def find_env(self, prefix: str) -> EnvRecord:
        """The one environment whose id starts with ``prefix`` (at least 4 hex characters)."""
        if len(prefix) < 4 or any(c not in "0123456789abcdefABCDEF" for c in prefix):
            raise ArchiveError(f"{prefix!r} is not an environment id: give its first 4 or more hex "
                               "characters (0-9, a-f), as `spadework archive ls` prints them")
        rows = self.query("SELECT * FROM envs WHERE env_id >= ? AND env_id < ? LIMIT 2",
                          (prefix.lower(), prefix.lower() + "g"))
        if not rows:
            raise ArchiveError(f"no environment id starts with {prefix!r}")
        if len(rows) > 1:
            raise ArchiveError(f"several environment ids start with {prefix!r}; give more digits")
        return R.env_from_row(rows[0])

    def list_envs(self, *, status: str | None = None, skill: str | None = None,
                  setting: str | None = None, limit: int | None = None) -> list[EnvRecord]:
        """Environments matching every given filter, oldest iteration first."""
        sql, params = R.env_filter("*", status, skill, setting, limit)
        return [R.env_from_row(r) for r in self.query(sql, params)]

    def env_ids(self, *, status: str | None = None, skill: str | None = None,
                setting: str | None = None, limit: int | None = None) -> list[str]:
        """The ids :meth:`list_envs` would return, in its order (to read rows one by one)."""
        sql, params = R.env_filter("env_id", status, skill, setting, limit)
        return [r[0] for r in self.query(sql, params)]

    def env_codes(self, status: str = "accepted") -> list[str]:
        """The code of every environment of a status (e.g. to build a novelty index)."""
        return [r[0] for r in self.query("SELECT code FROM envs WHERE status = ? ORDER BY env_id",
                                         (status,))]

    def record_env_stats(self, env_id: str, iteration: int, *, plays: int, wins: int,
                         regret: float | None, level: int = 1) -> None:
        """How an environment played in one iteration, at ``level``; storing an iteration again
        replaces it."""
        if plays <= 0 or not 0 <= wins <= plays:
            raise ArchiveError(f"need plays > 0 and 0 <= wins <= plays, got plays={plays}, wins={wins}")
        sql = ("INSERT INTO env_plays (env_id, iteration, plays, wins, win_rate, regret, level) "
               "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(env_id, iteration) DO UPDATE SET "
               "plays = excluded.plays, wins = excluded.wins, win_rate = excluded.win_rate, "
               "regret = excluded.regret, level = excluded.level")
        with self.transaction():
            self._exec(sql, (env_id, iteration, plays, wins, wins / plays, regret, int(level)))

    def record_level(self, env_id: str, iteration: int, *, from_level: int, to_level: int,
                     plays: int, wins: int) -> None:
        """The level controller moved ``env_id`` from ``from_level`` to ``to_level`` after the
        plays of ``iteration`` (:mod:`spadework.levels`); storing an iteration again replaces it."""
        sql = ("INSERT INTO level_changes (env_id, iteration, from_level, to_level, plays, wins) "
               "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(env_id, iteration) DO UPDATE SET "
               "from_level = excluded.from_level, to_level = excluded.to_level, "
               "plays = excluded.plays, wins = excluded.wins")
        with self.transaction():
            self._exec(sql, (env_id, iteration, int(from_level), int(to_level), plays, wins))

    def current_levels(self) -> dict[str, int]:
        """env id -> the level it plays at next: its latest change's, for those ever moved
        (every other environment plays level 1)."""
        rows = self.query("SELECT c.env_id, c.to_level FROM level_changes AS c JOIN "
                          "(SELECT env_id, MAX(iteration) AS last FROM level_changes GROUP BY env_id) "
                          "AS m ON m.env_id = c.env_id AND m.last = c.iteration")
        return {r[0]: r[1] for r in rows}

    def level_changes(self, env_id: str | None = None) -> list[dict[str, int | str]]:
        """Every recorded move of the level controller (of one environment, or all), in order."""
        where, params = (" WHERE env_id = ?", (env_id,)) if env_id else ("", ())
        return [dict(r) for r in self.query(
            "SELECT env_id, iteration, from_level, to_level, plays, wins FROM level_changes"
            + where + " ORDER BY iteration, env_id", params)]

    def env_stats(self, env_id: str) -> EnvStats | None:
        rows = self.query("SELECT * FROM env_stats WHERE env_id = ?", (env_id,))
        return R.stats_from_row(rows[0]) if rows else None

    def env_stats_at(self, env_id: str, level: int) -> EnvStats | None:
        """How ``env_id`` has played at ``level``: plays and wins summed over the iterations that
        played it there, the rates and ``last_played_iteration`` of the latest of them (None:
        never played at that level). The replay score of an environment whose level moved reads
        this, not :meth:`env_stats`, whose rates are those of the level it left."""
        rows = self.query(
            "SELECT p.env_id AS env_id, t.plays AS plays, t.wins AS wins, p.win_rate AS win_rate, "
            "p.regret AS regret, t.last AS last_played_iteration FROM (SELECT SUM(plays) AS plays, "
            "SUM(wins) AS wins, MAX(iteration) AS last FROM env_plays WHERE env_id = ? AND "
            "level = ?) AS t JOIN env_plays AS p ON p.env_id = ? AND p.iteration = t.last",
            (env_id, int(level), env_id))
        return R.stats_from_row(rows[0]) if rows else None

    # -- grounding documents -------------------------------------------------------------------

    def add_document(self, doc: GroundingDocument) -> bool:
        """Keep a grounding document as the designer read it, once per ``doc_id`` (the first
        stored text stays); True if it was new."""
        sql = ("INSERT INTO documents (doc_id, title, text, created_at) VALUES (?, ?, ?, ?) "
               "ON CONFLICT(doc_id) DO NOTHING")
        with self.transaction():
            return self._exec(sql, (doc.doc_id, doc.title, doc.text, time.time())).rowcount == 1

    def document(self, doc_id: str) -> GroundingDocument | None:
        rows = self.query("SELECT doc_id, title, text FROM documents WHERE doc_id = ?", (doc_id,))
        return GroundingDocument(rows[0]["doc_id"], rows[0]["text"], rows[0]["title"]) if rows else None

    def add_import(self, rec: ImportRecord) -> bool:
        """Record where an imported environment came from (it must be stored first); a record
        with the same (env_id, format, source_sha256) is kept as it was. True if it was new."""
        sql = ("INSERT INTO imports (env_id, format, source_file, source_sha256, adaptations, "
               "rollout_id, win_rate, regret, metadata, imported_at) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
        row = (rec.env_id, rec.format, rec.source_file, rec.source_sha256,
               to_json(list(rec.adaptations), "adaptations"), rec.rollout_id, rec.win_rate,
               rec.regret, None if rec.metadata is None else to_json(rec.metadata, "metadata"),
               rec.imported_at if rec.imported_at is not None else time.time())
        with self.transaction():
            return self._exec(sql, row).rowcount == 1

    def imports(self, env_id: str | None = None) -> list[ImportRecord]:
        """Import records (of one environment), oldest first."""
        sql, params = "SELECT * FROM imports", ()
        if env_id is not None:
            sql, params = sql + " WHERE env_id = ?", (env_id,)
        return [ImportRecord(r["env_id"], r["format"], r["source_file"], r["source_sha256"],
                             tuple(json.loads(r["adaptations"])), r["rollout_id"], r["win_rate"],
                             r["regret"], None if r["metadata"] is None else json.loads(r["metadata"]),
                             r["imported_at"])
                for r in self.query(sql + " ORDER BY imported_at, source_file", params)]

    # -- designer attempts (the designer buffer) ----------------------------------------------

    def add_attempt(self, a: DesignAttempt) -> None:
        """Store a designer sample; storing its key again replaces it but keeps a reward and a
        training mark already recorded."""
        updates = ", ".join(f"{c} = excluded.{c}" for c in R.ATTEMPT_COLUMNS
                            if c not in ("iteration", "slot", "attempt", "reward",
                                         "trained_iteration", "created_at"))
        sql = (f"INSERT INTO attempts {R.placeholders(R.ATTEMPT_COLUMNS)} "
               f"ON CONFLICT(iteration, slot, attempt) DO UPDATE SET {updates}, "
               "reward = COALESCE(excluded.reward, attempts.reward), "
               "trained_iteration = COALESCE(excluded.trained_iteration, attempts.trained_iteration)")
        with self.transaction():
            self._exec(sql, R.attempt_row(a, time.time()))

    def attempts(self, iteration: int | None = None) -> list[DesignAttempt]:
        sql, params = "SELECT * FROM attempts", ()
        if iteration is not None:
            sql, params = sql + " WHERE iteration = ?", (iteration,)
        return [R.attempt_from_row(r) for r in self.query(sql + " ORDER BY iteration, slot, attempt",
                                                          params)]

    def set_attempt_reward(self, key: tuple[int, int, int], reward: float) -> None:
        """Credit a designer sample (delayed credit, once its environment has been played)."""
        if not isinstance(reward, (int, float)) or not math.isfinite(reward):
            raise ArchiveError(f"a designer reward must be a finite number, got {reward!r}")
        with self.transaction():
            cur = self._exec("UPDATE attempts SET reward = ? WHERE iteration = ? AND slot = ? "
                             "AND attempt = ?", (float(reward), *key))
            if cur.rowcount != 1:
                raise ArchiveError(f"no designer attempt {key} (iteration, slot, attempt) to credit")

    def pending_attempts(self) -> list[DesignAttempt]:
        """Samples still waiting for their reward, oldest first."""
        rows = self.query("SELECT * FROM attempts WHERE reward IS NULL "
                          "ORDER BY iteration, slot, attempt")
        return [R.attempt_from_row(r) for r in rows]

    def ready_attempts(self) -> list[DesignAttempt]:
        """Credited samples the learner has not trained on yet, oldest first."""
        rows = self.query("SELECT * FROM attempts WHERE reward IS NOT NULL AND "
                          "trained_iteration IS NULL ORDER BY iteration, slot, attempt")
        return [R.attempt_from_row(r) for r in rows]

    def mark_trained(self, keys: Sequence[tuple[int, int, int]], iteration: int) -> None:
        """Record that the learner used these samples in ``iteration`` (so a resume skips them)."""
        with self.transaction():
            self._write_many("UPDATE attempts SET trained_iteration = ? WHERE iteration = ? AND "
                             "slot = ? AND attempt = ?", [(iteration, *k) for k in keys])

    # -- episodes -----------------------------------------------------------------------------

    def add_episodes(self, iteration: int, episodes: Sequence[Episode]) -> int:
        """Store episodes played in ``iteration``; returns how many were not stored before.

        An episode stored again under the same (iteration, env_id, arm, play_index) replaces
        the earlier one with its turns, so it counts once.
        """
        with self.transaction():
            return write_episodes(self._exec, self._write_many, iteration, episodes)

    def episodes(self, iteration: int | None = None, env_id: str | None = None,
                 arm: str | None = None) -> list[Episode]:
        """Stored episodes matching every given filter, by (iteration, env_id, arm, play_index)."""
        with self._lock:
            return read_episodes(self._exec, iteration, env_id, arm)

    # -- iterations and state -----------------------------------------------------------------

    def record_iteration(self, iteration: int, metrics: dict[str, Any]) -> None:
        sql = ("INSERT INTO iterations (iteration, metrics, recorded_at) VALUES (?, ?, ?) "
               "ON CONFLICT(iteration) DO UPDATE SET metrics = excluded.metrics, "
               "recorded_at = excluded.recorded_at")
        with self.transaction():
            self._exec(sql, (iteration, to_json(metrics, f"metrics of iteration {iteration}"),
                             time.time()))

    def iterations(self) -> list[IterationRecord]:
        rows = self.query("SELECT * FROM iterations ORDER BY iteration")
        return [IterationRecord(r["iteration"], json.loads(r["metrics"]), r["recorded_at"])
                for r in rows]

    def save_state(self, key: str, value: dict[str, Any]) -> None:
        """Keep a JSON object under ``key`` (e.g. curriculum state), replacing the previous one."""
        sql = ("INSERT INTO state (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) "
               "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at")
        with self.transaction():
            self._exec(sql, (key, to_json(value, f"state {key!r}"), time.time()))

    def load_state(self, key: str) -> dict[str, Any] | None:
        rows = self.query("SELECT value FROM state WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    # -- memory and seeding -------------------------------------------------------------------

    def memory_examples(self, skill: str | None, *, lo: float = 0.15, hi: float = 0.85,
                        k: int = 2, setting: str | None = None,
                        max_chars: int | None = None) -> list[MemoryPositive]:
        """See :func:`spadework.archive.memory.memory_examples`."""
        return memory_examples(self, skill, lo=lo, hi=hi, k=k, setting=setting, max_chars=max_chars)

    def memory_negatives(self, skill: str | None, *, k: int = 1, too_easy: float = 0.9,
                         too_hard: float = 0.1, setting: str | None = None) -> list[MemoryNegative]:
        """See :func:`spadework.archive.memory.memory_negatives`."""
        return memory_negatives(self, skill, k=k, too_easy=too_easy, too_hard=too_hard,
                                setting=setting)

    def played_designs(self, *, setting: str | None = None, k: int = 12) -> list[PlayedDesign]:
        """See :func:`spadework.archive.memory.played_designs`."""
        return played_designs(self, setting=setting, k=k)

    def recent_attempts(self, *, setting: str | None = None,
                        k: int = 8) -> list[tuple[str, str, str]]:
        """See :func:`spadework.archive.memory.recent_attempts`."""
        return recent_attempts(self, setting=setting, k=k)

    def import_starter(self, records: Sequence[EnvRecord]) -> int:
        """Store checked starter environments (:func:`spadework.library.checked_starters`);
        returns how many were new or re-checked. A starter already stored under another turn
        limit takes the new check's status and report: a starter is played only under the limit
        it passed (a designed environment keeps its first record, see :meth:`add_env`)."""
        sql = ("UPDATE envs SET status = ?, failed_stage = ?, reason = ?, report = ? "
               "WHERE env_id = ?")
        changed = 0
        with self.transaction():
            for rec in records:
                if rec.origin != "starter":
                    raise ArchiveError(f"import_starter got a {rec.origin} environment "
                                       f"{rec.env_id[:12]}; store designs with add_env")
                if self.add_env(rec):
                    changed += 1
                    continue
                old = self.get_env(rec.env_id)
                if old is not None and (old.report is None or rec.report is None
                                        or old.report.max_turns != rec.report.max_turns):
                    self._exec(sql, (rec.status, rec.failed_stage, rec.reason,
                                     report_to_json(rec.report), rec.env_id))
                    changed += 1
        return changed

    def starters_checked_at(self, max_turns: int) -> bool:
        """Whether every stored starter was checked under ``max_turns`` (and some are stored)."""
        rows = self.query("SELECT report FROM envs WHERE origin = 'starter'")
        return bool(rows) and all(
            (r := report_from_json(row["report"])) is not None and r.max_turns == max_turns
            for row in rows)

"""Opening an archive's SQLite file: read-write in WAL mode, or read-only (``mode=ro``, else
immutable where the folder is not writable), with a busy timeout, and its schema version."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from spadework.archive.schema import SCHEMA_VERSION, check_version, migrate
from spadework.errors import ArchiveError


def wal(conn: sqlite3.Connection, busy_timeout_s: float) -> str:
    """Switch to WAL, retrying while another connection holds the lock: SQLite answers "database
    is locked" to a concurrent journal-mode change at once, without its busy handler."""
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def connect_read_only(path: Path, busy_timeout_s: float) -> tuple[sqlite3.Connection, str]:
    """A read-only connection to ``path`` (``mode=ro``, else ``immutable=1``) and a note."""
    from urllib.parse import quote

    target = quote(str(path.resolve()))
    tries = ((f"file:{target}?mode=ro", ""),
             (f"file:{target}?immutable=1", f"{path} was opened as immutable (its folder is not "
              "writable and it has no -shm file): commits of a run still writing it are not seen"))
    last: sqlite3.Error | None = None
    for uri, note in tries:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None,
                               check_same_thread=False)
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn, note
        except sqlite3.DatabaseError as e:
            conn.close()
            last = e
            if "not a database" in str(e):
                break
    raise ArchiveError(f"cannot read {path}: {last} (is it a spadework archive?)")


def connect(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A read-write connection in WAL mode with foreign keys on and a busy timeout; a file that
    is not an archive of a schema this version reads is refused before anything changes."""
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None,
                           check_same_thread=False)
    conn.row_factory = sqlite3.Row
    try:
        check_version(conn, str(path))  # refuse another program's file before changing anything
        mode = wal(conn, busy_timeout_s)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    except (sqlite3.DatabaseError, ArchiveError):
        conn.close()
        raise
    if str(mode).lower() != "wal":
        conn.close()
        raise ArchiveError(f"{path}: SQLite refused WAL mode (got {mode!r}); put the archive on a "
                           "local filesystem")
    return conn


def version(conn: sqlite3.Connection) -> int:
    """The schema version the file records (``PRAGMA user_version``)."""
    return conn.execute("PRAGMA user_version").fetchone()[0]


def read_only(path: Path, busy_timeout_s: float) -> tuple[sqlite3.Connection, str, int]:
    """A query-only connection to the archive at ``path``, the note of how it was opened and the
    schema version found; an older schema is migrated in a copy held in memory, never in place.
    Anything that is not a spadework archive is refused before SQLite touches it or at its first
    read."""
    if not path.exists():
        raise ArchiveError(f"no archive at {path}; give --db FILE or --run-dir DIR of a run")
    if not path.is_file():
        raise ArchiveError(f"{path} is a directory, not an archive file; give --db FILE or "
                           "--run-dir DIR")
    if path.stat().st_size == 0:
        raise ArchiveError(f"{path} is an empty file, not a spadework archive")
    conn, note = connect_read_only(path, busy_timeout_s)
    try:
        found = check_version(conn, str(path))
        if found == 0:
            raise ArchiveError(f"{path} is an SQLite file but not a spadework archive")
        if found < SCHEMA_VERSION:
            memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            conn.backup(memory)
            conn.close()
            conn = memory
            conn.row_factory = sqlite3.Row
            migrate(conn, str(path))
        conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as e:
        conn.close()
        raise ArchiveError(f"cannot read {path} as an archive: {e}") from e
    except ArchiveError:
        conn.close()
        raise
    return conn, note, found

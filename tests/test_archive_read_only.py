"""Reading an archive never writes it: on a read-only location, a WAL archive whose -shm file
is missing, another program's SQLite file. Permissions bind only an unprivileged user, so the
read-only-location tests skip as root; tests/sandbox/test_unprivileged.py runs this file as
uid 65534 from a root test run (and an unprivileged run is its own proof)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from spadework.archive import Archive
from spadework.archive.records import EnvRecord
from spadework.errors import ArchiveError
from spadework.types import CheckReport, CheckResult

AS_ROOT = os.geteuid() == 0


def _archive(path: Path, n: int = 2) -> list[str]:
    ok = CheckReport(None, "AEnv", (CheckResult("static", True, "ok"),), max_turns=4)
    ids = []
    with Archive.open(path) as a:
        for i in range(n):
            code = f"class AEnv{i}:\n    def reset(self, seed=None): ...\n    def step(self, a): ...\n"
            a.add_env(EnvRecord.from_check(code, ok, iteration=0, setting="games", skill="s"))
            ids.append(EnvRecord.from_check(code, ok, iteration=0, setting="games", skill="s").env_id)
    return ids


def _listing(db: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spadework.cli", "archive", "ls", "--db", str(db)],
                          capture_output=True, text=True, timeout=60)


def test_reading_another_programs_file_leaves_its_journal_mode(tmp_path):
    p = tmp_path / "other.sqlite"
    with sqlite3.connect(p) as c:
        c.execute("CREATE TABLE t (x)")
    r = _listing(p)
    assert r.returncode == 1 and "not a spadework archive" in r.stderr and "Traceback" not in r.stderr
    with sqlite3.connect(p) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    with pytest.raises(ArchiveError, match="not a spadework archive"):  # nor does a writer's open
        Archive.open(p)
    with sqlite3.connect(p) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_reading_never_creates_an_archive(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    r = _listing(empty)
    assert r.returncode == 1 and "empty file" in r.stderr and empty.stat().st_size == 0
    r = _listing(tmp_path / "missing.sqlite")
    assert r.returncode == 1 and "no archive" in r.stderr and not (tmp_path / "missing.sqlite").exists()


def test_an_older_archive_is_read_without_being_migrated(tmp_path):
    from spadework.archive.schema import SCHEMA_VERSION, migrate

    p = tmp_path / "old.sqlite"
    conn = sqlite3.connect(p, isolation_level=None)
    migrate(conn, str(p), target=1)
    conn.close()
    with Archive.open_read_only(p) as a:
        assert a.migrated_from == 1 and a.list_envs() == []
    with sqlite3.connect(p) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 1 < SCHEMA_VERSION
    assert not list(tmp_path.glob("*.bak"))


@pytest.mark.skipif(AS_ROOT, reason="root ignores file permissions; run as uid 65534 by test_unprivileged")
def test_a_read_only_location_is_read(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    ids = _archive(folder / "a.sqlite")
    for f in folder.iterdir():
        f.chmod(0o444)
    folder.chmod(0o555)
    try:
        r = _listing(folder / "a.sqlite")
        assert r.returncode == 0, r.stderr
        assert all(any(line.startswith(i[:12]) for line in r.stdout.splitlines()) for i in ids)
        assert sorted(p.name for p in folder.iterdir()) == ["a.sqlite"]  # no -wal, no -shm
    finally:
        folder.chmod(0o755)


@pytest.mark.skipif(AS_ROOT, reason="root ignores file permissions; run as uid 65534 by test_unprivileged")
def test_a_wal_archive_on_read_only_media_without_its_shm_file_is_read_as_immutable(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "a.sqlite"
    ids = _archive(db, n=1)
    writer = sqlite3.connect(db)  # a commit that stays in the WAL file: no checkpoint
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE envs SET hint = 'from the WAL'")
    writer.commit()
    copy = tmp_path / "media"
    copy.mkdir()
    for name in ("a.sqlite", "a.sqlite-wal"):
        (copy / name).write_bytes((folder / name).read_bytes())
        (copy / name).chmod(0o444)
    writer.close()
    copy.chmod(0o555)
    try:
        r = _listing(copy / "a.sqlite")
        assert r.returncode == 0 and r.stdout.splitlines()[1].startswith(ids[0][:12]), r.stderr
        assert "immutable" in r.stderr and "not seen" in r.stderr
    finally:
        copy.chmod(0o755)

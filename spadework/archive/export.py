"""Export the archive's environments, one row each with its play statistics: JSONL or Parquet.

Parquet needs pyarrow (an optional dependency); without it the export says so and names the
JSONL alternative. Files are written to a temporary name and renamed, so a reader never sees
half an export; an existing file is replaced only with ``force``, and never the archive itself or
a file its run owns. Rows that cannot be read are skipped and counted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spadework.errors import ArchiveError, ConfigError

if TYPE_CHECKING:
    from spadework.archive.store import Archive

FORMATS = ("jsonl", "parquet")

#: Exported columns and their Parquet types (pyarrow type names).
COLUMNS = (
    ("env_id", "string"), ("name", "string"), ("class_name", "string"), ("setting", "string"),
    ("skill", "string"), ("origin", "string"), ("status", "string"), ("iteration", "int64"),
    ("doc_id", "string"), ("doc_excerpt", "string"), ("parent_id", "string"),
    ("failed_stage", "string"), ("reason", "string"), ("hint", "string"),
    ("created_at", "float64"), ("plays", "int64"), ("wins", "int64"), ("win_rate", "float64"),
    ("regret", "float64"), ("last_played_iteration", "int64"), ("report", "string"),
    ("code", "string"),
)

_STATS = frozenset({"plays", "wins", "win_rate", "regret", "last_played_iteration"})

_SQL_ONE = (
    f"SELECT {', '.join(('s.' if c in _STATS else 'e.') + c for c, _ in COLUMNS)} "
    "FROM envs AS e LEFT JOIN env_stats AS s ON s.env_id = e.env_id WHERE e.env_id = ?"
)


#: Files a run directory owns (beside its archive): an export never writes over them.
RUN_FILES = ("metrics.jsonl", "archive.sqlite", "archive.sqlite-wal", "archive.sqlite-shm")


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: rows, rows skipped because they could not be read, and where."""

    written: int
    skipped: int
    path: Path


def env_rows(archive: Archive) -> tuple[list[dict[str, Any]], int]:
    """Every environment as a flat dict of :data:`COLUMNS` (the check report as JSON), and how
    many rows were skipped because they could not be read (text that is not UTF-8, a check
    report that is not JSON)."""
    rows, skipped = [], 0
    for env_id in archive.env_ids():
        try:
            (row,) = archive.query(_SQL_ONE, (env_id,))
            row = dict(row)
            row["report"] = json.loads(row["report"]) if row["report"] else None
        except (ArchiveError, ValueError):
            skipped += 1
            continue
        rows.append(row)
    return rows, skipped


def _write_jsonl(rows: list[dict[str, Any]], tmp: Path) -> None:
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")


def _write_parquet(rows: list[dict[str, Any]], tmp: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ConfigError("Parquet export needs pyarrow: `pip install pyarrow`, or use "
                          "--format jsonl") from e
    schema = pa.schema([(c, getattr(pa, t)()) for c, t in COLUMNS])
    flat = [dict(r, report=None if r["report"] is None else json.dumps(r["report"])) for r in rows]
    pq.write_table(pa.Table.from_pylist(flat, schema=schema), tmp)


def check_destination(archive: Archive, out: Path, *, force: bool) -> None:
    """Refuse an export path that would destroy something: the archive itself (or its WAL
    files), a file a run directory owns, a directory, or (unless ``force``) any existing file."""
    target = out.resolve()
    own = archive.path.resolve()
    if target in {own, own.with_name(own.name + "-wal"), own.with_name(own.name + "-shm")}:
        raise ConfigError(f"--out {out} is the archive being exported; give another file name")
    if target.name in RUN_FILES and (target.parent / "archive.sqlite").exists():
        raise ConfigError(f"--out {out} belongs to the run in {out.parent}; give a file outside it "
                          "or another name")
    if target.is_dir():
        raise ConfigError(f"--out {out} is a directory; give a file name, e.g. {out / 'envs.jsonl'}")
    if target.exists() and not force:
        raise ConfigError(f"--out {out} exists; pass --force to replace it, or give another name")


def export_envs(archive: Archive, out: str | Path, fmt: str = "jsonl", *,
                force: bool = False) -> ExportSummary:
    """Write every environment with its statistics to ``out`` (see :func:`check_destination`
    for what is refused); the file appears whole or not at all."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    out = Path(out)
    check_destination(archive, out, force=force)
    rows, skipped = env_rows(archive)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        (_write_jsonl if fmt == "jsonl" else _write_parquet)(rows, tmp)
        os.replace(tmp, out)
    except OSError as e:
        raise ConfigError(f"cannot write {out}: {e.strerror or e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    return ExportSummary(len(rows), skipped, out)

"""Export the archive's environments, one row each with its play statistics: JSONL or Parquet.

Parquet needs pyarrow (an optional dependency); without it the export says so and names the
JSONL alternative. Files are written to a temporary name and renamed, so a reader never sees
half an export.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spadework.errors import ConfigError

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

_SQL = (
    f"SELECT {', '.join(('s.' if c in _STATS else 'e.') + c for c, _ in COLUMNS)} "
    "FROM envs AS e LEFT JOIN env_stats AS s ON s.env_id = e.env_id "
    "ORDER BY e.iteration, e.created_at, e.env_id"
)


def env_rows(archive: Archive) -> list[dict[str, Any]]:
    """Every environment as a flat dict of :data:`COLUMNS` (the check report as JSON text)."""
    return [dict(r) for r in archive.query(_SQL)]


def _write_jsonl(rows: list[dict[str, Any]], tmp: Path) -> None:
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            row = dict(row, report=json.loads(row["report"]) if row["report"] else None)
            f.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")


def _write_parquet(rows: list[dict[str, Any]], tmp: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ConfigError("Parquet export needs pyarrow: `pip install pyarrow`, or use "
                          "--format jsonl") from e
    schema = pa.schema([(c, getattr(pa, t)()) for c, t in COLUMNS])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)


def export_envs(archive: Archive, out: str | Path, fmt: str = "jsonl") -> int:
    """Write every environment with its statistics to ``out``; returns the number of rows."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = env_rows(archive)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        (_write_jsonl if fmt == "jsonl" else _write_parquet)(rows, tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return len(rows)

"""The run archive: one SQLite file per run holding everything a resumed run needs.

Environments (keyed by the sha256 of their code) with their check reports, hints, lineage and
play statistics; designer attempts (the designer buffer, with delayed credit); episodes with
their turns; per-iteration metrics; named state (e.g. the curriculum). See
:mod:`spadework.archive.store` for the transaction and threading contract and
:mod:`spadework.archive.schema` for versions and migrations.
"""

from spadework.archive.export import FORMATS, export_envs
from spadework.archive.memory import design_summary
from spadework.archive.records import (
    ACCEPTED,
    ENV_ORIGINS,
    ENV_STATUSES,
    DesignAttempt,
    EnvRecord,
    EnvStats,
    GroundingDocument,
    ImportRecord,
    IterationRecord,
    MemoryNegative,
    MemoryPositive,
)
from spadework.archive.schema import SCHEMA_VERSION
from spadework.archive.store import ARCHIVE_FILENAME, Archive, archive_path

__all__ = [
    "ACCEPTED", "ARCHIVE_FILENAME", "ENV_ORIGINS", "ENV_STATUSES", "FORMATS", "SCHEMA_VERSION",
    "Archive", "DesignAttempt", "EnvRecord", "EnvStats", "GroundingDocument", "ImportRecord",
    "IterationRecord", "MemoryNegative",
    "MemoryPositive", "archive_path", "design_summary", "export_envs",
]

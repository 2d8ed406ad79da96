"""Export an archive's pool as a Hugging Face ``datasets`` folder: Parquet files and a card.

The folder loads with ``datasets.load_dataset(FOLDER, "envs")`` (and ``"plays"``), can be pushed
to a dataset hub as it is, and is written with pyarrow alone (``datasets`` is needed only to
read it back)::

    FOLDER/README.md            the dataset card: YAML configs, counts, columns, how to play
    FOLDER/data/envs.parquet    one row per environment: the JSONL/Parquet export's columns
                                (code, check report, totals and latest play statistics)
    FOLDER/data/plays.parquet   one row per environment and iteration it was played in
                                (plays, wins, win_rate, regret); absent, with its config,
                                when nothing was played (datasets cannot read a Parquet file
                                of no rows)

The folder is built beside its destination and renamed into place, so a reader never sees half
of it. An existing folder is replaced only with ``force`` and only when it is an export of this
kind (its card says so); a run directory, the archive's own folder or any other folder is never
touched.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from spadework.archive.export import COLUMNS, ExportSummary, env_rows
from spadework.errors import ArchiveError, ConfigError

if TYPE_CHECKING:
    from spadework.archive.store import Archive

#: The first line of the card's body: how a folder is recognised as this export.
MARKER = "<!-- written by spadework archive export --format hf -->"
PLAY_COLUMNS = (("env_id", "string"), ("iteration", "int64"), ("plays", "int64"),
                ("wins", "int64"), ("win_rate", "float64"), ("regret", "float64"))

_CARD = """---
configs:
- config_name: envs
  data_files:
  - split: train
    path: data/envs.parquet
  default: true
{plays_config}tags:
- spadework
- reinforcement-learning
- text-environments
- self-play
---
{marker}

# {title}

Executable text environments from a [spadework](https://pypi.org/project/spadework/) archive
(SPADE self-play), with their validation reports and play statistics: {n_envs} environments
({n_accepted} accepted, {n_rejected} rejected by the checker), played {n_plays} times over
{n_rows} (environment, iteration) rows.

```python
from datasets import load_dataset
envs = load_dataset("PATH", "envs", split="train")    # one row per environment
plays = load_dataset("PATH", "plays", split="train")  # one row per environment and iteration
```

Each `code` is a Python module (a class with `reset(seed)`, `step(action)`, `solution()`).
It is untrusted generated code: run it only in a sandbox, e.g.
`spadework.gym.make(path_to_module_file)` or `spadework check FILE`; never `exec` it.

## `envs` columns

{env_columns}

`status` is `accepted` or `rejected` (`failed_stage` and `reason` say why); `report` is the
checker's report as JSON; `plays`, `wins` are totals over every iteration, `win_rate` and
`regret` those of `last_played_iteration` (null when never played); `origin` is `designed`,
`starter` or `imported`.

## `plays` columns

{play_columns}
"""

_PLAYS_CONFIG = """- config_name: plays
  data_files:
  - split: train
    path: data/plays.parquet
"""


def _plays(archive: Archive) -> list[dict]:
    rows = archive.query("SELECT env_id, iteration, plays, wins, win_rate, regret FROM env_plays "
                         "ORDER BY env_id, iteration")
    return [dict(r) for r in rows]


def _card(archive: Archive, envs: list[dict], plays: list[dict]) -> str:
    def table(cols: tuple) -> str:
        return "\n".join(["| column | type |", "| --- | --- |"]
                         + [f"| `{c}` | {t} |" for c, t in cols])

    accepted = sum(r["status"] == "accepted" for r in envs)
    return _CARD.format(
        marker=MARKER, title=f"spadework environments from {archive.path.name}",
        n_envs=len(envs), n_accepted=accepted, n_rejected=len(envs) - accepted,
        n_plays=sum(p["plays"] for p in plays), n_rows=len(plays),
        plays_config=_PLAYS_CONFIG if plays else "",
        env_columns=table(COLUMNS), play_columns=table(PLAY_COLUMNS))


def _is_our_export(path: Path) -> bool:
    card = path / "README.md"
    try:
        return card.is_file() and MARKER in card.read_text(encoding="utf-8")[:2000]
    except (OSError, UnicodeDecodeError):
        return False


def _check_folder(archive: Archive, out: Path, force: bool) -> None:
    target = out.resolve()
    own = archive.path.resolve().parent
    if target == own or own.is_relative_to(target) or (target / "archive.sqlite").exists():
        raise ConfigError(f"{out} holds the archive or its run; give a new folder for the export")
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{out} is a file; give a folder for the export")
    if target.is_dir() and any(target.iterdir()):
        if not _is_our_export(target):
            raise ConfigError(f"{out} is a folder with other files in it; give a new or empty "
                              "folder (--force replaces only an earlier export of this kind)")
        if not force:
            raise ConfigError(f"{out} holds an earlier export; pass --force to replace it")


def export_hf(archive: Archive, out: str | Path, *, force: bool = False) -> ExportSummary:
    """Write the pool to the folder ``out`` (see the module docstring); rows that cannot be read
    are skipped and counted, as in the JSONL/Parquet export."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ConfigError("the hf export needs pyarrow: pip install 'spadework[hf]'") from e
    import json

    out = Path(out)
    _check_folder(archive, out, force)
    envs, skipped = env_rows(archive)
    if not envs:
        raise ConfigError(f"{archive.path} holds no environments to export")
    plays = _plays(archive)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as e:
        raise ConfigError(f"cannot write beside {out}: {e.strerror or e}") from e
    old = None
    try:
        (tmp / "data").mkdir()
        schema = pa.schema([(c, getattr(pa, t)()) for c, t in COLUMNS])
        flat = [dict(r, report=None if r["report"] is None else json.dumps(r["report"])) for r in envs]
        pq.write_table(pa.Table.from_pylist(flat, schema=schema), tmp / "data" / "envs.parquet")
        if plays:
            play_schema = pa.schema([(c, getattr(pa, t)()) for c, t in PLAY_COLUMNS])
            pq.write_table(pa.Table.from_pylist(plays, schema=play_schema),
                           tmp / "data" / "plays.parquet")
        (tmp / "README.md").write_text(_card(archive, envs, plays), encoding="utf-8")
        if out.is_dir():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
        os.replace(tmp, out)
    except (OSError, ArchiveError) as e:
        if old is not None and not out.exists():
            os.replace(old, out)  # put the earlier export back
            old = None
        raise ConfigError(f"cannot write {out}: {getattr(e, 'strerror', None) or e}") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return ExportSummary(len(envs), skipped, out)

"""Text views of the archive for the command line: a compact listing and one environment in full."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from spadework.archive.records import ENV_STATUSES
from spadework.archive.store import archive_path
from spadework.errors import ArchiveError, ConfigError

if TYPE_CHECKING:
    from spadework.archive.store import Archive


def resolve_path(db: str | None, run_dir: str | None) -> Path:
    """The archive file named by exactly one of ``--db FILE`` or ``--run-dir DIR``."""
    if (db is None) == (run_dir is None):
        raise ConfigError("name the archive with exactly one of --db FILE or --run-dir DIR")
    return Path(db) if db is not None else archive_path(run_dir)


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def ls_lines(archive: Archive, *, status: str | None = None, skill: str | None = None,
             setting: str | None = None, limit: int | None = None) -> tuple[list[str], int]:
    """A header and one line per environment (id, status, iteration, skill, class, plays, latest
    win rate and regret, the failing stage of a rejected one), and how many rows were skipped
    because they could not be read (text that is not UTF-8, code that no longer matches its
    id): a damaged row costs its own line, not the listing."""
    if status is not None and status not in ENV_STATUSES:
        raise ConfigError(f"--status must be one of {', '.join(ENV_STATUSES)}, got {status!r}")
    head = (f"{'env_id':<12}  {'status':<8}  {'iter':>4}  {'setting':<8}  {'skill':<22}  "
            f"{'class':<22}  {'plays':>5}  {'win':>5}  {'regret':>6}  failed")
    lines, skipped = [head], 0
    for env_id in archive.env_ids(status=status, skill=skill, setting=setting, limit=limit):
        try:
            rec = archive.get_env(env_id)
            st = archive.env_stats(env_id)
        except ArchiveError:
            skipped += 1
            continue
        if rec is None:
            continue
        lines.append(
            f"{rec.env_id[:12]:<12}  {rec.status:<8}  {rec.iteration:>4}  {rec.setting:<8}  "
            f"{(rec.skill or '-')[:22]:<22}  {rec.class_name[:22]:<22}  "
            f"{st.plays if st else 0:>5}  {_num(st.win_rate if st else None):>5}  "
            f"{_num(st.regret if st else None):>6}  {rec.failed_stage or ''}"
        )
    return lines, skipped


def show_text(archive: Archive, prefix: str) -> str:
    """One environment in full: its fields, statistics, check report stage by stage, hint, code."""
    rec = archive.find_env(prefix)
    st = archive.env_stats(rec.env_id)
    out = [
        f"env_id      {rec.env_id}",
        f"class       {rec.class_name}" + (f"  ({rec.name})" if rec.name else ""),
        f"status      {rec.status}" + (f": {rec.failed_stage}: {rec.reason}" if rec.failed_stage else ""),
        f"origin      {rec.origin}, iteration {rec.iteration}",
        f"setting     {rec.setting}, skill {rec.skill or '-'}",
    ]
    if rec.doc_id or rec.doc_excerpt:
        out.append(f"document    {rec.doc_id or '-'}: {(rec.doc_excerpt or '')[:200]}")
    if rec.parent_id:
        out.append(f"parent      {rec.parent_id}")
    if rec.benchmarks:
        out.append(f"benchmarks  matches held-out tasks: {', '.join(rec.benchmarks)} (do not train on it "
                   "if those are evaluated)")
    if st:
        out.append(f"plays       {st.plays} ({st.wins} won); latest iteration {st.last_played_iteration}: "
                   f"win rate {_num(st.win_rate)}, regret {_num(st.regret)}")
    if rec.report is None:
        out.append("check       (no check report stored)")
    else:
        out.append("check")
        for r in rec.report.results:
            mark = "pass" if r.passed else "FAIL"
            out.append(f"  {mark}  {r.stage:<12} {r.seconds:7.3f}s  {r.reason}")
    if rec.hint:
        out.append(f"hint        {rec.hint}")
    out += ["", rec.code.rstrip()]
    return "\n".join(out)

"""Everything a report shows, read from a run's archive in a few bulk queries.

The archive is opened read-only (an older schema is migrated in memory, never in place), so a
report can be made of a run that is still going. ``metrics`` are the archive's iteration records,
the same objects ``metrics.jsonl`` holds one per line (the loop rewrites that file from them).
Environment pages need more than the table: their code, hint, check report, lineage, document,
play history, designer attempts and at most ``k`` episodes; :func:`env_detail` builds one.
"""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spadework.archive import Archive, archive_path, views
from spadework.env import pyparse
from spadework.errors import ArchiveError
from spadework.figures import IterationMetrics
from spadework.report.episodes import chosen_episodes, episode_heads, episodes_view


@dataclass(frozen=True)
class RunData:
    """What a report of one run shows (plain JSON-ready values).

    ``metrics``: one record per finished iteration (the ``metrics.jsonl`` lines). ``rows``: one
    dict per environment for the archive table. ``win_rates``: (iteration, env id, win rate) of
    every environment played, from the per-iteration play statistics. ``funnel``: design
    attempts by iteration and by skill, each a map outcome -> count (``accepted`` or the
    rejecting stage). ``config``: the run's stored settings.
    """

    run_dir: Path
    config: dict[str, Any]
    metrics: list[IterationMetrics]
    rows: list[dict[str, Any]]
    win_rates: list[tuple[int, str, float]]
    funnel_by_iteration: dict[int, dict[str, int]]
    funnel_by_skill: dict[str, dict[str, int]]
    band: tuple[float, float] = (0.4, 0.6)
    notes: list[str] = field(default_factory=list)


def open_run(run_dir: str | Path) -> Archive:
    """The run's archive, read-only; a missing run directory or archive is an ArchiveError
    that says what to give."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise ArchiveError(f"no run directory {run_dir}; give the folder `spadework run` wrote "
                           "(it holds archive.sqlite and metrics.jsonl)")
    if not run_dir.is_dir():
        raise ArchiveError(f"{run_dir} is a file; give the run's folder (it holds archive.sqlite)")
    path = archive_path(run_dir)
    if not path.exists():
        raise ArchiveError(f"{run_dir} holds no archive.sqlite: not a spadework run directory")
    return Archive.open_read_only(path)


def collect(archive: Archive, run_dir: str | Path) -> RunData:
    """Read the run's metrics, environment table, win rates and design funnel."""
    metrics = [r.line() for r in archive.iterations()]
    stats = views.all_env_stats(archive)
    children = views.children_counts(archive)
    episodes = views.episode_counts(archive)
    rows = []
    for r in views.env_table(archive):
        s = stats.get(r["env_id"])
        rows.append({
            "id": r["env_id"], "cls": r["class_name"], "name": r["name"] or "", "setting": r["setting"],
            "skill": r["skill"] or "", "origin": r["origin"], "it": r["iteration"],
            "status": r["status"], "stage": r["failed_stage"] or "",
            "plays": s["plays"] if s else 0, "wins": s["wins"] if s else 0,
            "win": s["win_rate"] if s else None, "regret": s["regret"] if s else None,
            "last": s["last_played_iteration"] if s else None, "parent": r["parent_id"] or "",
            "children": children.get(r["env_id"], 0), "episodes": episodes.get(r["env_id"], 0),
            "bench": r["benchmarks"],
        })
    win_rates = views.win_rates(archive)
    by_it: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_skill: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for it, skill, outcome, k in views.attempt_counts(archive):
        by_it[it][outcome] += k
        by_skill[skill or "(none)"][outcome] += k
    config = archive.load_state("config") or {}
    return RunData(Path(run_dir), config, metrics, rows, win_rates,
                   {k: dict(v) for k, v in sorted(by_it.items())},
                   {k: dict(v) for k, v in sorted(by_skill.items())},
                   notes=[archive.note] if archive.note else [])


def hint_source(code: str, stored_hint: str | None) -> str:
    """Where the hinted arm's hint comes from, as :mod:`spadework.hints` decides it: the
    environment's own ``hint()`` (per instance) first, else the stored policy-written hint.

    >>> hint_source("class A:\\n    def reset(self): pass\\n    def hint(self): return 'x'\\n", None)
    'env'
    >>> hint_source("class A:\\n    def reset(self): pass\\n", "think"), hint_source("x = 1", None)
    ('policy', 'none')
    """
    try:
        tree = pyparse.parse(code)
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None and any(isinstance(n, ast.FunctionDef) and n.name == "hint"
                                for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body):
        return "env"
    return "policy" if stored_hint else "none"


def children_of(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each parent's mutated children (id, class, status) from the table's rows, in one pass
    (``envs.parent_id`` has no index: a query per page would scan the table each time)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["parent"]:
            out[r["parent"]].append({"id": r["id"], "cls": r["cls"], "status": r["status"]})
    return out


def env_detail(archive: Archive, env_id: str, *, k: int | None,
               children: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """One environment's page: fields, code, hint and its source, check report stage by stage,
    lineage, grounding document, play history, the designer attempts that wrote it, and its
    episodes (at most ``k`` chosen by :func:`chosen_episodes`; all when ``k`` is None).
    ``children`` (:func:`children_of`) saves a scan per page when building many."""
    r = views.env_row(archive, env_id)
    if r is None:
        raise ArchiveError(f"no environment {env_id[:12]} in the archive")
    report = json.loads(r["report"]) if r["report"] else None
    doc = None
    if r["doc_id"]:
        d = archive.document(r["doc_id"])
        doc = ({"id": d.doc_id, "title": d.title, "text": d.text, "stored": True} if d else
               {"id": r["doc_id"], "title": None, "text": r["doc_excerpt"] or "", "stored": False})
    history = views.play_history(archive, env_id)
    attempts = views.env_attempts(archive, env_id)
    kids = (children.get(env_id, []) if children is not None
            else views.children(archive, env_id))
    heads = episode_heads(archive, env_id)
    chosen = heads if k is None else chosen_episodes(heads, k)
    return {
        "id": env_id, "code": r["code"], "hint": r["hint"], "hint_source": hint_source(r["code"], r["hint"]),
        "reason": r["reason"], "report": report, "doc": doc, "parent": r["parent_id"], "children": kids,
        "history": history, "attempts": attempts, "episodes_total": len(heads),
        "episodes": episodes_view(archive, chosen),
    }

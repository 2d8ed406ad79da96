"""Memory queries: which archived environments the designer is shown, as examples or warnings.

Departures from the reference implementation (see spade-reference.md, section 7):

- Positives are ranked deterministically (regret descending, then the most recently played,
  then the id) and the top ``k`` returned; a caller that wants variety samples from a larger
  ``k`` with its own seeded RNG. The reference sampled from the top ten with an unseeded RNG.
- Negatives carry the class name and what the game is (its docstring's first line, or its
  ``# Concept:`` comment), where the reference named only a file stem. No code: an excerpt of a
  starter (``SIZES[self.level]``, ``rules(self.level)``, names defined outside the excerpt) was
  copied into a design that then failed to load (run l, iteration 2, ``DNAEnv``).
- Win rates and regrets are those of the latest iteration that played the environment; the
  archive has no FIFO capacity, so old environments are never silently forgotten.
"""

from __future__ import annotations

import ast
import re
import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol

from spadework.archive.records import MemoryNegative, MemoryPositive, PlayedDesign
from spadework.env import pyparse
from spadework.errors import ArchiveError
from spadework.metrics import GAME_ENDS, score_env
from spadework.reward import episode_return


class Queryable(Protocol):
    """What memory reads from: :meth:`spadework.archive.Archive.query`."""

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]: ...

_BASE = ("SELECT e.env_id, e.class_name, e.skill, e.code, s.win_rate, s.regret "
         "FROM envs AS e JOIN env_stats AS s ON s.env_id = e.env_id WHERE e.status = 'accepted'")


def design_summary(code: str, class_name: str, chars: int = 160) -> str:
    """What the game ``class_name`` in ``code`` is, in one line: the first line of the class's
    docstring, else the module's ``# Concept:`` comment, else "" (also when the code does not
    parse); at most ``chars`` characters.

    >>> design_summary("class AEnv:\\n    \'\'\'Nim with two heaps.\\n\\n    More.\'\'\'\\n", "AEnv")
    'Nim with two heaps.'
    >>> design_summary("# Concept: tides\\nclass BEnv:\\n    pass\\n", "BEnv")
    'tides'
    >>> design_summary("class (", "CEnv")
    ''
    """
    try:
        tree = pyparse.parse(code)
    except (SyntaxError, ValueError):
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            doc = (ast.get_docstring(node) or "").strip()
            if doc:
                return doc.splitlines()[0].strip()[:chars]
    concept = re.search(r"^\s*#\s*Concept:\s*(.+)$", code, re.MULTILINE)
    return concept.group(1).strip()[:chars] if concept else ""


def _filters(skill: str | None, setting: str | None) -> tuple[str, list]:
    sql, params = "", []
    if skill is not None:
        sql, params = sql + " AND e.skill = ?", params + [skill]
    if setting is not None:
        sql, params = sql + " AND e.setting = ?", params + [setting]
    return sql, params


def _check_rate(x: float, name: str) -> None:
    if not 0.0 <= x <= 1.0:
        raise ArchiveError(f"{name} must lie in [0, 1], got {x!r}")


def memory_examples(archive: Queryable, skill: str | None, *, lo: float = 0.15, hi: float = 0.85,
                    k: int = 2, setting: str | None = None,
                    max_chars: int | None = None) -> list[MemoryPositive]:
    """Accepted environments of ``skill`` whose latest win rate lies in ``[lo, hi]``, best first.

    Ranked by regret (descending; none last), then the most recently played, then env id.
    ``skill=None`` matches every skill; ``max_chars`` leaves out code longer than that.
    """
    _check_rate(lo, "lo")
    _check_rate(hi, "hi")
    if lo > hi:
        raise ArchiveError(f"lo must be <= hi, got lo={lo}, hi={hi}")
    extra, params = _filters(skill, setting)
    if max_chars is not None:
        extra, params = extra + " AND length(e.code) <= ?", [*params, int(max_chars)]
    sql = (_BASE + extra + " AND s.win_rate BETWEEN ? AND ? ORDER BY s.regret IS NULL, "
           "s.regret DESC, s.last_played_iteration DESC, e.env_id LIMIT ?")
    rows = archive.query(sql, [*params, lo, hi, max(0, int(k))])
    return [MemoryPositive(r["env_id"], r["class_name"], r["skill"], r["code"], r["win_rate"],
                           r["regret"]) for r in rows]


def memory_negatives(archive: Queryable, skill: str | None, *, k: int = 1, too_easy: float = 0.9,
                     too_hard: float = 0.1, setting: str | None = None,
                     summary_chars: int = 160) -> list[MemoryNegative]:
    """Accepted environments of ``skill`` the agent solves too often (win rate > ``too_easy``)
    or too rarely (< ``too_hard``): the most extreme first (distance of the win rate from 0.5),
    then the most recently played, then env id."""
    _check_rate(too_easy, "too_easy")
    _check_rate(too_hard, "too_hard")
    extra, params = _filters(skill, setting)
    sql = (_BASE + extra + " AND (s.win_rate > ? OR s.win_rate < ?) ORDER BY "
           "ABS(s.win_rate - 0.5) DESC, s.last_played_iteration DESC, e.env_id LIMIT ?")
    rows = archive.query(sql, [*params, too_easy, too_hard, max(0, int(k))])
    return [
        MemoryNegative(r["env_id"], r["class_name"], r["skill"], r["win_rate"],
                       "too easy" if r["win_rate"] > too_easy else "too hard",
                       design_summary(r["code"], r["class_name"], summary_chars))
        for r in rows
    ]


def played_designs(archive: Any, *, setting: str | None = None, k: int = 12,
                   reply_chars: int = 160) -> list[PlayedDesign]:
    """The ``k`` designed environments played most recently (latest iteration first), each as
    :func:`how_it_played`. ``archive`` is an open :class:`spadework.archive.Archive`."""
    extra, params = _filters(None, setting)
    rows = archive.query(
        "SELECT e.env_id FROM envs AS e JOIN env_stats AS s ON s.env_id = e.env_id "
        "WHERE e.status = 'accepted' AND e.origin = 'designed'" + extra
        + " ORDER BY s.last_played_iteration DESC, e.env_id LIMIT ?", [*params, max(0, int(k))])
    found = (how_it_played(archive, r["env_id"], reply_chars=reply_chars) for r in rows)
    return [d for d in found if d is not None]


def recent_attempts(archive: Queryable, *, setting: str | None = None,
                    k: int = 8) -> list[tuple[str, str, str]]:
    """The outcome, the checker's reason and the reply's finish reason of the ``k`` latest
    design attempts of ``setting`` (latest iteration first, then slot and attempt), accepted
    ones included: what the designer's rejection feedback counts
    (:func:`spadework.designer.prompts.rejection_section`)."""
    extra, params = ("WHERE setting = ?", [setting]) if setting is not None else ("", [])
    rows = archive.query(
        f"SELECT outcome, reason, finish_reason FROM attempts {extra} "
        "ORDER BY iteration DESC, slot, attempt LIMIT ?", [*params, max(0, int(k))])
    return [(r["outcome"], r["reason"], r["finish_reason"]) for r in rows]


def how_it_played(archive: Any, env_id: str, *, reply_chars: int = 160) -> PlayedDesign | None:
    """How ``env_id`` played at its latest iteration: unhinted and hinted wins over the plays
    that ended as games (the reward stage's count), the level played and, when it was never won
    without the hint, the start of two of the agent's unhinted replies; None when it was never
    played or no play ended as a game."""
    stats, rec = archive.env_stats(env_id), archive.get_env(env_id)
    if stats is None or rec is None:
        return None
    eps = archive.episodes(iteration=stats.last_played_iteration, env_id=env_id)
    o = score_env(env_id, eps)
    if o is None or not o.plays:
        return None
    broken = {e.play_index for e in eps if e.status not in GAME_ENDS}
    hinted = [episode_return(e.rewards, e.terminated) for e in eps
              if e.arm == "hint" and e.play_index not in broken]
    replies: tuple[str, ...] = ()
    if o.wins == 0:
        replies = tuple(t.text[:reply_chars] for e in eps if e.arm == "no_hint"
                        for t in e.turns[:1])[:2]
    level = max((e.level for e in eps), default=1)
    return PlayedDesign(env_id, rec.class_name, rec.skill, stats.last_played_iteration, level,
                        rec.levels, o.wins, o.plays, sum(x > 0 for x in hinted), len(hinted),
                        replies)

"""How tool results and answers read: records as one line or a compact table, any other value
as text, and the rule that compares a final answer with the expected one. Standard library only
(part of the sandbox's ``toolenv`` kit, see :mod:`spadework.env.toolenv`).
"""

from __future__ import annotations

import json
import math


def _cell(value: object) -> str:
    if isinstance(value, float):
        return format(value, ".10g")
    if isinstance(value, (dict, list, bool)) or value is None:
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def render_record(record: dict) -> str:
    """One record on one line, for tool results.

    >>> render_record({"id": 3, "name": "Ann", "balance": 0.1 + 0.2, "tags": ["vip"]})
    'id: 3, name: Ann, balance: 0.3, tags: ["vip"]'
    """
    return ", ".join(f"{key}: {_cell(value)}" for key, value in record.items())


def render_records(records: list[dict], columns: list[str] | None = None) -> str:
    """Records as a compact table: a header line of column names, then one line per record.

    >>> print(render_records([{"id": 1, "qty": 5}, {"id": 2, "qty": 0}]))
    id | qty
    1 | 5
    2 | 0
    >>> render_records([])
    '(no records)'
    """
    if not records:
        return "(no records)"
    columns = columns or list(records[0])
    lines = [" | ".join(columns)]
    lines += [" | ".join(_cell(r.get(c, "")) for c in columns) for r in records]
    return "\n".join(lines)


def answers_match(given: str, expected: str) -> bool:
    """Case-insensitive equality after stripping, or numbers equal within 1e-6 relative (after
    removing ``$``, ``,`` and surrounding spaces). The reference used 0.01 absolute, which
    accepts wrong cents on small amounts and is needlessly strict on large ones.

    >>> answers_match(" Done ", "done"), answers_match("$1,234.50", "1234.5")
    (True, True)
    >>> answers_match("1234.51", "1234.5"), answers_match("12", "twelve")
    (False, False)
    """
    a, b = str(given).strip(), str(expected).strip()
    if a.casefold() == b.casefold():
        return True
    try:
        x = float(a.replace("$", "").replace(",", "").strip())
        y = float(b.replace("$", "").replace(",", "").strip())
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)


def render_result(result: object) -> str:
    """A tool method's return value as the tool result's text."""
    if isinstance(result, dict):
        return render_record(result)
    if isinstance(result, list) and all(isinstance(r, dict) for r in result):
        return render_records(result)
    return _cell(result)

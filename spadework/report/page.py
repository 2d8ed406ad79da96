"""The report as one self-contained HTML file: plots drawn here as SVG, data embedded as JSON,
a little vanilla JavaScript for the archive table and the environment pages.

Nothing is fetched when the file opens: styles and script are inlined, there are no fonts,
images or links outside the file. The archive table's rows are plain JSON; the environment
pages' data (code, check report, document, episodes) is gzip-compressed and base64-encoded in
chunks of :data:`CHUNK` environments, inflated by the browser (``DecompressionStream``) only
when one of the chunk's pages is opened, so a large archive loads as fast as its table.
"""

from __future__ import annotations

import base64
import gzip
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from spadework.archive import Archive
from spadework.errors import ConfigError
from spadework.figures import IterationMetrics
from spadework.report.charts import curves, eval_curves, funnel_charts, win_rate_charts
from spadework.report.collect import RunData, children_of, collect, env_detail, open_run

#: Environments per compressed chunk of page data.
CHUNK = 200

#: Episodes embedded per environment by default (one seed, both arms).
DEFAULT_EPISODES = 2


@dataclass(frozen=True)
class ReportSummary:
    """What ``spadework report`` wrote: the file, its size, and what it holds."""

    path: Path
    bytes: int
    envs: int
    iterations: int
    episodes_embedded: int
    episodes_total: int
    seconds: float


def _asset(name: str) -> str:
    return resources.files("spadework.report").joinpath("assets", name).read_text(encoding="utf-8")


def json_for_script(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>`` or ``<!--`` can end it early).

    >>> json_for_script({"a": "</script>"})
    '{"a":"\\\\u003c/script>"}'
    """
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def packed(value: Any) -> str:
    """JSON, gzip-compressed (deterministic: no timestamp), base64-encoded."""
    raw = json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def _facts(data: RunData) -> str:
    accepted = sum(r["status"] == "accepted" for r in data.rows)
    last = data.metrics[-1] if data.metrics else IterationMetrics(iteration=-1)
    cfg = data.config

    def num(v: Any) -> str:
        return "-" if v is None else f"{v:.3g}" if isinstance(v, float) else escape(str(v))

    items = [
        ("run", escape(str(data.run_dir))), ("preset", num(cfg.get("preset"))),
        ("model", num(cfg.get("model") or "the preset's default")), ("run seed", num(cfg.get("run_seed"))),
        ("training", "on" if cfg.get("train", True) else "off"),
        ("iterations finished", str(len(data.metrics))),
        ("environments", f"{len(data.rows)} ({accepted} accepted, {len(data.rows) - accepted} rejected)"),
        ("episodes", str(sum(r["episodes"] for r in data.rows))),
        ("last agent return", f"{num(last.agent_return.get('no_hint'))} unhinted, "
                              f"{num(last.agent_return.get('hint'))} hinted"),
        ("last band share", num(last.band_share)), ("last mean regret", num(last.mean_regret)),
    ]
    return "<dl class='facts'>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _skill_table(data: RunData) -> str:
    rows = []
    for skill, f in data.funnel_by_skill.items():
        total = sum(f.values())
        acc = f.get("accepted", 0)
        rejected = sorted(((n, o) for o, n in f.items() if o != "accepted"), reverse=True)
        top = ", ".join(f"{escape(o)} {n}" for n, o in rejected[:3]) or "-"
        rows.append(f"<tr><td>{escape(skill)}</td><td>{total}</td><td>{acc}</td>"
                    f"<td>{100 * acc / total:.0f}%</td><td>{top}</td></tr>")
    if not rows:
        return "<p class='muted'>No design attempts in this run.</p>"
    return ("<table class='small'><thead><tr><th>skill</th><th>attempts</th><th>accepted</th>"
            "<th>rate</th><th>rejected at (most)</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _eval_table(data: RunData) -> str:
    last = next((m for m in reversed(data.metrics) if (m.eval or {}).get("suites")), None)
    if last is None:
        return ""
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{s['score']:.3f}</td><td>[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]</td>"
        f"<td>{s['items']}</td><td>{s['samples']}</td></tr>"
        for name, s in last.eval["suites"].items())
    return (f"<p>Latest evaluation, after iteration {last.iteration}:</p><table class='small'><thead><tr>"
            "<th>suite</th><th>score</th><th>95% CI</th><th>items</th><th>samples</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _overview(data: RunData) -> str:
    evals = eval_curves(data)
    lo, hi = data.band
    in_band = [m.band_share for m in data.metrics if m.band_share is not None]
    share = (f"Over the run, {100 * sum(in_band) / len(in_band):.0f}% of the played environments "
             f"per iteration were in [{lo}, {hi}] on average." if in_band else "")
    return "".join([
        "<section id='overview' class='page'>", _facts(data),
        "<h2>Curves per iteration</h2><div class='grid'>", *curves(data), "</div>",
        "<h2>Evaluation</h2><div class='grid'>" + "".join(evals) + "</div>" + _eval_table(data) if evals else "",
        f"<h2>Win rates of the played environments</h2><p class='muted'>{share}</p><div class='grid'>",
        *win_rate_charts(data), "</div>",
        "<h2>Design funnel</h2><div class='grid'>", *funnel_charts(data), "</div>", _skill_table(data),
        "</section>",
    ])


def render(data: RunData, chunks: Iterable[str], *, live: bool, k: int | None) -> str:
    """The whole page. ``chunks`` are the packed environment-page chunks (none when ``live``:
    a served page fetches each environment from the server instead)."""
    meta = {"live": live, "k": k, "chunk": CHUNK, "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
            "band": list(data.band), "run": str(data.run_dir)}
    blobs = "".join(f"<script type='application/octet-stream' id='chunk-{i}'>{c}</script>"
                    for i, c in enumerate(chunks))
    notes = "".join(f"<p class='note'>{escape(n)}</p>" for n in data.notes)
    title = f"spadework report: {data.run_dir.name}"
    return "".join([
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head><body>",
        f"<header><h1>{escape(title)}</h1><nav><a href='#overview'>Overview</a>"
        "<a href='#archive'>Archive</a></nav><span id='status' class='muted'></span></header>",
        notes, "<main>", _overview(data),
        "<section id='archive' class='page' hidden><div id='filters'></div><div id='table'></div></section>",
        "<section id='env' class='page' hidden></section></main>",
        f"<script type='application/json' id='meta'>{json_for_script(meta)}</script>",
        f"<script type='application/json' id='rows'>{json_for_script(data.rows)}</script>",
        blobs, f"<script>{_asset('report.js')}</script></body></html>",
    ])


def page_chunks(archive: Archive, data: RunData, k: int | None) -> tuple[list[str], int]:
    """The packed environment pages in table order, and how many episodes they embed."""
    out, embedded, batch = [], 0, []
    kids = children_of(data.rows)
    for row in data.rows:
        d = env_detail(archive, row["id"], k=k, children=kids)
        embedded += sum((p["hint"] is not None) + (p["no_hint"] is not None) for p in d["episodes"])
        batch.append(d)
        if len(batch) == CHUNK:
            out.append(packed(batch))
            batch = []
    if batch:
        out.append(packed(batch))
    return out, embedded


def build_report(run_dir: str | Path, out: str | Path | None = None, *,
                 k: int = DEFAULT_EPISODES) -> ReportSummary:
    """Write the report of ``run_dir`` to ``out`` (default ``RUN_DIR/report.html``), embedding
    at most ``k`` episodes per environment; raises ArchiveError / ConfigError with a reason."""
    start = time.monotonic()
    run_dir = Path(run_dir)
    out = Path(out) if out is not None else run_dir / "report.html"
    with open_run(run_dir) as archive:
        if out.is_dir():
            raise ConfigError(f"--out {out} is a directory; give a file name, e.g. {out / 'report.html'}")
        if not out.parent.is_dir():
            raise ConfigError(f"--out {out}: its folder {out.parent} does not exist")
        data = collect(archive, run_dir)
        chunks, embedded = page_chunks(archive, data, k)
    html = render(data, chunks, live=False, k=k)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write {out}: {e.strerror or e}") from e
    return ReportSummary(out, out.stat().st_size, len(data.rows), len(data.metrics), embedded,
                         sum(r["episodes"] for r in data.rows), time.monotonic() - start)

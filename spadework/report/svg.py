"""Charts as inline SVG strings: line charts, a strip chart of rates, stacked bars.

Pure functions of their numbers; no plotting library and nothing fetched, so a report opens
offline. Every chart carries its data: ``<svg data-chart=KEY>`` and, per series,
``<g data-series=NAME data-x=[...] data-y=[...]>`` (JSON), so a test (or a reader with the
browser's inspector) can check a plot against the metrics it came from. Missing values (None)
leave a gap in a line. Each point has a ``<title>``, which browsers show on hover.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from html import escape

#: Okabe-Ito colours (distinguishable with the common colour-vision deficiencies).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")

W, H = 440, 230
_L, _R, _T, _B = 52, 12, 34, 30  # margins: left (y labels), right, top (title, legend), bottom
_MAX_TITLES = 400  # hover titles per chart; past that the file grows for little use


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi].

    >>> nice_ticks(0, 1)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    >>> nice_ticks(3, 3)
    [2.6, 2.8, 3.0, 3.2, 3.4]
    """
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.1 or 0.5
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step + 1e-9) * step
    out, v = [], start
    while v <= hi + step * 1e-6:
        out.append(round(v, 12))
        v += step
    if out[-1] < hi - 1e-12:
        out.append(round(v, 12))
    return [float(x) for x in out]


def fmt(v: float) -> str:
    """A short label for a number.

    >>> fmt(0.25), fmt(1200.0), fmt(1.5e-05), fmt(2.0), fmt(-0.6)
    ('0.25', '1.2k', '1.5e-05', '2', '-0.6')
    """
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or (abs(v) >= 1000 and v == round(v, -2)):
        return f"{v / 1000:.3g}k"
    return f"{v:.3g}"


def _frame(key: str, title: str, body: list[str], width: int = W, height: int = H) -> str:
    return (f'<svg class="chart" data-chart="{escape(key)}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
            f'<text class="ct" x="{_L}" y="14">{escape(title)}</text>' + "".join(body) + "</svg>")


def _axes(x0: float, x1: float, y_ticks: Sequence[float], sx, sy, width: int, height: int,
          x_label: str) -> list[str]:
    out = []
    for t in y_ticks:
        y = sy(t)
        out.append(f'<line class="grid" x1="{_L}" x2="{width - _R}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="yl" x="{_L - 4}" y="{y + 3:.1f}">{fmt(t)}</text>')
    span = x1 - x0
    step = max(1, math.ceil(span / 8)) if span else 1
    for xv in range(math.ceil(x0), math.floor(x1) + 1, step):
        x = sx(xv)
        out.append(f'<text class="xl" x="{x:.1f}" y="{height - _B + 14}">{xv}</text>')
    out.append(f'<text class="xl" x="{(_L + width - _R) / 2:.0f}" y="{height - 3}">{escape(x_label)}</text>')
    return out


def _legend(names: Sequence[str], colors: Sequence[str], width: int) -> list[str]:
    out, x = [], _L
    for name, c in zip(names, colors):
        out.append(f'<rect x="{x}" y="20" width="10" height="4" fill="{c}"/>'
                   f'<text class="lg" x="{x + 13}" y="25">{escape(name)}</text>')
        x += 22 + 6.2 * len(name)
        if x > width - 40:
            break
    return out


def line_chart(key: str, title: str, xs: Sequence[int], series: Mapping[str, Sequence[float | None]],
               *, x_label: str = "iteration", band: tuple[float, float] | None = None,
               y_range: tuple[float, float] | None = None, sources: Mapping[str, str] | None = None,
               width: int = W, height: int = H) -> str:
    """Lines over ``xs`` (one per series; None is a gap), optionally a shaded band of y.
    ``sources`` names where each series came from (``data-metric``, e.g. a dotted path into a
    metrics line)."""
    names = list(series)
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(names))]
    values = [v for ys in series.values() for v in ys if v is not None]
    body: list[str] = []
    if not xs or not values:
        body.append(f'<text class="empty" x="{width / 2:.0f}" y="{height / 2:.0f}">no data</text>')
        for name in names:
            src = f' data-metric="{escape(sources[name])}"' if sources and name in sources else ""
            body.append(f'<g class="series" data-series="{escape(name)}" data-x="[]" data-y="[]"{src}></g>')
        return _frame(key, title, body, width, height)
    lo, hi = y_range if y_range else (min(values), max(values))
    ticks = nice_ticks(lo, hi)
    y0, y1 = min(ticks[0], lo), max(ticks[-1], hi)
    x0, x1 = min(xs), max(xs)

    def sx(x: float) -> float:
        return _L + (x - x0) / (x1 - x0) * (width - _L - _R) if x1 > x0 else (_L + width - _R) / 2

    def sy(y: float) -> float:
        return height - _B - (y - y0) / (y1 - y0) * (height - _T - _B)

    if band:
        body.append(f'<rect class="band" x="{_L}" width="{width - _L - _R}" y="{sy(band[1]):.1f}" '
                    f'height="{sy(band[0]) - sy(band[1]):.1f}"/>')
    body += _axes(x0, x1, ticks, sx, sy, width, height, x_label)
    titles = 0
    for name, c in zip(names, colors):
        ys = list(series[name])
        d, pen = [], "M"
        dots = []
        for x, y in zip(xs, ys):
            if y is None:
                pen = "M"
                continue
            d.append(f"{pen}{sx(x):.1f},{sy(y):.1f}")
            pen = "L"
            tip = f"<title>{escape(name)}, {x_label} {x}: {y:.4g}</title>" if titles < _MAX_TITLES else ""
            titles += 1
            dots.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5">{tip}</circle>')
        data = (f'data-series="{escape(name)}" data-x="{escape(json.dumps(list(xs)))}" '
                f'data-y="{escape(json.dumps(ys))}"')
        if sources and name in sources:
            data += f' data-metric="{escape(sources[name])}"'
        body.append(f'<g class="series" {data} stroke="{c}" fill="{c}">'
                    f'<path fill="none" d="{"".join(d)}"/>{"".join(dots)}</g>')
    body += _legend(names, colors, width)
    return _frame(key, title, body, width, height)


def strip_chart(key: str, title: str, points: Sequence[tuple[int, float, str]], *,
                band: tuple[float, float], x_label: str = "iteration", width: int = 2 * W,
                height: int = H + 40) -> str:
    """One dot per (x, rate in [0, 1], label), spread sideways within its x so that equal rates
    stay visible; the band [lo, hi] shaded."""
    body: list[str] = []
    if not points:
        body.append(f'<text class="empty" x="{width / 2:.0f}" y="{height / 2:.0f}">no data</text>'
                    '<g class="series" data-series="win_rate" data-x="[]" data-y="[]"></g>')
        return _frame(key, title, body, width, height)
    xs = [p[0] for p in points]
    x0, x1 = min(xs) - 0.5, max(xs) + 0.5
    cell = (width - _L - _R) / (x1 - x0)

    def sx(x: float) -> float:
        return _L + (x - x0) * cell

    def sy(y: float) -> float:
        return height - _B - y * (height - _T - _B)

    body.append(f'<rect class="band" x="{_L}" width="{width - _L - _R}" y="{sy(band[1]):.1f}" '
                f'height="{sy(band[0]) - sy(band[1]):.1f}"/>')
    body += _axes(x0 + 0.5, x1 - 0.5, nice_ticks(0, 1), sx, sy, width, height, x_label)
    seen: dict[tuple[int, float], int] = {}
    dots = []
    for i, (x, y, label) in enumerate(points):
        k = seen.get((x, round(y, 3)), 0)
        seen[(x, round(y, 3))] = k + 1
        offset = ((k % 9) - 4) * min(4.0, cell / 10)  # same rate, same x: side by side
        inside = band[0] <= y <= band[1]
        tip = f"<title>{escape(label)}: {y:.3f} ({x_label} {x})</title>" if i < _MAX_TITLES else ""
        dots.append(f'<circle class="{"in" if inside else "out"}" cx="{sx(x) + offset:.1f}" '
                    f'cy="{sy(y):.1f}" r="3">{tip}</circle>')
    body.append(f'<g class="series" data-series="win_rate" data-x="{escape(json.dumps(xs))}" '
                f'data-y="{escape(json.dumps([p[1] for p in points]))}">{"".join(dots)}</g>')
    return _frame(key, title, body, width, height)


def stacked_bars(key: str, title: str, xs: Sequence[int | str], stacks: Mapping[str, Sequence[int]],
                 *, colors: Mapping[str, str], x_label: str = "iteration", horizontal: bool = False,
                 width: int = W, height: int = H) -> str:
    """Bars of counts, one per x, split by category (``stacks[category][i]`` for ``xs[i]``).
    ``horizontal`` lays them out as rows (for named categories such as skills)."""
    names = list(stacks)
    totals = [sum(stacks[n][i] for n in names) for i in range(len(xs))]
    body: list[str] = []
    if not xs or not any(totals):
        body.append(f'<text class="empty" x="{width / 2:.0f}" y="{height / 2:.0f}">no data</text>')
        return _frame(key, title, body, width, height)
    top = max(totals)
    ticks = nice_ticks(0, top)
    left = 150 if horizontal else _L
    plot_w, plot_h = width - left - _R, height - _T - _B
    slot = (plot_h if horizontal else plot_w) / len(xs)
    bar = max(1.0, slot * 0.7)
    for t in ticks:
        if horizontal:
            x = left + t / ticks[-1] * plot_w
            body.append(f'<line class="grid" y1="{_T}" y2="{height - _B}" x1="{x:.1f}" x2="{x:.1f}"/>'
                        f'<text class="xl" x="{x:.1f}" y="{height - _B + 14}">{fmt(t)}</text>')
        else:
            y = height - _B - t / ticks[-1] * plot_h
            body.append(f'<line class="grid" x1="{_L}" x2="{width - _R}" y1="{y:.1f}" y2="{y:.1f}"/>'
                        f'<text class="yl" x="{_L - 4}" y="{y + 3:.1f}">{fmt(t)}</text>')
    every = max(1, math.ceil(len(xs) / 12))
    for i, x in enumerate(xs):
        base = 0.0
        pos = (_T if horizontal else left) + i * slot + (slot - bar) / 2
        if horizontal:
            body.append(f'<text class="yl" x="{left - 4}" y="{pos + bar / 2 + 3:.1f}">{escape(str(x))[:24]}</text>')
        elif i % every == 0:
            body.append(f'<text class="xl" x="{pos + bar / 2:.1f}" y="{height - _B + 14}">{escape(str(x))}</text>')
        for n in names:
            v = stacks[n][i]
            if not v:
                continue
            size = v / ticks[-1] * (plot_w if horizontal else plot_h)
            tip = f"<title>{escape(str(x))}: {escape(n)} {v} of {totals[i]}</title>"
            if horizontal:
                body.append(f'<rect x="{left + base:.1f}" y="{pos:.1f}" width="{size:.1f}" height="{bar:.1f}" '
                            f'fill="{colors[n]}">{tip}</rect>')
            else:
                body.append(f'<rect x="{pos:.1f}" y="{height - _B - base - size:.1f}" width="{bar:.1f}" '
                            f'height="{size:.1f}" fill="{colors[n]}">{tip}</rect>')
            base += size
    if not horizontal:
        body.append(f'<text class="xl" x="{(_L + width - _R) / 2:.0f}" y="{height - 3}">{escape(x_label)}</text>')
    for n in names:
        body.append(f'<g class="series" data-series="{escape(n)}" data-x="{escape(json.dumps(list(xs)))}" '
                    f'data-y="{escape(json.dumps(list(stacks[n])))}"></g>')
    body += _legend(names, [colors[n] for n in names], width)
    return _frame(key, title, body, width, height)

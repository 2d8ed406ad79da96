"""Run summaries for the terminal: a line per curve with a sparkline, first and last value."""

from __future__ import annotations

from collections.abc import Sequence

from spadework.figures import IterationMetrics
from spadework.report.charts import metric

BLOCKS = "▁▂▃▄▅▆▇█"

#: (label, metrics path) of the curves a run's closing summary shows.
SUMMARY = (
    ("agent return, unhinted", "agent_return.no_hint"), ("agent return, hinted", "agent_return.hint"),
    ("mean regret", "mean_regret"), ("designer reward", "designer_reward.mean"),
    ("share in the band", "band_share"), ("well-formed replies", "agent_format_share.no_hint"),
    ("loss, agent", "losses.agent"), ("loss, designer", "losses.designer"),
)


def sparkline(values: Sequence[float | None]) -> str:
    """One block character per value, scaled from the least to the greatest; a gap for None.

    >>> sparkline([0.0, 0.5, 1.0, None, 1.0])
    '▁▅█ █'
    >>> sparkline([2.0, 2.0])
    '▄▄'
    """
    known = [v for v in values if v is not None]
    if not known:
        return " " * len(values)
    lo, hi = min(known), max(known)
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif hi == lo:
            out.append(BLOCKS[3])
        else:
            out.append(BLOCKS[round((v - lo) / (hi - lo) * (len(BLOCKS) - 1))])
    return "".join(out)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def run_summary(lines: Sequence[IterationMetrics], run_dir: str) -> list[str]:
    """The closing lines of ``spadework run``: each curve's sparkline over the iterations with
    its first and last value, the design funnel's totals, a warning when nothing was played (a
    run whose environments all failed to load still ends), and how to see more."""
    if not lines:
        return [f"no iteration finished in {run_dir}"]
    out = [f"summary of {len(lines)} iteration(s) ({lines[0].iteration}..{lines[-1].iteration}):"]
    width = max(len(label) for label, _ in SUMMARY)
    for label, path in SUMMARY:
        ys = [metric(m, path) for m in lines]
        known = [y for y in ys if y is not None]
        if not known:
            continue
        out.append(f"  {label:<{width}}  {sparkline(ys)}  {_num(known[0])} -> {_num(known[-1])}")
    funnel: dict[str, int] = {}
    for m in lines:
        for k, v in m.validity_funnel.items():
            if k != "total" and isinstance(v, int):
                funnel[k] = funnel.get(k, 0) + v
    if funnel:
        rejected = ", ".join(f"{k} {v}" for k, v in sorted(funnel.items()) if k != "accepted") or "none"
        out.append(f"  designs: {sum(funnel.values())} attempts, {funnel.get('accepted', 0)} accepted; "
                   f"rejected at: {rejected}")
    out += _time_and_memory(lines)
    if not any(m.episodes for m in lines):
        out.append("  warning: no episode was played in any iteration: every environment of the pool "
                   "failed before play (statuses and rejection stages are in the report)")
    out.append(f"  see it all: spadework report {run_dir}")
    return out


def _time_and_memory(lines: Sequence[IterationMetrics]) -> list[str]:
    """Each stage's seconds summed over the iterations (those that took a second or more) and
    the highest per-stage peak of resident memory, with where it fell.

    >>> m = IterationMetrics(iteration=0, seconds={"design": 200.0, "pool": 0.01, "play": 150.5},
    ...                      peak_rss_mib={"design": 6000, "play": 7300})
    >>> _time_and_memory([m, IterationMetrics(iteration=1, seconds={"play": 100.0})])
    ['  time: design 200 s, play 250 s; peak RSS 7.13 GiB (the play stage of iteration 0)']
    """
    spent: dict[str, float] = {}
    for m in lines:
        for stage, s in m.seconds.items():
            if isinstance(s, (int, float)):
                spent[stage] = spent.get(stage, 0.0) + s
    shown = [f"{stage} {s:.0f} s" for stage, s in spent.items() if s >= 1]
    peaks = [(mib, m.iteration, stage) for m in lines for stage, mib in m.peak_rss_mib.items()]
    if not shown and not peaks:
        return []
    text = "  time: " + (", ".join(shown) or "-")
    if peaks:
        mib, i, stage = max(peaks)
        text += f"; peak RSS {mib / 1024:.2f} GiB (the {stage} stage of iteration {i})"
    return [text]

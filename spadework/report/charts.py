"""The report's plots, each drawn from named fields of the run's metrics or archive.

A curve's series are dotted paths into a ``metrics.jsonl`` line (``agent_return.no_hint``,
``train.importance_ratio.agent.mean``: a field of the line's record, then keys); the path
travels with the plot (``data-metric``), so what a plot shows can be checked against the line
it was read from. Win rates come from the
archive's per-iteration play statistics (exact rates, not the 10-bin histogram), the funnel from
the designer attempts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from spadework.figures import STAGES, IterationMetrics
from spadework.report.collect import RunData
from spadework.report.svg import PALETTE, line_chart, stacked_bars, strip_chart

#: (key, title, {series name: metric path}) of the curves, in page order.
CURVES: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("agent_return", "agent return (mean per episode)",
     {"no hint": "agent_return.no_hint", "hint": "agent_return.hint"}),
    ("regret", "regret (hinted - unhinted return, mean over envs)", {"mean regret": "mean_regret"}),
    ("designer_reward", "designer reward (credited this iteration)",
     {"mean": "designer_reward.mean", "min": "designer_reward.min", "max": "designer_reward.max"}),
    ("losses", "loss per role (share of the GRPO loss)",
     {"agent": "losses.agent", "designer": "losses.designer"}),
    ("importance_ratio", "importance ratio sampler/learner (mean)",
     {"agent": "train.importance_ratio.agent.mean", "designer": "train.importance_ratio.designer.mean"}),
    ("importance_capped", "share of tokens above the TIS cap",
     {"agent": "train.importance_ratio.agent.capped_share",
      "designer": "train.importance_ratio.designer.capped_share"}),
    ("format_share", "share of replies with a well-formed action",
     {"no hint": "agent_format_share.no_hint", "hint": "agent_format_share.hint"}),
    ("grad", "learner: gradient norm, KL, entropy",
     {"grad norm": "train.grad_norm", "kl": "train.kl", "entropy": "train.entropy"}),
    ("tokens", "tokens generated", {"design": "tokens.design", "play": "tokens.play"}),
    ("pool", "pool: environments played, fresh designs",
     {"played": "pool.size", "fresh": "pool.fresh"}),
)



def metric(line: IterationMetrics | Mapping[str, Any], path: str) -> float | None:
    """The number at a dotted ``path`` of a metrics line (its record's field, then keys into
    the field's mapping); None where absent or not a number.

    >>> line = IterationMetrics(iteration=0, agent_return={"no_hint": 0.5}, mean_regret=0.25)
    >>> metric(line, "agent_return.no_hint"), metric(line, "mean_regret"), metric(line, "x.y")
    (0.5, 0.25, None)
    >>> metric({"a": {"b": 0.5, "c": None}, "d": True}, "a.b"), metric({"d": True}, "d") is None
    (0.5, True)
    """
    v: Any = line
    for part in path.split("."):
        if isinstance(v, IterationMetrics) and part in IterationMetrics.FIELDS:
            v = getattr(v, part)
        elif isinstance(v, Mapping) and part in v:
            v = v[part]
        else:
            return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _curve(data: RunData, key: str, title: str, paths: Mapping[str, str], **kw: Any) -> str:
    xs = [m.iteration for m in data.metrics]
    series = {name: [metric(m, p) for m in data.metrics] for name, p in paths.items()}
    return line_chart(key, title, xs, series, sources=dict(paths), **kw)


def curves(data: RunData) -> list[str]:
    """The per-iteration curves: returns, regret, designer reward, losses, importance ratios,
    format share, learner figures, tokens, pool, and wall time per stage."""
    out = [_curve(data, key, title, paths) for key, title, paths in CURVES]
    stages = [s for s in STAGES[:-1] if any(metric(m, f"seconds.{s}") for m in data.metrics)]
    out.append(_curve(data, "seconds", "wall time per stage (s)", {s: f"seconds.{s}" for s in stages}))
    return out


def eval_curves(data: RunData) -> list[str]:
    """Score per held-out suite over the iterations that evaluated (none when no iteration did)."""
    suites = sorted({s for m in data.metrics for s in ((m.eval or {}).get("suites") or {})})
    if not suites:
        return []
    return [_curve(data, "eval", "held-out evaluation: score per suite",
                   {s: f"eval.suites.{s}.score" for s in suites}, y_range=(0.0, 1.0))]


def win_rate_charts(data: RunData) -> list[str]:
    """Every played environment's win rate per iteration with the band, and the band's share."""
    lo, hi = data.band
    points = [(it, rate, env_id[:12]) for it, env_id, rate in data.win_rates]
    strip = strip_chart("win_rates", f"win rate of each played environment (band [{lo}, {hi}] shaded)",
                        points, band=data.band)
    share = _curve(data, "band_share", f"share of played environments in [{lo}, {hi}]",
                   {"in band": "band_share"}, y_range=(0.0, 1.0))
    return [strip, share]


def _outcome_colors(outcomes: Sequence[str]) -> dict[str, str]:
    colors = {"accepted": PALETTE[2]}
    others = [PALETTE[i] for i in (3, 1, 4, 0, 5, 6, 7)]
    for i, o in enumerate(x for x in outcomes if x != "accepted"):
        colors[o] = others[i % len(others)]
    return colors


def funnel_charts(data: RunData) -> list[str]:
    """Design attempts per iteration and per skill: accepted, and rejected by stage."""
    outcomes = sorted({o for f in (*data.funnel_by_iteration.values(), *data.funnel_by_skill.values())
                       for o in f}, key=lambda o: (o != "accepted", o))
    colors = _outcome_colors(outcomes)
    its = list(data.funnel_by_iteration)
    by_it = stacked_bars("funnel_iteration", "design attempts per iteration: accepted or rejected at", its,
                         {o: [data.funnel_by_iteration[i].get(o, 0) for i in its] for o in outcomes},
                         colors=colors)
    skills = list(data.funnel_by_skill)
    by_skill = stacked_bars("funnel_skill", "design attempts per skill", skills,
                            {o: [data.funnel_by_skill[s].get(o, 0) for s in skills] for o in outcomes},
                            colors=colors, horizontal=True, x_label="skill",
                            height=max(160, 70 + 22 * len(skills)))
    return [by_it, by_skill]

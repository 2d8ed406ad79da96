"""``spadework runs compare``: runs one after another, a block per run and a row per finished
iteration, as a table or as one JSON object.

Everything is read from each run's archive, opened read-only (:func:`open_run`), and from its
``eval/`` folder:

- the played environments come from the per-iteration play statistics (``env_plays``: one row
  per environment scored in an iteration) joined with the environments' origin. Their win rate
  is the **unhinted** arm's (the agent without the hint, the arm the curriculum targets; a win
  is a return > 0, see :func:`spadework.metrics.score_env`). Shown: how many were played and how
  many of them were designed (not starters), the shares whose win rate lies in :data:`BAND`, is
  exactly 0 and exactly 1, the pooled win rate (wins / plays) and the mean regret;
- valid designs / attempts come from the designer attempts, on iterations whose design stage ran;
- from the iteration's metrics record (the ``metrics.jsonl`` line): the agent's mean unhinted
  return, the mean designer reward credited that iteration, the train stage's per-role losses,
  the wall time (the stages' seconds, summed) and the in-run evaluation's scores;
- held-out evaluation before and after training: when ``RUN_DIR/eval/before`` and
  ``RUN_DIR/eval/after`` each hold a ``spadework eval --out`` folder, the paired comparison of
  :func:`spadework.evaluate.compare.compare_paths` (after - before, bootstrap CI, Holm).

A figure an iteration does not have (no design stage, no update, ``--no-train``) is None:
``-`` in the table, ``null`` in JSON. The band is the reward's default plateau for every run, so
that runs compare on one scale (the archive does not keep a run's ``[reward]`` band; the
``band_share`` of its metrics uses that one).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadework.archive import views
from spadework.archive.records import unpack_floats
from spadework.evaluate.judge import EvalError
from spadework.figures import IterationMetrics
from spadework.metrics import band_share, stats
from spadework.policy.registry import DEFAULT_MODEL
from spadework.report.charts import metric
from spadework.report.collect import open_run
from spadework.report.terminal import sparkline
from spadework.reward import RewardConfig, episode_return, win_rate

#: The win-rate band [lo, hi] of every run's table: the reward's default plateau.
BAND = (RewardConfig.lo, RewardConfig.hi)
#: The longest sparkline: longer runs are averaged into this many blocks of iterations.
SPARK_WIDTH = 40
#: Where a run keeps the held-out evaluations made before and after it (``eval --out``).
BEFORE, AFTER = Path("eval") / "before", Path("eval") / "after"


@dataclass(frozen=True)
class IterationRow:
    """One finished iteration's figures (None where the iteration has none)."""

    iteration: int
    valid_designs: int | None
    design_attempts: int | None
    played: int
    played_designed: int
    band_share: float | None
    win_rate_zero_share: float | None
    win_rate_one_share: float | None
    unhinted_win_rate: float | None
    mean_regret: float | None
    unhinted_return: float | None
    designer_reward: float | None
    loss_agent: float | None
    loss_designer: float | None
    seconds: float | None
    hinted_win_rate: float | None
    well_formed_share: float | None
    cut_share: float | None
    learnable_share: float | None = None
    mean_level: float | None = None
    peak_rss_mib: int | None = None  # the highest of its stages' peaks (None: not measured)


@dataclass(frozen=True)
class Replayed:
    """The agent on environments played again at the same level: per (environment, level)
    played in two iterations or more, its unhinted win rate at the first play and at the
    latest, and the paired mean change with its 95% bootstrap CI over the pairs.

    Only plays after which the level controller kept the level count (``moved`` plays, those
    that sent the environment up or down, are left out: ``left_out`` of them). Which play is
    an (environment, level)'s latest is chosen by the controller: an environment leaves a level
    at a play of at least ``level_up_at`` (or of 0), so its latest play there is often the
    one that took it away, while its first play, to be played there again, mostly held it.
    Pairing those compares plays selected differently and shows a gain where the agent has
    not changed (an agent that wins each play with probability 0.5 at every level, 5 plays, 3
    levels, 12 iterations: +0.21 with every play counted, +0.00 with the held plays only;
    ``tests/test_runs_compare.py``). Held plays on both ends are drawn alike, so a change
    between them is the agent's; a gain large enough to move the level up is left out too,
    so the figure understates learning rather than inventing it."""

    pairs: int
    first: float
    latest: float
    diff: float
    ci95: tuple[float, float]
    #: each pair's (first, latest) win rate, in the order the run first played them: what
    #: :func:`pooled_replayed` pools over runs
    first_latest: tuple[tuple[float, float], ...] = ()
    #: plays left out because the controller moved their environment's level after them
    left_out: int = 0


@dataclass(frozen=True)
class PooledReplayed:
    """:class:`Replayed` pooled over runs (``runs compare --pool``): every run's pairs, the
    mean change, its 95% bootstrap CI with pairs resampled within their run (each run keeps its
    number of pairs), and the two-sided sign-flip p-value of a mean change of 0. Runs are
    independent trajectories only when they differ from their first sampled token (another
    seed, or another thread count or attention); runs that share their training text share
    their pairs' outcomes, and pooling them narrows the interval without new evidence."""

    runs: tuple[str, ...]
    pairs: int
    first: float
    latest: float
    diff: float
    ci95: tuple[float, float]
    p: float


@dataclass(frozen=True)
class EvalScore:
    """One suite's score of an in-run evaluation (after ``iteration``)."""

    iteration: int
    suite: str
    score: float
    ci95: tuple[float, float]
    items: int


@dataclass(frozen=True)
class EvalDiff:
    """One scope (a suite overall, or a bucket) of the before/after comparison, after - before."""

    suite: str
    scope: str
    items: int
    before: float
    after: float
    diff: float
    ci95: tuple[float, float]
    p_holm: float
    significant: bool


@dataclass(frozen=True)
class RoleModel:
    """The model one role (``designer``, ``agent``) played with. ``default``: the run named
    none, so it ran the registry's default (named as this code knows it); ``frozen``: the
    role's weights never changed (``--freeze``)."""

    role: str
    model: str
    default: bool
    frozen: bool


@dataclass(frozen=True)
class RunFigures:
    """One run's figures. ``models``: the designer's and the agent's (empty when the archive
    keeps no run settings). ``in_progress``: the iteration under way and its last committed
    stage, or None. ``before_after``: None when there is no before/after evaluation or it cannot
    be compared; ``before_after_note`` then says which."""

    run_dir: str
    preset: str | None
    models: tuple[RoleModel, ...]
    iterations: tuple[IterationRow, ...]
    in_progress: dict[str, Any] | None
    in_run_eval: tuple[EvalScore, ...]
    before_after: tuple[EvalDiff, ...] | None
    before_after_note: str
    notes: tuple[str, ...] = ()
    replayed: Replayed | None = None

    @property
    def total_seconds(self) -> float | None:
        known = [r.seconds for r in self.iterations if r.seconds is not None]
        return round(math.fsum(known), 3) if known else None

    @property
    def peak_rss_mib(self) -> int | None:
        """The run's highest per-stage peak of resident memory (None: not measured)."""
        return max((r.peak_rss_mib for r in self.iterations if r.peak_rss_mib is not None),
                   default=None)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_seconds": self.total_seconds,
                "peak_rss_mib": self.peak_rss_mib, "iterations_finished": len(self.iterations)}


# -- reading ---------------------------------------------------------------------------------------

def run_figures(run_dir: str | Path) -> RunFigures:
    """Read one run (see the module docstring). Raises ArchiveError when ``run_dir`` is not a run
    directory or its archive cannot be read (a newer schema, not an archive)."""
    run_dir = Path(run_dir)
    with open_run(run_dir) as archive:
        metrics = {r.iteration: r.line() for r in archive.iterations()}
        played: dict[int, list[Any]] = defaultdict(list)
        for r in views.plays_with_origin(archive):
            played[r["iteration"]].append(r)
        designs: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for it, _, outcome, k in views.attempt_counts(archive):
            designs[it][0 if outcome == "accepted" else 1] += k
        hinted: dict[int, list[float]] = defaultdict(list)
        for it, rewards, terminated in views.hinted_rewards(archive):
            hinted[it].append(episode_return(unpack_floats(rewards), terminated))
        cut = views.unhinted_length_cut_share(archive)
        moved = {(c["env_id"], c["iteration"]) for c in archive.level_changes()}
        config = archive.load_state("config") or {}
        progress = archive.load_state("progress")
        notes = (archive.note,) if archive.note else ()
    rows = tuple(_row(i, m, played.get(i, []), designs.get(i), hinted.get(i, []), cut.get(i))
                 for i, m in sorted(metrics.items()))
    under_way = None
    if progress is not None and progress.get("stage") != "store":
        under_way = {"iteration": progress["iteration"], "stage": progress["stage"]}
    before_after, note = _before_after(run_dir)
    preset = config.get("preset") or next((m.preset for m in metrics.values()), None)
    return RunFigures(str(run_dir), preset, _models(config), rows, under_way,
                      _in_run_eval(metrics), before_after, note, notes,
                      replayed([r for rs in played.values() for r in rs], moved))


def replayed(plays: Sequence[Mapping[str, Any]],
             moved: Collection[tuple[str, int]] = ()) -> Replayed | None:
    """:class:`Replayed` from ``env_plays`` rows (env_id, iteration, level, win_rate), leaving
    out the plays after which the level controller moved the environment (``moved``: its
    (env_id, iteration) pairs, from the archive's ``level_changes``); None when no
    (environment, level) was played twice.

    >>> rows = [{"env_id": "a", "iteration": 0, "level": 1, "win_rate": 0.2},
    ...         {"env_id": "a", "iteration": 3, "level": 1, "win_rate": 0.6},
    ...         {"env_id": "b", "iteration": 1, "level": 2, "win_rate": 0.5},
    ...         {"env_id": "b", "iteration": 2, "level": 2, "win_rate": 0.5},
    ...         {"env_id": "b", "iteration": 0, "level": 1, "win_rate": 1.0}]
    >>> r = replayed(rows)
    >>> r.pairs, round(r.first, 2), round(r.latest, 2), round(r.diff, 2), r.first_latest
    (2, 0.35, 0.55, 0.2, ((0.2, 0.6), (0.5, 0.5)))
    >>> r = replayed(rows + [{"env_id": "a", "iteration": 5, "level": 1, "win_rate": 1.0}],
    ...              moved={("a", 5), ("b", 0)})
    >>> r.first_latest, r.left_out
    (((0.2, 0.6), (0.5, 0.5)), 2)
    """
    # here: keeps numpy out of `spadework --help` (tests/test_package.py)
    from spadework.evaluate.stats import bootstrap_ci

    moved = set(moved)
    by_key: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
    left_out = 0
    for r in plays:
        if (r["env_id"], r["iteration"]) in moved:
            left_out += 1
            continue
        by_key[(r["env_id"], r["level"])].append((r["iteration"], r["win_rate"]))
    pairs = [(min(v)[1], max(v)[1]) for v in by_key.values() if len(v) > 1]
    if not pairs:
        return None
    diffs = [b - a for a, b in pairs]
    lo, hi = bootstrap_ci(diffs)
    return Replayed(len(pairs), stats([a for a, _ in pairs])["mean"],
                    stats([b for _, b in pairs])["mean"], stats(diffs)["mean"], (lo, hi),
                    tuple(pairs), left_out)


def pooled_replayed(runs: Sequence[RunFigures]) -> PooledReplayed | None:
    """The same-level replay pairs of every run in ``runs`` pooled (see
    :class:`PooledReplayed`); runs without a pair add none; None when no run has one.

    >>> def run(name, pairs):
    ...     return RunFigures(name, None, (), (), None, (), None, "", (),
    ...                       Replayed(len(pairs), 0, 0, 0, (0, 0), tuple(pairs)))
    >>> p = pooled_replayed([run("a", [(0.0, 0.4), (0.2, 0.6)]), run("b", [(0.6, 0.4)])])
    >>> p.runs, p.pairs, round(p.first, 2), round(p.latest, 2), round(p.diff, 2), p.p
    (('a', 'b'), 3, 0.27, 0.47, 0.2, 0.5)
    """
    # here: keeps numpy out of `spadework --help` (tests/test_package.py)
    from spadework.evaluate.stats import bootstrap_ci, sign_flip_pvalue

    have = [r for r in runs if r.replayed is not None and r.replayed.first_latest]
    if not have:
        return None
    pairs = [(r.run_dir, a, b) for r in have for a, b in r.replayed.first_latest]
    diffs = [b - a for _, a, b in pairs]
    lo, hi = bootstrap_ci(diffs, strata=[name for name, _, _ in pairs])
    return PooledReplayed(tuple(r.run_dir for r in have), len(pairs),
                          stats([a for _, a, _ in pairs])["mean"],
                          stats([b for _, _, b in pairs])["mean"], stats(diffs)["mean"],
                          (lo, hi), sign_flip_pvalue(diffs))


def _models(config: Mapping[str, Any]) -> tuple[RoleModel, ...]:
    """Each role's model from the run's stored settings (archives from before roles could have
    their own model keep ``model`` only: both roles played it)."""
    if not config:
        return ()
    out = []
    for role in ("designer", "agent"):
        name = config.get(f"{role}_model", config.get("model"))
        out.append(RoleModel(role, name or DEFAULT_MODEL, not name, role in (config.get("frozen") or ())))
    return tuple(out)


def _models_text(models: Sequence[RoleModel]) -> str:
    """
    >>> d, a = RoleModel("designer", "m", True, False), RoleModel("agent", "m", True, False)
    >>> _models_text([d, a])
    'model m (default)'
    >>> _models_text([RoleModel("designer", "big", False, True), a])
    'designer model big (frozen), agent model m (default)'
    """
    def name(m: RoleModel) -> str:
        return m.model + " (default)" * m.default

    if not models:
        return "model -"
    frozen = [m.role for m in models if m.frozen]
    if len({(m.model, m.default) for m in models}) == 1:
        return f"model {name(models[0])}" + "".join(f", {r} frozen" for r in frozen)
    return ", ".join(f"{m.role} model {name(m)}" + " (frozen)" * m.frozen for m in models)


def _row(i: int, m: IterationMetrics, played: Sequence[Any], designs: list[int] | None,
         hinted: Sequence[float], cut: float | None) -> IterationRow:
    """One iteration from its metrics record, its ``env_plays`` rows, its attempts
    (accepted, rejected), its hinted plays' returns and the share of its unhinted replies cut
    at the token limit."""
    rates = [r["win_rate"] for r in played]
    regrets = [r["regret"] for r in played if r["regret"] is not None]
    plays = sum(r["plays"] for r in played)
    ran_design = bool(m.regenerated) or designs is not None
    seconds = [v for v in m.seconds.values() if isinstance(v, (int, float))]
    return IterationRow(
        iteration=i,
        valid_designs=(designs or [0, 0])[0] if ran_design else None,
        design_attempts=sum(designs or [0, 0]) if ran_design else None,
        played=len(played), played_designed=sum(1 for r in played if r["origin"] == "designed"),
        band_share=band_share(rates, *BAND),
        win_rate_zero_share=_share(rates, 0.0), win_rate_one_share=_share(rates, 1.0),
        unhinted_win_rate=sum(r["wins"] for r in played) / plays if plays else None,
        mean_regret=stats(regrets)["mean"],
        unhinted_return=metric(m, "agent_return.no_hint"),
        designer_reward=metric(m, "designer_reward.mean"),
        loss_agent=metric(m, "losses.agent"), loss_designer=metric(m, "losses.designer"),
        seconds=round(math.fsum(seconds), 3) if seconds else None,
        hinted_win_rate=win_rate(hinted) if hinted else None,
        well_formed_share=metric(m, "agent_format_share.no_hint"), cut_share=cut,
        learnable_share=_learnable(rates),
        mean_level=stats([float(r["level"]) for r in played])["mean"],
        peak_rss_mib=max(m.peak_rss_mib.values(), default=None))


def _learnable(rates: Sequence[float]) -> float | None:
    """The share of ``rates`` strictly between 0 and 1: environments (each at its level) whose
    plays differ, so a group gives a gradient; None for no rates.

    >>> _learnable([0.0, 0.4, 1.0, 0.8]), _learnable([])
    (0.5, None)
    """
    return sum(1 for r in rates if 0 < r < 1) / len(rates) if rates else None


def _share(rates: Sequence[float], value: float) -> float | None:
    """The share of ``rates`` equal to ``value``; None for no rates.

    >>> _share([0.0, 0.5, 0.0, 1.0], 0.0), _share([], 1.0)
    (0.5, None)
    """
    return sum(1 for r in rates if r == value) / len(rates) if rates else None


def _in_run_eval(metrics: Mapping[int, IterationMetrics]) -> tuple[EvalScore, ...]:
    out = []
    for i, m in sorted(metrics.items()):
        for suite, s in sorted(((m.eval or {}).get("suites") or {}).items()):
            if s.get("score") is not None:
                out.append(EvalScore(i, suite, s["score"], tuple(s.get("ci95") or (s["score"],) * 2),
                                     s.get("items", 0)))
    return tuple(out)


def _before_after(run_dir: Path) -> tuple[tuple[EvalDiff, ...] | None, str]:
    """The comparison after - before, or None and why not."""
    # here: keeps numpy out of `spadework --help` (tests/test_package.py)
    from spadework.evaluate.compare import compare_paths

    before, after = run_dir / BEFORE, run_dir / AFTER
    if not before.is_dir() and not after.is_dir():
        return None, "no before/after eval"
    if not (before.is_dir() and after.is_dir()):
        have, lack = (before, after) if before.is_dir() else (after, before)
        return None, (f"no before/after eval: {have} exists but {lack} does not; write it with "
                      f"`spadework eval ... --out {lack}`")
    try:
        result = compare_paths(after, before)
    except EvalError as e:
        return None, f"before/after eval cannot be compared: {e.reason}"
    rows = tuple(EvalDiff(r["suite"], r["scope"], r["items"], r["b"], r["a"], r["diff"],
                          tuple(r["ci95"]), r["p_holm"], r["significant"])
                 for r in result["comparisons"])
    note = result["note"]
    if result["suites_only_in_one"]:
        note += f" Not compared (in one side only): {', '.join(result['suites_only_in_one'])}."
    return rows, note


def compare_runs(run_dirs: Sequence[str | Path]) -> list[RunFigures]:
    """:func:`run_figures` of each run, in the order given."""
    return [run_figures(d) for d in run_dirs]


def runs_json(runs: Sequence[RunFigures], pool: bool = False) -> dict[str, Any]:
    """What ``--json`` prints: the band and each run's figures under stable keys; with
    ``pool``, also ``pooled_replayed`` (:func:`pooled_replayed`, null when no run has a pair)."""
    out = {"band": list(BAND), "arm": "no_hint", "runs": [r.to_dict() for r in runs]}
    if pool:
        pooled = pooled_replayed(runs)
        out["pooled_replayed"] = None if pooled is None else dataclasses.asdict(pooled)
    return out


# -- the table -------------------------------------------------------------------------------------

#: (header, IterationRow field, format) of the table's columns after ``it``, ``designs``, ``played``.
COLUMNS = (
    ("level", "mean_level", "{:.1f}"), ("0<w<1", "learnable_share", "{:.2f}"),
    ("band", "band_share", "{:.2f}"), ("=1", "win_rate_one_share", "{:.2f}"),
    ("regret", "mean_regret", "{:.3f}"), ("d.reward", "designer_reward", "{:+.3f}"),
    ("loss ag", "loss_agent", "{:+.3g}"), ("loss des", "loss_designer", "{:+.3g}"),
    ("wall s", "seconds", "{:.1f}"),
)
WIDTHS = (3, 7, 7, 5, 5, 4, 4, 6, 8, 9, 9, 7)


def legend() -> list[str]:
    """The key printed under the tables (each line under 100 columns)."""
    lo, hi = BAND
    return [
        "key: designs  valid / attempted designs (- : no design stage that iteration)",
        "     played   pool environments played (of them designed, not starters)",
        "     level    the mean level they were played at;  0<w<1  the share whose unhinted win rate",
        "              is strictly between 0 and 1 (their plays differ: a gradient)",
        f"     band =1  share of the played environments whose unhinted win rate is in [{lo}, {hi}],",
        "              exactly 1 (unhinted: the agent without the hint, the arm the curriculum",
        "              targets; a win is a return > 0; exactly 0: 1 - 0<w<1 - =1, and in --json);",
        "              the curves: pooled wins / plays, mean return",
        "     regret   mean over the played environments of hinted - unhinted return",
        "     d.reward  mean designer reward credited",
        "     loss ag, loss des  the train stage's per-role loss (- : no update, or --no-train)",
        "     wall s   the iteration's stages' seconds, summed",
        "     hinted win rate  the hinted arm's wins / plays;  well-formed, cut  the shares of the",
        "              unhinted replies holding a move the host parsed (an episode's share,",
        "              averaged) and cut at the reply token limit",
    ]


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _line(cells: Sequence[str]) -> str:
    return "  ".join(c.rjust(w) for c, w in zip(cells, WIDTHS)).rstrip()


def _duration(seconds: float | None) -> str:
    """
    >>> _duration(75.0), _duration(5400.0), _duration(None)
    ('75 s', '1.50 h', '-')
    """
    if seconds is None:
        return "-"
    if seconds < 600:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.2f} h"


def _squeeze(values: Sequence[float | None], width: int = SPARK_WIDTH) -> list[float | None]:
    """At most ``width`` values: the means of consecutive blocks (None where a block has none).

    >>> _squeeze([1.0, 3.0, None, None, 5.0], 3)
    [2.0, None, 5.0]
    """
    if len(values) <= width:
        return list(values)
    k = math.ceil(len(values) / width)
    return [stats([v for v in values[j:j + k] if v is not None])["mean"]
            for j in range(0, len(values), k)]


def _curve(label: str, values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return f"{label} -"
    return f"{label} {sparkline(_squeeze(values))} {known[0]:.3g} -> {known[-1]:.3g}"


def format_run(run: RunFigures) -> list[str]:
    """One run's block: the summary line, its curves, the table, the evaluations."""
    runs = len(run.iterations)
    out = [f"== {run.run_dir}",
           f"   preset {run.preset or '-'}, {_models_text(run.models)}, {runs} iteration"
           f"{'s' if runs != 1 else ''} finished, {_duration(run.total_seconds)}",
           *([] if run.peak_rss_mib is None else
             [f"   peak resident memory {run.peak_rss_mib / 1024:.2f} GiB (the run's process, its "
              "highest stage)"]),
           *(f"   note: {n}" for n in run.notes)]
    if run.in_progress:
        out.append(f"   iteration {run.in_progress['iteration']} under way (committed through "
                   f"its {run.in_progress['stage']} stage)")
    if not run.iterations:
        out.append("   no iteration finished yet")
    else:
        out.append("   " + _curve("unhinted win rate", [r.unhinted_win_rate for r in run.iterations])
                   + "   " + _curve("unhinted return", [r.unhinted_return for r in run.iterations]))
        out.append("   " + _curve("hinted win rate", [r.hinted_win_rate for r in run.iterations])
                   + "   " + _curve("well-formed", [r.well_formed_share for r in run.iterations])
                   + "   " + _curve("cut", [r.cut_share for r in run.iterations]))
        out.append(_line(["it", "designs", "played", *(h for h, _, _ in COLUMNS)]))
        for r in run.iterations:
            designs = "-" if r.design_attempts is None else f"{r.valid_designs}/{r.design_attempts}"
            out.append(_line([str(r.iteration), designs, f"{r.played} ({r.played_designed})",
                              *(_cell(getattr(r, f), fmt) for _, f, fmt in COLUMNS)]))
    if run.replayed is not None:
        r = run.replayed
        out.append(f"   replayed at the same level: {r.pairs} (environment, level) pairs, unhinted win rate")
        out.append(f"     over the plays that kept their level ({r.left_out} that moved it "
                   "left out):")
        out.append(f"     {r.first:.2f} at the first play -> {r.latest:.2f} at the latest, "
                   f"{r.diff:+.2f} [{r.ci95[0]:+.2f}, {r.ci95[1]:+.2f}] (paired, 95% CI)")
    by_suite: dict[str, list[EvalScore]] = defaultdict(list)
    for s in run.in_run_eval:
        by_suite[s.suite].append(s)
    for suite, scores in by_suite.items():
        out.append(f"   in-run eval {suite}: " + ", ".join(
            f"it {s.iteration} {100 * s.score:.1f}% [{100 * s.ci95[0]:.1f}, {100 * s.ci95[1]:.1f}]"
            for s in scores) + f" ({scores[-1].items} items)")
    if run.before_after is None:
        out.append(f"   {run.before_after_note}")
    else:
        out.append(f"   held-out eval, before -> after (pp, 95% CI): {len(run.before_after)} scopes")
        suite_w = max([18, *(len(d.suite) for d in run.before_after)])
        scope_w = max([12, *(len(d.scope) for d in run.before_after)])
        for d in run.before_after:
            out.append(f"     {d.suite:<{suite_w}} {d.scope:<{scope_w}} {100 * d.before:5.1f} -> {100 * d.after:5.1f}"
                       f"  {100 * d.diff:+6.1f} [{100 * d.ci95[0]:+.1f}, {100 * d.ci95[1]:+.1f}]"
                       f"  p(Holm) {d.p_holm:.3f}{' *' if d.significant else ''}  ({d.items} items)")
        out.append(f"     {run.before_after_note}")
    return out


def format_pooled(pooled: PooledReplayed | None) -> list[str]:
    """The ``--pool`` block: the replay pairs of every run, pooled."""
    if pooled is None:
        return ["== pooled: no run has an (environment, level) played twice", ""]
    n = len(pooled.runs)
    return [f"== pooled over {n} run{'s' if n != 1 else ''}: "
            f"replayed at the same level, {pooled.pairs} (environment, level) pairs",
            f"   unhinted win rate {pooled.first:.2f} at the first play -> {pooled.latest:.2f} at "
            f"the latest, {pooled.diff:+.2f} [{pooled.ci95[0]:+.2f}, {pooled.ci95[1]:+.2f}]",
            f"   (paired, 95% CI resampling pairs within each run; sign-flip p {pooled.p:.3g}).",
            "   Pool only runs that differ from their first sampled token: runs that share",
            "   their training text share their pairs' outcomes.", ""]


def format_runs(runs: Sequence[RunFigures], pool: bool = False) -> str:
    """The text of ``spadework runs compare``: each run's block, with ``pool`` the pooled
    replays (:func:`format_pooled`), then the key."""
    out: list[str] = []
    for run in runs:
        out += [*format_run(run), ""]
    if pool:
        out += format_pooled(pooled_replayed(runs))
    return "\n".join(out + legend())

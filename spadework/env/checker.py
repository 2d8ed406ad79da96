"""Staged validation of environment code: ``check()`` -> :class:`CheckReport`.

Stages run in order and stop at the first failure; each is a named :class:`CheckResult` with a
reason a designer can act on, and each stage is a public function testable on its own:

1. ``extract``      the module out of a raw designer reply (omitted when given a module);
2. ``static``       parse, import allowlist, no escapes, no import-time side effects, contract
                    class (:mod:`spadework.env.static`: defence in depth, not the boundary);
3. ``load``         instantiate inside the sandbox within its limits, read ``LEVELS`` (an
                    integer from 1 to MAX_LEVELS) and build every level; the top levels that
                    give the same game on every determinism seed are one (``same_levels``);
4. ``contract``     reset/step return types on probe actions, a finite reward in [-1, 1],
                    boolean flags, a dict info, an observation size cap, max_turns honoured;
5. ``determinism``  the same seed gives the same observation, tools, solution() and step
                    results, on the same instance reset again and on a second instance;
6. ``solvable``     replaying solution() from a fresh reset wins (terminated, positive reward)
                    on every one of ``solvable_seeds`` seeds drawn as play draws them
                    (:mod:`spadework.env.solvable`);
7. ``visible``      games: solution() plays from what the agent sees, no two seeds show the
                    same observations and get different moves (:mod:`spadework.env.visible`);
8. ``readable``     games: a concrete example move first, and the format restated after a
                    malformed and after a wrong move (:mod:`spadework.env.readable`);
9. ``not_trivial``  random, empty and repeated actions, one seed's solution() replayed on
                    other seeds, and the example moves shown copied back, each win at most
                    ``trivial_rate`` of episodes at the top level, win no more often as the
                    level rises, and the answer is not printed in the first observation at any
                    level;
10. ``novelty``     not a near-duplicate of existing code (:mod:`spadework.env.novelty`; omitted
                    when nothing is given to compare against).

Levels: stages 4 to 9 run at every level of an environment that declares ``LEVELS`` > 1, each
level's summary on its own line and a failure naming its level; an environment without levels
is built and checked exactly as before (no ``level`` keyword is passed).

The whole check runs under one time budget (``CheckConfig.budget_seconds``, see
:mod:`spadework.env.budget`): its deadline travels with every call into the sandbox, and running
out rejects the candidate at the stage it reached, saying how far that stage got. Each stage is
charged its own failures and time: instance builds are the load stage's (the load stage caps one
build at ``init_seconds``, and the seconds of later builds are added to its row).

Generated code runs only inside the sandbox the caller passes in, which is the security
boundary; the checker never starts a sandbox per candidate. Departures from the reference, which
checks only that three steps return the right types with a reward in [-10, 10] and strict
``bool`` flags: we bound rewards to [-1, 1] (the agent's reward is clamped there anyway), accept
numpy booleans (the sandbox converts them), and prove determinism and solvability, which the
reference never checks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from spadework.env import pyparse
from spadework.env.budget import Budget, BudgetedHandle, CheckProgress, ProgressFn
from spadework.env.contract import MAX_LEVELS
from spadework.env.extract import extract_env_module
from spadework.env.novelty import Match, NoveltyIndex, most_similar
from spadework.env.probe import answer_of, call_env, where_in_env
from spadework.env.readable import readable_stage
from spadework.env.solvable import SolutionLoss, solution_losses, solvable_seeds, solvable_stage
from spadework.env.stages import (
    contract_stage,
    determinism_stage,
    not_trivial_stage,
    same_levels,
    trivial_rates,
)
from spadework.env.static import check_static
from spadework.env.visible import visible_stage
from spadework.errors import ContractError, EnvError, EnvLoadError, EnvTimeout, ExtractError
from spadework.settings.check import (
    MAX_SEEDS,
    MAX_TURNS,
    MAX_TURNS_WHY,
    SEEDS_WHY,
    CheckConfig,
    validate_count,
    validate_seconds,
)
from spadework.types import CheckReport, CheckResult, env_id_of

__all__ = [
    "MAX_SEEDS", "MAX_TURNS", "MAX_TURNS_WHY", "SEEDS_WHY", "STAGES", "CheckConfig", "CheckProgress",
    "SolutionLoss", "answer_of", "check", "contract_stage", "determinism_stage", "format_report",
    "load_stage", "looks_like_module", "not_trivial_stage", "novelty_stage", "readable_stage",
    "report_dict", "solution_losses", "solvable_seeds", "solvable_stage", "validate_count",
    "validate_seconds", "visible_stage",
]

STAGES = ("extract", "static", "load", "contract", "determinism", "solvable", "visible", "readable",
          "not_trivial", "novelty")


def load_stage(sandbox: Any, code: str, class_name: str, cfg: CheckConfig,
               budget: Budget | None = None) -> tuple[int, str]:
    """Instantiate the class inside the sandbox (its limits apply), within ``cfg.init_seconds``
    and the budget, read its ``LEVELS`` and, when it declares more than one, build it at every
    level; returns (levels, summary)."""
    budget = budget or Budget.unlimited()
    started = time.monotonic()
    with _build(sandbox, code, class_name, cfg, budget, None) as handle:
        levels = levels_of(call_env("LEVELS", handle.levels))
    for level in range(1, levels + 1) if levels > 1 else ():
        with _build(sandbox, code, class_name, cfg, budget, level):
            pass
    built = f"levels 1-{levels} built" if levels > 1 else "instantiated"
    return levels, (f"{class_name}(max_turns={cfg.max_turns}) {built} in the sandbox in "
                    f"{time.monotonic() - started:.2f} s")


@contextmanager
def _build(sandbox: Any, code: str, class_name: str, cfg: CheckConfig, budget: Budget,
           level: int | None) -> Iterator[Any]:
    """One instance built for the load stage, every failure said in the designer's terms."""
    build = f"{class_name}(max_turns={cfg.max_turns}{'' if level is None else f', level={level}'})"
    limits = getattr(sandbox, "limits", None)
    cap = min(cfg.init_seconds, limits.load_seconds) if limits is not None else cfg.init_seconds
    if budget.left() <= 0:
        raise budget.exceeded(f"before building {build}")
    started = time.monotonic()
    try:
        handle = sandbox.load(code, max_turns=cfg.max_turns, class_name=class_name,
                              deadline=min(started + cap, budget.deadline), level=level)
    except EnvTimeout as e:
        if budget.left() <= 0:
            raise budget.exceeded(f"while building {build}") from e
        raise EnvLoadError(
            f"import and {build} took longer than {cap:g} s (CheckConfig.init_seconds or "
            "Limits.load_seconds): every episode builds a fresh instance, so keep __init__ "
            "cheap and build each puzzle in reset()") from e
    except EnvLoadError as e:
        lines = [line.strip() for line in e.reason.splitlines() if line.strip()]
        raise EnvLoadError(f"import or {build} raised "
                           f"{lines[-1] if lines else e.reason}{where_in_env(e.reason)}") from e
    with handle:
        yield handle


def levels_of(value: object) -> int:
    """The number of levels a class declares (its ``LEVELS``), or ContractError saying what to
    write.

    >>> levels_of(3)
    3
    >>> levels_of("3")
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: LEVELS is '3' (str); set LEVELS to a whole number from 1 to 10 (1 when the environment has no difficulty levels)
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LEVELS:
        raise ContractError(f"LEVELS is {value!r} ({type(value).__name__}); set LEVELS to a whole "
                            f"number from 1 to {MAX_LEVELS} (1 when the environment has no "
                            "difficulty levels)")
    return value


def _each_level(levels: int, run: Callable[[int | None], str]) -> str:
    """Run one stage at every level (``None`` when there is one: built without a level
    keyword), each summary on its own line; a failure names its level."""
    if levels == 1:
        return run(None)
    summaries = []
    for level in range(1, levels + 1):
        try:
            summaries.append(run(level))
        except ContractError as e:
            raise ContractError(f"level {level}: {e.reason}") from e
    return _by_level(summaries)


def _by_level(summaries: list[str]) -> str:
    """One line per run of levels with the same summary.

    >>> print(_by_level(["ok", "ok", "slow"]))
    levels 1-2: ok
    level 3: slow
    """
    lines, start = [], 0
    for i in range(1, len(summaries) + 1):
        if i == len(summaries) or summaries[i] != summaries[start]:
            span = f"level {start + 1}" if i - start == 1 else f"levels {start + 1}-{i}"
            lines.append(f"{span}: {summaries[start]}")
            start = i
    return "\n".join(lines)


def novelty_stage(code: str, index: NoveltyIndex, cfg: CheckConfig) -> str:
    """Not a near-duplicate (Jaccard of normalised shingles below the threshold: the entry's
    own, else ``cfg.novelty_threshold``) of any indexed environment."""
    def limit(m: Match) -> float:
        return cfg.novelty_threshold if m.threshold is None else m.threshold

    matches = index.matches(code)  # each entry scored once, for both verdicts
    copy = most_similar(m for m in matches if m.similarity >= limit(m))
    if copy is not None:
        raise ContractError(
            f"near-duplicate of environment {copy.env_id[:12]} (similarity {copy.similarity:.2f} "
            f">= {limit(copy):.2f}); design a different mechanic, not a renamed copy"
        )
    match = most_similar(matches)
    if match is None:
        return "nothing to compare against"
    return f"most similar: {match.env_id[:12]} at {match.similarity:.2f} of {len(index)} compared"


def looks_like_module(text: str) -> bool:
    """A text that parses as Python is a module; anything else is a reply to extract from.

    >>> looks_like_module("x = 1"), looks_like_module("Here is the game:\\n```python\\nx = 1\\n```")
    (True, False)
    """
    try:
        pyparse.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


class _Stages:
    """Runs stages in order under one budget, timing each and recording the first failure,
    after which it runs nothing more. Failures crossing here are typed (ContractError, including
    CheckBudgetExceeded, ExtractError, EnvError). Instance builds made by later stages are
    charged to the load stage's row."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.results: list[CheckResult] = []

    @property
    def failed(self) -> bool:
        return any(not r.passed for r in self.results)

    def run(self, stage: str, fn: Callable[[], tuple[Any, str]]) -> Any:
        if self.failed:
            return None
        self.budget.begin(stage)
        start = time.perf_counter()
        value, passed = None, False
        try:
            value, reason = fn()
            passed = True
        except (ContractError, ExtractError, EnvError) as e:
            reason = e.reason
        seconds = time.perf_counter() - start
        builds = self.budget.build_seconds if stage != "load" else 0.0
        self.results.append(CheckResult(stage, passed, reason, max(0.0, seconds - builds)))
        loads = [i for i, r in enumerate(self.results) if r.stage == "load"]
        if builds and loads:
            load = self.results[loads[0]]
            self.results[loads[0]] = replace(load, seconds=load.seconds + builds)
        self.budget.end(passed)
        return value


def _extract(reply: str) -> tuple[str, str]:
    module = extract_env_module(reply)
    repairs = f"; repairs: {', '.join(module.repairs)}" if module.repairs else ""
    return module.code, f"a module of {len(module.code.splitlines())} lines{repairs}"


def check(
    source: str,
    *,
    sandbox: Any,
    seeds: int | None = None,
    config: CheckConfig | None = None,
    existing: Iterable[str] | NoveltyIndex = (),
    module: bool | None = None,
    progress: ProgressFn | None = None,
) -> CheckReport:
    """Validate one candidate environment, stage by stage (see the module docstring).

    ``source`` is module code or a raw designer reply (``module=None`` decides by whether it
    parses as Python; pass ``module=True`` for a ``.py`` file, so a syntax error is reported by
    the static stage rather than by extraction). ``sandbox`` is a started
    :class:`spadework.sandbox.Sandbox` owned by the caller. ``seeds`` is how many play-style
    seeds solution() must win on (default ``config.solvable_seeds``; at most MAX_SEEDS).
    ``existing`` is the code of environments to compare against for novelty, or a prebuilt
    :class:`NoveltyIndex` (reuse one across candidates). ``progress`` receives a
    :class:`~spadework.env.budget.CheckProgress` as each stage starts, advances and ends.

    The whole check takes at most ``config.budget_seconds`` of wall-clock time, plus the
    host-side stages (extract, static, novelty), which run no environment code and are bounded
    by the reply's size cap.
    """
    cfg = config or CheckConfig()
    n_seeds = validate_count("seeds", cfg.solvable_seeds if seeds is None else seeds, MAX_SEEDS,
                             SEEDS_WHY)
    budget = Budget(cfg.budget_seconds, progress)
    stages = _Stages(budget)
    code: str | None = source
    if not (looks_like_module(source) if module is None else module):
        code = stages.run("extract", lambda: _extract(source))
    if code is None:
        return CheckReport(env_id=None, class_name=None, results=tuple(stages.results),
                           max_turns=cfg.max_turns)
    info = stages.run("static", lambda: _static(code, cfg))
    name = info.class_name if info else None
    env_id = env_id_of(code)

    def opener(level: int | None) -> Callable[[], Any]:
        @contextmanager
        def open_env() -> Iterator[BudgetedHandle]:
            try:
                handle = budget.call("building an instance", sandbox.load, code, max_turns=cfg.max_turns,
                                     class_name=name, build=True, level=level)
            except EnvError as e:
                raise type(e)(f"building a fresh {name} for this stage failed (the load stage's "
                              f"build had passed): {e.reason}") from e
            with handle:
                yield BudgetedHandle(handle, budget)
        return open_env

    def load() -> tuple[int, str]:
        levels, summary = load_stage(sandbox, code, name, cfg, budget)
        same = same_levels(opener, levels, cfg, budget) if levels > 1 else None
        if same is None:
            return levels, summary
        lowest, seeds = same
        above, played = ("", "as one level") if lowest == 1 else (f" above level {lowest}",
                                                                  f"with {lowest} levels")
        return lowest, (f"{summary}; levels {lowest}-{levels} give the same game on seeds "
                        f"{seeds[0]}..{seeds[-1]} (self.level changes nothing the agent sees"
                        f"{above}), so it is checked and played {played}")

    levels = stages.run("load", load) or 1
    solvable = solvable_seeds(cfg.seed, env_id, n_seeds)
    setting = info.setting if info else "games"
    stages.run("contract", lambda: (None, _each_level(levels, lambda lv: contract_stage(opener(lv), cfg, budget))))
    stages.run("determinism", lambda: (None, _each_level(
        levels, lambda lv: determinism_stage(opener(lv), cfg, budget))))
    stages.run("solvable", lambda: (None, _each_level(
        levels, lambda lv: solvable_stage(opener(lv), cfg, solvable, budget))))
    stages.run("visible", lambda: (None, _each_level(
        levels, lambda lv: visible_stage(opener(lv), cfg, solvable, budget, setting))))
    stages.run("readable", lambda: (None, _each_level(
        levels, lambda lv: readable_stage(opener(lv), cfg, setting, budget))))
    stages.run("not_trivial", lambda: (None, _not_trivial(levels, opener, cfg, budget)))
    index = existing if isinstance(existing, NoveltyIndex) else NoveltyIndex(existing, k=cfg.shingle_size)
    if len(index):
        stages.run("novelty", lambda: (None, novelty_stage(code, index, cfg)))
    return CheckReport(env_id=env_id, class_name=name, results=tuple(stages.results),
                       max_turns=cfg.max_turns, levels=levels)


def _not_trivial(levels: int, opener: Callable[[int | None], Any], cfg: CheckConfig,
                 budget: Budget) -> str:
    """The not_trivial stage at every level: the answer never in the first observation, the
    trivial strategies under ``trivial_rate`` at the top level (the level a curriculum ends at),
    and no strategy winning more than ``trivial_rate`` more often at a higher level than at a
    lower one, by a margin Fisher's exact test puts below ``level_order_alpha`` (a level that
    random play finds easier is not harder). Lower levels' rates are figures in the summary, not
    limits: level 1 of a game may be easy enough to guess."""
    if levels == 1:
        return not_trivial_stage(opener(None), cfg, budget)
    rates: dict[int, dict[str, tuple[int, int]]] = {}
    lines = []
    for level in range(1, levels + 1):
        try:
            rates[level] = trivial_rates(opener(level), cfg, budget, enforce=level == levels)
        except ContractError as e:
            raise ContractError(f"level {level}: {e.reason}") from e
        lines.append(", ".join(f"{k} {w}/{n}" for k, (w, n) in rates[level].items()))
        for strategy, (wins, n) in rates[level].items():
            for lower in range(1, level):
                low_wins, low_n = rates[lower][strategy]
                if wins / n <= low_wins / low_n + cfg.trivial_rate:
                    continue
                p = fisher_greater(wins, n, low_wins, low_n)
                if p < cfg.level_order_alpha:
                    raise ContractError(
                        f"levels not ordered: {strategy} replies won {low_wins}/{low_n} at level "
                        f"{lower} but {wins}/{n} at level {level} (Fisher p {p:.2g}); a higher "
                        "level must not be easier ("
                        + "; ".join(f"level {k}: {x}" for k, x in enumerate(lines, 1)) + ")")
    return _by_level(lines) + ("\nanswer not in the first observation at any level; level "
                               f"{levels} within the {cfg.trivial_rate:.0%} limit")


def fisher_greater(wins: int, n: int, other_wins: int, other_n: int) -> float:
    """One-sided p-value of Fisher's exact test that ``wins`` of ``n`` is a higher rate than
    ``other_wins`` of ``other_n``: the chance, with the total wins fixed and the two samples
    exchangeable, that the first sample holds ``wins`` or more of them (the hypergeometric
    upper tail). Exact for any sample size, which a normal approximation is not at 4 or 5.

    >>> round(fisher_greater(2, 4, 0, 4), 4), round(fisher_greater(5, 20, 0, 20), 4)
    (0.2143, 0.0236)
    >>> fisher_greater(1, 1, 0, 1), fisher_greater(0, 20, 20, 20)
    (0.5, 1.0)
    >>> fisher_greater(20, 20, 0, 20) < 1e-10
    True
    """
    for name, (k, m) in {"first": (wins, n), "second": (other_wins, other_n)}.items():
        if not 0 <= k <= m or m < 1:
            raise ValueError(f"the {name} sample needs 0 <= wins <= n and n >= 1, got {k} of {m}")
    total, won = n + other_n, wins + other_wins
    tail = sum(math.comb(won, k) * math.comb(total - won, n - k)
               for k in range(wins, min(won, n) + 1))
    return min(1.0, tail / math.comb(total, n))


def _static(code: str, cfg: CheckConfig) -> tuple[Any, str]:
    info = check_static(code, allow_numpy=cfg.allow_numpy, allow_math_verify=cfg.allow_math_verify)
    return info, f"class {info.class_name} ({info.setting}); imports allowed; only definitions at import"


def report_dict(report: CheckReport) -> dict:
    """The report as plain JSON-ready data (``spadework check --json``)."""
    return {
        "ok": report.ok,
        "env_id": report.env_id,
        "class_name": report.class_name,
        "failed_stage": report.failed_stage,
        "reason": report.reason,
        "max_turns": report.max_turns,
        "levels": report.levels,
        "results": [
            {"stage": r.stage, "passed": r.passed, "reason": r.reason, "seconds": round(r.seconds, 6)}
            for r in report.results
        ],
    }


def format_report(report: CheckReport) -> str:
    """The report for people: one line per stage (✓/✗, time, reason), then the verdict.

    >>> r = CheckReport("ab" * 32, "GuessEnv", (CheckResult("static", True, "ok", 0.0012),
    ...                                          CheckResult("load", False, "boom", 0.25)))
    >>> print(format_report(r))
    ✓ static            1.2 ms  ok
    ✗ load            250.0 ms  boom
    invalid: GuessEnv fails at load
    """
    lines = []
    for r in report.results:
        reason = r.reason.replace("\n", "\n" + " " * 28)
        lines.append(f"{'✓' if r.passed else '✗'} {r.stage:<12} {r.seconds * 1000:8.1f} ms  {reason}")
    name = report.class_name or "the candidate"
    levels = f", levels 1-{report.levels}" if report.levels > 1 else ""
    if report.ok:
        lines.append(f"valid: {name} (env {report.env_id[:12]}{levels})")
    else:
        lines.append(f"invalid: {name} fails at {report.failed_stage or 'no stage (nothing ran)'}")
    return "\n".join(lines)

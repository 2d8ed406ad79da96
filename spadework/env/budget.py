"""The time budget of one whole check, the deadlines it hands down, and the progress it reports.

A check runs hundreds of calls into an environment that may be slow on purpose or by accident:
a step that sleeps 2.5 s stays under the sandbox's per-call limit and still costs half an hour
over every stage. :class:`Budget` bounds the whole check. Every call into the sandbox carries
the budget's deadline (``deadline=``, a ``time.monotonic()`` instant), so the call in flight is
cut when the budget ends rather than after its own limit; between calls the budget is checked
again, so a long run of fast calls (a huge ``max_turns``) stops too. Running out raises
:class:`~spadework.errors.CheckBudgetExceeded` with how far the stage got, in numbers a person
reads ("after 14 of 30 episodes") and with where the time went.

Progress travels as :class:`CheckProgress` records (numbers, never text to parse back) to a
callback the caller passes; the checker knows nothing of terminals.

Instance builds (``__init__`` in a fresh child) are counted apart from the stage that asked for
them, so the report can charge them to the load stage: a slow ``__init__`` is the load stage's
cost, not the contract stage's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spadework.errors import CheckBudgetExceeded, EnvTimeout


@dataclass(frozen=True)
class CheckProgress:
    """Where a check stands, sent to the caller's callback at each change.

    ``event`` is ``"start"`` when stage ``stage`` begins, ``"advance"`` when one more of its
    ``total`` units (``unit``: "steps", "seeds", "episodes"; ``total`` 0 when the stage is not
    counted) is done, and ``"end"`` when it finishes, with ``passed``. ``elapsed`` and ``budget``
    are seconds since the check began and the whole check's budget (``math.inf`` for none).
    """

    stage: str
    event: str
    done: int
    total: int
    unit: str
    elapsed: float
    budget: float
    passed: bool | None = None


#: What the checker calls with each :class:`CheckProgress` (``check(..., progress=...)``).
ProgressFn = Callable[[CheckProgress], None]


class Budget:
    """Seconds left for one check, the stage it is in and how far that stage got.

    One per check and used from one thread. ``call(what, fn, ...)`` runs ``fn(..., deadline=d)``
    for every call into the sandbox; ``begin``/``advance``/``end`` mark the stage's work and
    report it to ``on_progress``.

    >>> b = Budget(60.0)
    >>> b.begin("not_trivial", 30, "episodes")
    >>> for _ in range(14):
    ...     b.advance()
    >>> b.exceeded().reason
    "the check's 60 s budget ran out after 14 of 30 episodes; the environment took 0.0 s in 0 calls in this stage, the slowest 0.0 s: make reset(), step() and __init__ faster, or raise the budget (CheckConfig.budget_seconds, --budget)"
    """

    def __init__(self, seconds: float, on_progress: ProgressFn | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._start = clock()
        self.deadline = self._start + seconds
        self._on_progress = on_progress
        self.stage, self.done, self.total, self.unit = "", 0, 0, ""
        self.calls, self.call_seconds, self.slowest = 0, 0.0, 0.0
        self.builds, self.build_seconds = 0, 0.0

    @classmethod
    def unlimited(cls) -> Budget:
        """No deadline at all (a stage function called on its own)."""
        return cls(math.inf)

    def elapsed(self) -> float:
        return self._clock() - self._start

    def left(self) -> float:
        return self.deadline - self._clock()

    # ------------------------------------------------------------------ the stage's work

    def begin(self, stage: str, total: int = 0, unit: str = "") -> None:
        """Stage ``stage`` starts with ``total`` units of work (0: not counted)."""
        self.stage, self.done, self.total, self.unit = stage, 0, total, unit
        self.calls, self.call_seconds, self.slowest = 0, 0.0, 0.0
        self.builds, self.build_seconds = 0, 0.0
        self._emit("start")

    def plan(self, total: int, unit: str) -> None:
        """The stage's work is ``total`` units of ``unit`` (set by the stage once it knows)."""
        self.total, self.unit = total, unit
        self._emit("advance")

    def advance(self, n: int = 1) -> None:
        """``n`` more units of the stage are done."""
        self.done += n
        self._emit("advance")

    def end(self, passed: bool) -> None:
        self._emit("end", passed)

    def _emit(self, event: str, passed: bool | None = None) -> None:
        if self._on_progress is not None:
            self._on_progress(CheckProgress(self.stage, event, self.done, self.total, self.unit,
                                            self.elapsed(), self.seconds, passed))

    # ------------------------------------------------------------------ calls under the budget

    def call(self, what: str, fn: Callable[..., Any], *args: Any, build: bool = False,
             **kwargs: Any) -> Any:
        """``fn(*args, deadline=..., **kwargs)`` if time is left; CheckBudgetExceeded when none is
        left before the call or when the call was cut by the budget's deadline. Its time counts
        as the stage's calls, or as instance builds when ``build``."""
        if self.left() <= 0:
            raise self.exceeded(f"before {what}")
        started = self._clock()
        try:
            value = fn(*args, deadline=None if math.isinf(self.deadline) else self.deadline, **kwargs)
        except EnvTimeout as e:
            self._account(started, build)
            if self.left() <= 0:
                raise self.exceeded(f"during {what}") from e
            raise
        except BaseException:
            self._account(started, build)
            raise
        self._account(started, build)
        return value

    def _account(self, started: float, build: bool) -> None:
        seconds = self._clock() - started
        if build:
            self.builds += 1
            self.build_seconds += seconds
        else:
            self.calls += 1
            self.call_seconds += seconds
            self.slowest = max(self.slowest, seconds)

    def exceeded(self, during: str = "") -> CheckBudgetExceeded:
        """The error for running out now, saying how far the stage got and where time went."""
        progress = f"after {self.done} of {self.total} {self.unit}" if self.total else "in this stage"
        during = f" ({during})" if during else ""
        spent = (f"the environment took {self.call_seconds:.1f} s in {self.calls} calls in this "
                 f"stage, the slowest {self.slowest:.1f} s")
        if self.build_seconds >= 0.1:
            spent += f", and {self.build_seconds:.1f} s building {self.builds} instance(s)"
        return CheckBudgetExceeded(
            f"the check's {self.seconds:g} s budget ran out {progress}{during}; {spent}: make "
            "reset(), step() and __init__ faster, or raise the budget (CheckConfig.budget_seconds, --budget)"
        )


class BudgetedHandle:
    """An environment handle whose every call runs under a :class:`Budget`: the budget's deadline
    travels with the call, and running out is CheckBudgetExceeded rather than a timeout of the
    environment. Satisfies :class:`spadework.env.probe.EnvHandle`."""

    def __init__(self, env: Any, budget: Budget) -> None:
        self._env = env
        self._budget = budget

    @property
    def alive(self) -> bool:
        return bool(getattr(self._env, "alive", True))

    def reset(self, seed: int | None = None) -> Any:
        return self._budget.call(f"reset(seed={seed})", self._env.reset, seed)

    def step(self, action: str) -> Any:
        return self._budget.call("step()", self._env.step, action)

    def solution(self) -> Any:
        return self._budget.call("solution()", self._env.solution)

    def tools(self) -> Any:
        return self._budget.call("tools()", self._env.tools)

    def hint(self) -> Any:
        return self._budget.call("hint()", self._env.hint)

    def levels(self) -> Any:
        return self._budget.call("LEVELS", self._env.levels)

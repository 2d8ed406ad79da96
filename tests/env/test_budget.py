"""The whole-check budget on its own: the deadline it hands to calls, when running out is the
budget's doing and when a timeout is the environment's, and the numbers it reports."""

from __future__ import annotations

import pytest

from spadework.env.budget import Budget, CheckProgress
from spadework.errors import CheckBudgetExceeded, EnvTimeout


class Clock:
    """A clock the test moves by hand (the budget takes any ``() -> float``)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_every_call_carries_the_budget_deadline():
    clock = Clock()
    budget = Budget(10.0, clock=clock)
    seen = []
    assert budget.call("step()", lambda a, deadline: seen.append((a, deadline)) or "ok", "x") == "ok"
    assert seen == [("x", 110.0)]
    unlimited = Budget.unlimited()
    unlimited.call("step()", lambda deadline: seen.append(deadline))
    assert seen[-1] is None  # no deadline: the sandbox's own limits alone


def test_a_timeout_past_the_deadline_is_the_budget_running_out():
    clock = Clock()
    budget = Budget(10.0, clock=clock)
    budget.begin("not_trivial", 30, "episodes")
    budget.advance(14)

    def slow(deadline):
        clock.now = deadline + 0.01  # the sandbox cut the call at the budget's deadline
        raise EnvTimeout("step() passed its caller's deadline; the child was killed")

    with pytest.raises(CheckBudgetExceeded) as e:
        budget.call("step()", slow)
    assert e.value.reason.startswith("the check's 10 s budget ran out after 14 of 30 episodes "
                                     "(during step()); the environment took 10.0 s in 1 calls")
    with pytest.raises(CheckBudgetExceeded, match=r"\(before reset\(\)\)"):
        budget.call("reset()", lambda deadline: None)


def test_a_timeout_with_time_left_is_the_environments():
    clock = Clock()
    budget = Budget(10.0, clock=clock)

    def hung(deadline):
        clock.now += 5.0  # the per-call limit, earlier than the budget's deadline
        raise EnvTimeout("step() passed its 5s call deadline")

    with pytest.raises(EnvTimeout):
        budget.call("step()", hung)
    assert (budget.calls, budget.call_seconds, budget.slowest) == (1, 5.0, 5.0)


def test_builds_are_counted_apart_and_reset_per_stage():
    clock = Clock()
    budget = Budget(60.0, clock=clock)
    budget.begin("contract")

    def build(deadline):
        clock.now += 1.5

    budget.call("building an instance", build, build=True)
    assert (budget.builds, budget.build_seconds, budget.calls) == (1, 1.5, 0)
    budget.begin("determinism")
    assert (budget.builds, budget.build_seconds) == (0, 0.0)


def test_progress_events_are_numbers():
    clock = Clock()
    events: list[CheckProgress] = []
    budget = Budget(60.0, events.append, clock=clock)
    budget.begin("solvable")
    budget.plan(64, "seeds")
    clock.now += 2
    budget.advance()
    budget.end(True)
    assert [(e.event, e.done, e.total, e.unit, e.elapsed, e.passed) for e in events] == [
        ("start", 0, 0, "", 0.0, None), ("advance", 0, 64, "seeds", 0.0, None),
        ("advance", 1, 64, "seeds", 2.0, None), ("end", 1, 64, "seeds", 2.0, True)]

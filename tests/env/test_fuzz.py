"""Fuzzing the extraction and checker API with mutated starter environments wrapped as designer
replies (:mod:`tests.env.fuzz_replies`), in the real sandbox.

Two properties: nothing but a CheckReport (or, from extraction alone, an ExtractError) ever
comes out, whatever the reply; and an accepted environment's solution() wins fresh instances
drawn as play draws them. The second is measured as the share of accepted, mutated environments
whose solution() loses at least one of 20 fresh play-style seeds, and printed. Measured on the
slow test's 1,500 replies: 3 of 405 accepted mutants (0.74%) with the former solvable stage
(seeds 0..4), 0 of 401 with 64 play-style seeds; on the default test's 240 replies, 0 of 69
either way (such slips are rare among random mutations, hence the slow test).
"""

from __future__ import annotations

from collections import Counter
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import pytest

from spadework.env.checker import STAGES, CheckConfig, check, looks_like_module, solution_losses
from spadework.env.extract import extract_env_module
from spadework.errors import ExtractError, SandboxUnavailable
from spadework.library import starter_envs
from spadework.sandbox import Limits, Sandbox
from spadework.seeding import episode_seed
from spadework.types import CheckReport, env_id_of
from tests.env.fuzz_replies import FuzzCase, fuzz_case

# mutants often hold escapes like '\s' that compile with a DeprecationWarning; that is the
# mutant's business, not a warning for the person running the tests
pytestmark = pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")

#: The runtime stages as a run uses them, except fewer determinism seeds and trivial episodes:
#: neither is what this test measures, and they are most of a check's time. The solvable stage
#: keeps its default, the budget is small so that a hanging mutant costs little.
CFG = CheckConfig(determinism_seeds=1, trivial_episodes=4, budget_seconds=10.0)
FRESH_RUN_SEED = 987_654_321  # not the checker's seeds: instances the check never saw
FRESH = 20
#: The share of accepted mutants allowed to lose a fresh instance: below the former stage's
#: 0.74% on the slow test's replies, and none at all among the default test's 69.
MAX_LOSS_RATE = 0.005


@dataclass
class Tally:
    outcomes: Counter = field(default_factory=Counter)
    escaped: list[str] = field(default_factory=list)
    accepted_mutants: list[str] = field(default_factory=list)
    losing: list[str] = field(default_factory=list)

    @property
    def loss_rate(self) -> float:
        return len(self.losing) / max(1, len(self.accepted_mutants))


@pytest.fixture(scope="module")
def sb():
    limits = Limits(step_seconds=1.0, load_seconds=3.0, episode_seconds=10.0, cpu_seconds=10)
    try:
        box = Sandbox(limits)
        box.start()
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox here: {e.reason}")
    with box:
        yield box


def _run(case: FuzzCase, sb, tally: Tally, originals: dict[str, str]) -> None:
    try:
        extract_env_module(case.reply)
    except ExtractError as e:
        assert e.reason
    report = check(case.reply, sandbox=sb, config=CFG)
    assert isinstance(report, CheckReport)
    assert report.ok or report.failed_stage in STAGES
    tally.outcomes["accepted" if report.ok else report.failed_stage] += 1
    if not report.ok or report.env_id == originals[case.starter]:
        return
    tally.accepted_mutants.append(f"case {case.index} ({case.starter}: {', '.join(case.mutations)})")
    code = case.reply if looks_like_module(case.reply) else extract_env_module(case.reply).code
    assert env_id_of(code) == report.env_id

    def opener() -> AbstractContextManager:
        return sb.load(code, max_turns=CFG.max_turns, class_name=report.class_name)

    seeds = [episode_seed(FRESH_RUN_SEED, report.env_id, i) for i in range(FRESH)]
    losses = solution_losses(opener, seeds, CFG)
    if losses:
        tally.losing.append(f"{tally.accepted_mutants[-1]}: {losses[0].reason[:160]}")


def _fuzz(sb, seed: int, n: int, capsys) -> Tally:
    starters = starter_envs()
    originals = {s.name: env_id_of(s.code) for s in starters}
    tally = Tally()
    for i in range(n):
        case = fuzz_case(starters, seed, i)
        try:
            _run(case, sb, tally, originals)
        except Exception as e:  # noqa: BLE001 - what this test looks for: anything escaping
            tally.escaped.append(f"case {i} ({case.starter}, {case.mutations}, {case.wrapper}): "
                                 f"{type(e).__name__}: {e}")
    with capsys.disabled():
        print(f"\nfuzz seed {seed}, {n} replies: {dict(tally.outcomes)}; "
              f"{len(tally.losing)} of {len(tally.accepted_mutants)} accepted mutants lose one of "
              f"{FRESH} fresh play-style instances ({tally.loss_rate:.1%})")
    return tally


def _assert_sound(tally: Tally, n: int) -> None:
    assert not tally.escaped, "\n".join(tally.escaped[:10])
    assert sum(tally.outcomes.values()) == n
    # not vacuous: many replies get through, many are stopped, and some accepted ones are mutants
    assert tally.outcomes["accepted"] >= n // 5 and tally.outcomes["extract"] >= n // 20
    assert len(tally.accepted_mutants) >= n // 10
    assert tally.loss_rate <= MAX_LOSS_RATE, "\n".join(tally.losing)


@pytest.mark.slow
def test_fuzzed_replies_only_ever_give_a_report(sb, capsys):
    n = 240
    _assert_sound(_fuzz(sb, 0, n, capsys), n)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fuzzed_replies_many_more(sb, capsys):
    n = 1000  # about 11 minutes on two cores; CI runs it after the default run, within 90 minutes
    _assert_sound(_fuzz(sb, 1, n, capsys), n)


def test_the_cases_are_reproducible_and_varied():
    starters = starter_envs()
    cases = [fuzz_case(starters, 0, i) for i in range(200)]
    assert cases[:5] == [fuzz_case(starters, 0, i) for i in range(5)]
    assert len({c.wrapper for c in cases}) >= 10 and len({c.starter for c in cases}) >= 10
    kinds = Counter(m for c in cases for m in c.mutations)
    assert set(kinds) == {"truncate", "delete_lines", "reindent", "stray_unicode", "duplicate_block", "edit_char"}
    assert sum(not c.mutations for c in cases) >= 10 and kinds["edit_char"] >= max(kinds.values()) / 2

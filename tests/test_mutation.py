"""Mutation mode: direction from the parent's win rate, seeded parent choice preferring the
learnable band, the share of mutating slots, and lineage through generation (real sandbox)."""

from __future__ import annotations

import pytest
from design_support import GOOD_CODE, ScriptedPolicy, corpus, fenced, start_sandbox
from starters import starter_records

from spadework.archive import Archive
from spadework.designer import DesignConfig, design_environments
from spadework.designer.parents import Parent, choose_parent, mutation_direction, wants_mutation
from spadework.designer.prompts import build_mutation_prompt
from spadework.env.checker import CheckConfig
from spadework.library import starter_envs
from spadework.skills import skill_named

OPT = skill_named("optimization")  # starters: delivery_route, knapsack
STARTERS = {e.name: e for e in starter_envs()}


@pytest.fixture
def archive(tmp_path):
    with Archive.open(tmp_path / "archive.sqlite") as a:
        a.import_starter(starter_records())
        yield a


@pytest.mark.parametrize(("rate", "direction"), [(0.86, "harder"), (0.85, "varied"), (0.15, "varied"),
                                                 (0.14, "easier"), (None, "varied")])
def test_direction_follows_the_win_rate(rate, direction):
    assert mutation_direction(rate) == direction


def test_share_of_mutating_slots_is_seeded():
    draws = [wants_mutation(0.5, 3, 2, s) for s in range(200)]
    assert draws == [wants_mutation(0.5, 3, 2, s) for s in range(200)]
    assert 70 <= sum(draws) <= 130
    assert draws != [wants_mutation(0.5, 4, 2, s) for s in range(200)]


def test_parent_prefers_the_learnable_band(archive):
    knap, route = STARTERS["knapsack"], STARTERS["delivery_route"]
    archive.record_env_stats(knap.env_id, 0, plays=10, wins=10, regret=0.0)
    archive.record_env_stats(route.env_id, 0, plays=10, wins=4, regret=0.2)
    picks = {choose_parent(archive, OPT, run_seed=0, iteration=1, slot=s).env_id for s in range(12)}
    assert picks == {route.env_id}
    p = choose_parent(archive, OPT, run_seed=0, iteration=1, slot=0)
    assert p.win_rate == pytest.approx(0.4) and p.direction == "varied" and p.code == route.code


def test_parent_outside_the_band_when_nothing_is_in_it(archive):
    knap = STARTERS["knapsack"]
    archive.record_env_stats(knap.env_id, 0, plays=10, wins=10, regret=0.0)
    picks = {choose_parent(archive, OPT, run_seed=0, iteration=1, slot=s).env_id for s in range(20)}
    assert picks == {knap.env_id, STARTERS["delivery_route"].env_id}  # unplayed ones are eligible too


def test_no_parent_longer_than_the_designer_may_write(archive):
    knap, route = STARTERS["knapsack"], STARTERS["delivery_route"]
    short = min(len(knap.code), len(route.code))
    picks = {choose_parent(archive, OPT, run_seed=0, iteration=1, slot=s, max_chars=short).env_id
             for s in range(20)}
    assert picks == {knap.env_id if len(knap.code) == short else route.env_id}
    assert choose_parent(archive, OPT, run_seed=0, iteration=1, slot=0, max_chars=short - 1) is None


def test_no_parent_without_accepted_envs(tmp_path):
    with Archive.open(tmp_path / "a.sqlite") as empty:
        assert choose_parent(empty, OPT, run_seed=0, iteration=0, slot=0) is None


def test_prompt_shows_the_parent_and_the_direction():
    p = Parent("ab" * 32, "class GridEnv:\n    pass", "GridEnv", 0.05)
    system, text = (m["content"] for m in build_mutation_prompt(p, OPT))
    assert "class GridEnv:\n    pass" in text and "easier" in text.lower()
    assert "The contract:" in system and "step(self, action: str)" in system  # as a fresh design
    assert "win rate 0.05" in text


@pytest.mark.parametrize("plan", [False, True])
def test_mutated_child_records_its_lineage(archive, plan):
    """A mutation edits its parent in one turn, with or without ``DesignConfig.plan`` (which
    plans fresh designs only)."""
    box = start_sandbox()
    knap = STARTERS["knapsack"]
    archive.record_env_stats(knap.env_id, 0, plays=10, wins=10, regret=0.0)
    archive.record_env_stats(STARTERS["delivery_route"].env_id, 0, plays=10, wins=0, regret=0.0)
    policy = ScriptedPolicy([[fenced(GOOD_CODE)]])
    with box:
        (res,) = design_environments(policy, box, archive, corpus(), n=1, iteration=1, run_seed=0,
                                     skills=[OPT], cfg=DesignConfig(attempts_per_slot=1, mutation_ratio=1.0,
                                                                    example_share=10.0, plan=plan),
                                     check_config=CheckConfig(trivial_episodes=8))
    assert res.env is not None and res.parent_id in (knap.env_id, STARTERS["delivery_route"].env_id)
    rec = archive.get_env(res.env.env_id)
    assert rec.parent_id == res.parent_id and rec.doc_id is None
    system, prompt = (m["content"] for m in policy.calls[0][0].messages)
    parent = archive.get_env(res.parent_id)
    assert parent.code.strip() in prompt and "step(self, action: str)" in system
    assert ("harder" if parent.env_id == knap.env_id else "easier") in prompt
    assert res.attempts[0].memory_ids == (res.parent_id,) and len(policy.calls) == 1

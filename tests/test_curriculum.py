"""Curriculum: cadence, skill rotation, PLR replay, with worked numbers."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from spadework.curriculum import (
    Candidate,
    CurriculumConfig,
    CurriculumState,
    active_skills,
    candidate_score,
    choose_pool,
    env_score,
    is_regeneration,
    next_state,
    replay_probabilities,
)
from spadework.errors import ConfigError
from spadework.seeding import derive_rng
from spadework.skills import skills_for


def test_regeneration_cadence_and_rotation_cover_every_skill():
    assert [i for i in range(12) if is_regeneration(i, 4)] == [0, 4, 8]
    assert all(is_regeneration(i, 1) for i in range(5))
    names = [s.name for s in skills_for("games")]
    seen = [active_skills(names, r, 3) for r in range(4)]
    assert seen[0] == tuple(names[:3]) and seen[1] == tuple(names[3:]) and seen[2] == seen[0]
    assert {n for s in seen[:2] for n in s} == set(names)
    assert active_skills(names, 1, 4) == (names[4], names[5], names[0], names[1])


def test_replay_probabilities_worked_example():
    cs = [Candidate("a", 0.9, 2), Candidate("b", 0.5, 0), Candidate("c", 0.1, None)]
    p = replay_probabilities(cs, 3, temperature=1.0, staleness_coef=0.5)
    # P_score = (1, 1/2, 1/3) / (11/6) = 6/11, 3/11, 2/11; staleness 1, 3, 4 -> 1/8, 3/8, 4/8
    expected = [0.5 * 6 / 11 + 0.5 / 8, 0.5 * 3 / 11 + 0.5 * 3 / 8, 0.5 * 2 / 11 + 0.5 * 4 / 8]
    assert p == pytest.approx(expected)
    assert sum(p) == pytest.approx(1.0)
    # temperature 0.5 squares the rank weights: (1, 1/4, 1/9) / (49/36)
    p = replay_probabilities(cs, 3, temperature=0.5, staleness_coef=0.0)
    assert p == pytest.approx([36 / 49, 9 / 49, 4 / 49])
    # staleness only; all played this iteration -> uniform
    p = replay_probabilities([Candidate("a", 0.1, 3), Candidate("b", 0.2, 3)], 3,
                             temperature=1.0, staleness_coef=1.0)
    assert p == pytest.approx([0.5, 0.5])


def test_never_played_ranks_first():
    cs = [Candidate("a", 0.99, 0), Candidate("b", None, None)]
    p = replay_probabilities(cs, 1, temperature=1.0, staleness_coef=0.0)
    assert p == pytest.approx([1 / 3, 2 / 3])


def test_tied_scores_share_their_ranks_weight_whatever_their_ids():
    # iteration 0: every starter unplayed and tied. Broken by id, the first drawn at
    # temperature 0.3 was (1/1) / (1/2) ** (1 / 0.3) = 10 times as likely as the second
    tied = [Candidate(e, None, None) for e in ("maze", "nim", "countdown", "sequence")]
    p = replay_probabilities(tied, 0, temperature=0.3, staleness_coef=0.0)
    assert p == pytest.approx([0.25] * 4)
    # a tie among played ones shares the weight of ranks 2 and 3, between ranks 1 and 4
    cs = [Candidate("z", 0.9, 0), Candidate("b", 0.5, 0), Candidate("a", 0.5, 0),
          Candidate("c", 0.1, 0)]
    p = replay_probabilities(cs, 1, temperature=1.0, staleness_coef=0.0)
    total = 1 + 1 / 2 + 1 / 3 + 1 / 4
    assert p == pytest.approx([1 / total, (1 / 2 + 1 / 3) / 2 / total,
                               (1 / 2 + 1 / 3) / 2 / total, 1 / 4 / total])
    # renaming a tied candidate does not move its share
    renamed = [Candidate("zz" if c.env_id == "a" else c.env_id, c.score, c.last_played)
               for c in cs]
    assert replay_probabilities(renamed, 1, temperature=1.0, staleness_coef=0.0) == pytest.approx(p)


def test_choose_pool_fresh_first_then_sampled_by_plr():
    cfg = CurriculumConfig(pool_size=3, replay_temperature=1.0, staleness_coef=0.5)
    cs = [Candidate("a", 0.9, 2), Candidate("b", 0.5, 0), Candidate("c", 0.1, None),
          Candidate("fresh1", None, None)]
    pool = choose_pool(["fresh1", "fresh2"], cs, 3, cfg, derive_rng(0, 3, "pool"))
    assert pool[:2] == ("fresh1", "fresh2") and len(pool) == 3 and pool[2] in "abc"
    assert pool == choose_pool(["fresh1", "fresh2"], cs, 3, cfg, derive_rng(0, 3, "pool"))
    # first replay pick follows the PLR distribution
    cfg1 = CurriculumConfig(pool_size=1, replay_temperature=1.0, staleness_coef=0.5)
    rng = random.Random(7)
    counts = Counter(choose_pool([], cs[:3], 3, cfg1, rng)[0] for _ in range(20000))
    expected = replay_probabilities(cs[:3], 3, temperature=1.0, staleness_coef=0.5)
    for name, p in zip("abc", expected):
        assert counts[name] / 20000 == pytest.approx(p, abs=0.015)
    # a pool larger than the archive takes everything, once
    big = CurriculumConfig(pool_size=10)
    assert sorted(choose_pool([], cs, 1, big, random.Random(0))) == ["a", "b", "c", "fresh1"]


def test_scores_and_state_round_trip():
    assert env_score("learnability", 0.3, None) == pytest.approx(0.21)
    assert env_score("blend", 0.3, 0.3) == pytest.approx(0.6 * 0.6 + 0.4)
    assert env_score("regret", 0.3, None) == 0.0
    s = next_state(CurriculumState(), regenerated=True, fresh=["x"], pool=["x", "y"])
    assert CurriculumState.from_dict(s.to_dict()) == s
    s2 = next_state(s, regenerated=False, fresh=[], pool=["x", "z"])
    assert s2.regenerations == 1 and s2.fresh == ("x",) and s2.pool == ("x", "z")
    assert CurriculumState.from_dict(None) == CurriculumState()


@pytest.mark.parametrize("kw", [{"regen_interval": 0}, {"pool_size": 0}, {"staleness_coef": 1.5},
                                {"replay_temperature": 0}, {"score": "vibes"},
                                {"designs_per_regen": -1}])
def test_config_is_validated(kw):
    with pytest.raises(ConfigError):
        CurriculumConfig(**kw)


@pytest.mark.slow
def test_the_pool_ranks_replays_with_the_runs_band(tmp_path, monkeypatch):
    """With the band at [0.2, 0.4] (the reference's later phase for 4B) an environment won a
    quarter of the time sits in the band: its replay score is the run's blend, 0.6, as its
    designer credit is, not the default band's 0.24."""
    import spadework.loop as loop
    from scripted_policy import ScriptedPolicy
    from starters import starter_records

    from spadework.archive import Archive, archive_path
    from spadework.config import override, preset
    from spadework.loop import Models, Plan, RunContext, _Iteration

    cfg = override(preset("smoke"), {"reward": {"lo": 0.2, "hi": 0.4}, "curriculum": {"score": "blend"}})
    seen = {}

    def capture(fresh, candidates, iteration, cc, rng):
        seen.update({c.env_id: c.score for c in candidates})
        return ()

    monkeypatch.setattr(loop.cur, "choose_pool", capture)
    with Archive.open(archive_path(tmp_path)) as a:
        a.import_starter(starter_records(cfg.play.max_turns))
        played = next(r for r in a.list_envs(status="accepted") if r.origin == "starter"
                      and r.name not in cfg.curriculum.held_out)
        a.record_env_stats(played.env_id, 0, plays=4, wins=1, regret=0.0)
        ctx = RunContext(cfg, tmp_path, a, Models(ScriptedPolicy(lambda c, t: "")), sandbox=None)
        loop._pool(ctx, _Iteration(1, Plan(1), loop.cur.CurriculumState(), {}, a))
    assert seen[played.env_id] == pytest.approx(0.6)


def test_an_unplayed_environment_can_rank_between_the_frontier_and_the_out_of_reach():
    """With ``unplayed_win_rate`` an environment never played scores as if won that share of
    its plays: one measured in the band is replayed first, one measured at 0 of 5 last."""
    from types import SimpleNamespace as S

    cfg = CurriculumConfig(unplayed_win_rate=0.2, staleness_coef=0.0, replay_temperature=0.3)
    scores = {"frontier": candidate_score(S(win_rate=0.4, regret=0.0), cfg),
              "unplayed": candidate_score(None, cfg),
              "out_of_reach": candidate_score(S(win_rate=0.0, regret=0.0), cfg)}
    assert scores["frontier"] > scores["unplayed"] > scores["out_of_reach"] == 0.0
    cs = [Candidate(e, sc, None if e == "unplayed" else 0) for e, sc in scores.items()]
    p = dict(zip(scores, replay_probabilities(cs, 1, temperature=0.3, staleness_coef=0.0)))
    assert p["frontier"] > p["unplayed"] > p["out_of_reach"]
    assert candidate_score(None, CurriculumConfig()) is None, "the default still explores first"
    for bad in (-0.1, 1.5, True, "0.2"):
        with pytest.raises(ConfigError, match="unplayed_win_rate"):
            CurriculumConfig(unplayed_win_rate=bad)


def test_the_pool_scores_each_environment_at_the_level_it_plays_next(tmp_path, monkeypatch):
    """The replay picks (environment, level) pairs, so a pair is scored by its own plays: one
    the controller moved up after 5 of 5 ranks as unplayed at its new level, not as too easy;
    one moved back down ranks by what it won at the lower level before; one whose level did not
    move keeps its latest figures. Staleness still counts the environment's last play."""
    import spadework.loop as loop
    from scripted_policy import ScriptedPolicy
    from starters import starter_records

    from spadework.archive import Archive, archive_path
    from spadework.config import override, preset
    from spadework.loop import Models, Plan, RunContext, _Iteration

    cfg = override(preset("smoke"), {"curriculum": {"score": "blend", "unplayed_win_rate": 0.2,
                                                    "adapt_levels": True}})
    seen = {}

    def capture(fresh, candidates, iteration, cc, rng):
        seen.update({c.env_id: (c.score, c.last_played) for c in candidates})
        return ()

    monkeypatch.setattr(loop.cur, "choose_pool", capture)
    with Archive.open(archive_path(tmp_path)) as a:
        a.import_starter(starter_records(cfg.play.max_turns))
        up, down, held = [r.env_id for r in a.list_envs(status="accepted") if r.origin == "starter"
                          and r.levels >= 3 and r.name not in cfg.curriculum.held_out][:3]
        a.record_env_stats(up, 0, plays=5, wins=5, regret=0.0, level=1)
        a.record_level(up, 0, from_level=1, to_level=2, plays=5, wins=5)
        a.record_env_stats(down, 0, plays=5, wins=2, regret=0.2, level=1)
        a.record_env_stats(down, 1, plays=5, wins=4, regret=0.0, level=1)
        a.record_level(down, 1, from_level=1, to_level=2, plays=5, wins=4)
        a.record_env_stats(down, 2, plays=5, wins=0, regret=0.0, level=2)
        a.record_level(down, 2, from_level=2, to_level=1, plays=5, wins=0)
        a.record_env_stats(held, 2, plays=5, wins=2, regret=0.2, level=1)
        at_level_1 = a.env_stats_at(down, 1)
        assert (at_level_1.plays, at_level_1.wins, at_level_1.win_rate) == (10, 6, 0.8)
        assert at_level_1.last_played_iteration == 1 and a.env_stats_at(up, 2) is None
        ctx = RunContext(cfg, tmp_path, a, Models(ScriptedPolicy(lambda c, t: "")), sandbox=None)
        loop._pool(ctx, _Iteration(3, Plan(3), loop.cur.CurriculumState(), {}, a))
    score = lambda w, r: env_score("blend", w, r, cfg.reward)  # noqa: E731
    unplayed = candidate_score(None, cfg.curriculum, cfg.reward)
    assert score(1.0, 0.0) == 0.0 < unplayed  # what the latest plays alone would give `up`
    assert seen[up] == (pytest.approx(unplayed), 0)
    assert score(0.0, 0.0) < score(0.8, 0.0)  # `down` at level 1, not at the level it left
    assert seen[down] == (pytest.approx(score(0.8, 0.0)), 2)
    assert seen[held] == (pytest.approx(score(0.4, 0.2)), 2)

"""Every designer crediting rule (spadework.designer.credit): what a valid environment's design
earns from its plays, what a rejected one earns, which samples never train, and the advantages."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadework.archive.records import DesignAttempt
from spadework.designer.credit import (
    credit_attempts,
    designer_assembly,
    designer_reward,
    env_credit,
    rejection_progress,
    trained_at_birth,
)
from spadework.metrics import score_env
from spadework.reward import LearningPotential, RewardConfig, regret, win_rate
from spadework.settings.reward import VARIANTS
from spadework.types import Episode, Sampling

# designer_reward --------------------------------------------------------------------------------


def test_designer_reward_variants_worked_numbers():
    rets = [0.0, 1.0, 0.0, 0.0]  # win rate 0.25, var 0.1875
    kw = dict(win_rate=0.25, regret=0.03, returns=rets)
    # plateau(0.25) = 1 - 0.15/0.25 = 0.4; regret 0.03/0.15 = 0.2
    assert designer_reward("blend", **kw) == pytest.approx(0.6 * 0.4 + 0.4 * 0.2)
    assert designer_reward("solve_rate", **kw) == pytest.approx(0.4)
    assert designer_reward("regret", **kw) == pytest.approx(0.03)
    assert designer_reward("variance", **kw) == pytest.approx(math.exp(-(0.0625**2) / 0.02))
    lp = LearningPotential(0.8, 0.2).update(0.25).update(0.75)
    assert designer_reward("learning_potential", lp=lp, **kw) == pytest.approx(0.3)
    with_var = designer_reward("regret", variance_bonus=True, **kw)
    assert with_var == pytest.approx(0.03 + math.exp(-(0.0625**2) / 0.02))


def test_designer_reward_timeout_applies_to_every_variant():
    for v in VARIANTS:
        r = designer_reward(v, win_rate=0.5, regret=0.5, returns=[0, 1], step_timeout=True)
        assert r == -0.5
    assert (
        designer_reward(
            "blend", win_rate=0.5, regret=0.5, returns=[1], step_timeout=True, timeout_reward=-1
        )
        == -1.0
    )


def test_designer_reward_validates():
    with pytest.raises(ValueError, match="unknown designer reward variant"):
        designer_reward("lp", win_rate=0.5, regret=0.0, returns=[1.0])
    with pytest.raises(ValueError, match="needs lp"):
        designer_reward("learning_potential", win_rate=0.5, regret=0.0, returns=[1.0])
    with pytest.raises(ValueError, match="win_rate"):
        designer_reward("regret", win_rate=2.0, regret=0.0, returns=[1.0])
    with pytest.raises(ValueError, match="returns is empty"):
        designer_reward("variance", win_rate=0.5, regret=0.0, returns=[])


@settings(max_examples=50)
@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=16), st.data())
def test_blend_from_plays_stays_in_unit_interval(unhinted, data):
    hinted = data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=16))
    r = designer_reward(
        "blend", win_rate=win_rate(unhinted), regret=regret(hinted, unhinted), returns=unhinted
    )
    assert 0.0 <= r <= 1.0 + 1e-12


def _ep(arm, i, rewards, status="completed", error=""):
    return Episode("e", arm, i, i, (), tuple(rewards), status == "completed", False, status, error)


def test_env_credit_worked_numbers():
    # unhinted returns 1, 0, 0, 0 (clamped 2.0 -> 1): win rate 0.25; hinted mean 0.75: regret 0.5
    eps = [_ep("no_hint", 0, [0.0, 2.0]), _ep("no_hint", 1, [0.0]), _ep("no_hint", 2, [-0.5]),
           _ep("no_hint", 3, [1.0], status="truncated"),
           _ep("hint", 0, [1.0]), _ep("hint", 1, [1.0]), _ep("hint", 2, [1.0]), _ep("hint", 3, [0.0])]
    o = score_env("e", eps)
    assert (o.plays, o.wins, o.win_rate) == (4, 1, 0.25)
    assert o.regret == pytest.approx(0.75 - (1.0 + 0.0 - 0.5 + 0.0) / 4)  # 0.625

    def credit(outcome, cfg, lp=None):
        return env_credit(outcome, cfg, lp)

    # blend: 0.6 * plateau(0.25) = 0.6 * (1 - 0.15 / 0.25) = 0.24; regret term 0.4 * clip(0.625/0.15)
    assert credit(o, RewardConfig()) == pytest.approx(0.24 + 0.4)
    assert credit(o, RewardConfig(variant="solve_rate")) == pytest.approx(0.4)
    assert credit(o, RewardConfig(variant="regret")) == pytest.approx(0.625)
    # a hung step costs the design -0.5 whatever the plays
    hung = eps + [_ep("no_hint", 4, [], status="timeout", error="step: step() passed its deadline")]
    assert credit(score_env("e", hung), RewardConfig()) == -0.5
    # learning potential: the skill's tracker sees win rates 0.25 then 0.75 (gammas 0.8 / 0.2)
    lp_cfg = RewardConfig(variant="learning_potential", lp_gamma_fast=0.8, lp_gamma_slow=0.2)
    assert credit(o, lp_cfg) == 0.0  # a fresh tracker that has seen one win rate
    better = [_ep("no_hint", i, [1.0 if i else 0.0]) for i in range(4)]
    tracker = LearningPotential(0.8, 0.2).update(0.25).update(0.75)
    assert credit(score_env("e", better), lp_cfg, tracker) == pytest.approx(abs(0.65 - 0.35))


def attempt(slot, skill, reward, out=(7, 8)):
    return DesignAttempt(iteration=3, slot=slot, attempt=0, skill=skill, setting="games",
                         doc_id=None, messages=(), reply="", prompt_ids=(1, 2), output_ids=out,
                         logprobs=tuple(-0.5 for _ in out), outcome="accepted", reward=reward,
                         sampling=Sampling(0.6, 0.95, 20))


def test_designer_center_scale_and_zscore_per_skill():
    atts = [attempt(0, "logic", 1.0), attempt(1, "logic", 0.0), attempt(2, "math", 0.25),
            attempt(3, "math", None), attempt(4, None, 0.7, out=())]
    got = designer_assembly(atts, scale=32.0)
    assert [s.advantage for s in got.samples] == [16.0, -16.0, 0.0]
    assert got.dropped == {"no_reward": 1, "no_output_tokens": 1}
    assert [s.key for s in got.samples] == [(3, 0, 0), (3, 1, 0), (3, 2, 0)]
    z = designer_assembly(atts[:3], scheme="zscore").samples
    assert [round(s.advantage, 6) for s in z] == [1.0, -1.0, 0.0]
    with pytest.raises(ValueError, match="scheme"):
        designer_assembly(atts, scheme="rank")




def test_attempts_without_a_sampling_record_are_dropped():
    bare = DesignAttempt(iteration=3, slot=0, attempt=0, skill="logic", setting="games",
                         doc_id=None, messages=(), reply="", prompt_ids=(1, 2), output_ids=(7,),
                         logprobs=(-0.5,), outcome="accepted", reward=1.0)
    assert designer_assembly([bare]).dropped == {"unknown_sampling": 1}


def test_who_is_credited_and_who_never_trains():
    """Accepted attempts wait for their environment's plays; rejected first attempts earn the
    (graded) rejection reward unless rejections earn nothing; repairs never train."""
    msgs = ({"role": "user", "content": "design"},)
    repair_msgs = (*msgs, {"role": "assistant", "content": "x"}, {"role": "user", "content": "fix"})
    acc = DesignAttempt(0, 0, 0, "s", "games", None, msgs, "", (1,), (2,), (-0.1,), "accepted",
                        env_id="e" * 64)
    unplayed = DesignAttempt(0, 1, 0, "s", "games", None, msgs, "", (1,), (2,), (-0.1,), "accepted",
                             env_id="f" * 64)
    rej = DesignAttempt(0, 2, 0, "s", "games", None, msgs, "", (1,), (2,), (-0.1,), "load")
    rep = DesignAttempt(0, 2, 1, "s", "games", None, repair_msgs, "", (1,), (2,), (-0.1,), "load")
    cfg = RewardConfig(rejection_reward=-1.0, rejection_progress=1.0)
    got = dict(credit_attempts([acc, unplayed, rej, rep], {"e" * 64: 0.75}, cfg, "reward"))
    assert got == {(0, 0, 0): 0.75, (0, 2, 0): pytest.approx(-1.0 + rejection_progress(rej))}
    assert rejection_progress(rej) == pytest.approx(3 / 11)  # failed at load, the 4th of 11 stages
    assert dict(credit_attempts([acc, rej], {"e" * 64: 0.75}, cfg, "none")) == {(0, 0, 0): 0.75}
    assert [trained_at_birth(x, "reward") for x in (acc, rej, rep)] == [False, False, True]
    assert [trained_at_birth(x, "none") for x in (acc, rej, rep)] == [False, True, True]
    no_logprobs = DesignAttempt(0, 3, 0, "s", "games", None, msgs, "", (1,), (), (), "accepted")
    assert trained_at_birth(no_logprobs, "reward")


def test_every_variant_the_config_accepts_has_its_function():
    from spadework.designer.credit import VARIANT_REWARDS

    assert tuple(VARIANT_REWARDS) == VARIANTS


def test_learning_potential_is_kept_per_skill():
    """A design is credited once, at its environment's first plays: with a tracker per
    environment every design earned a potential of 0. The skill's tracker has seen the skill's
    earlier iterations, so a new environment of a skill whose win rates are moving earns it."""
    from spadework.designer.credit import skill_trackers

    cfg = RewardConfig(variant="learning_potential", lp_gamma_fast=0.8, lp_gamma_slow=0.2)
    t = skill_trackers({"logic": [0.25]}, {}, cfg)  # an earlier iteration of the skill
    t = skill_trackers({"logic": [0.5, 1.0], "math": [0.5]}, t, cfg)  # this one: mean 0.75
    new_env = score_env("e", [_ep("no_hint", i, [1.0 if i else 0.0]) for i in range(4)])
    assert env_credit(new_env, cfg, t["logic"]) == pytest.approx(0.3)
    assert env_credit(new_env, cfg, t["math"]) == 0.0  # its skill's first observation
    assert skill_trackers({"math": []}, t, cfg) == t  # nothing played: the trackers carry over


@pytest.mark.parametrize("p, chance", [(0.2, 0.136), (0.5, 0.151)])
def test_a_hinted_arm_shown_no_hint_earns_the_design_no_regret(p, chance):
    """Both arms unhinted (the hint leaked or was never written): by exact enumeration of the
    two arms' 5 plays, the blend's floored regret term paid ``chance`` on average when every
    instance counted (as it still does for episodes archived without their openings); leaving
    out the instances whose hinted play opened as its unhinted twin did, it pays nothing."""
    from math import comb

    from spadework.reward import plateau

    n = 5
    for opening, paid in (("task", 0.0), ("", chance)):
        expected = plateau_part = 0.0
        for h in range(n + 1):
            for u in range(n + 1):
                pr = comb(n, h) * p**h * (1 - p)**(n - h) * comb(n, u) * p**u * (1 - p)**(n - u)
                eps = [Episode("e", arm, i, i, (), (1.0 if i < k else 0.0,), True, False,
                               "completed", opening=f"{opening} {i}" if opening else "")
                       for arm, k in (("hint", h), ("no_hint", u)) for i in range(n)]
                o = score_env("e", eps)
                expected += pr * env_credit(o, RewardConfig(), None)
                plateau_part += pr * 0.6 * plateau(o.win_rate)
        assert expected - plateau_part == pytest.approx(paid, abs=5e-4), opening

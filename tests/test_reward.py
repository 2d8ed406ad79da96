"""Rewards: worked numbers computed by hand in each test, edge cases, and a few properties."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spadework.reward import (
    LearningPotential,
    blend,
    center_by_group,
    episode_return,
    group_zscore,
    plateau,
    regret,
    variance_reward,
    win_rate,
)

NAN = float("nan")
rates = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
finite = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False, allow_infinity=False)


# episode_return ---------------------------------------------------------------------------------


def test_episode_return_only_last_reward_of_terminated_episode_counts():
    assert episode_return([0.2, 2.0], True) == 1.0  # clamped from above
    assert episode_return([-2.0], True) == -1.0  # clamped from below
    assert episode_return([1.0, 0.0], True) == 0.0  # an early reward does not count
    assert episode_return([1.0], False) == 0.0
    assert episode_return([], True) == 0.0
    assert episode_return([0.0, 0.3], np.bool_(True)) == pytest.approx(0.3)


def test_episode_return_rejects_nan_final_reward():
    with pytest.raises(ValueError, match="finite"):
        episode_return([0.0, NAN], True)
    assert episode_return([NAN], False) == 0.0  # never read: the episode did not terminate


# group_zscore -----------------------------------------------------------------------------------


def test_group_zscore_worked_example():
    # [0, 0, 0, 1]: mean 0.25, population var = (3 * 0.0625 + 0.5625) / 4 = 0.1875
    sd = math.sqrt(0.1875)
    z = group_zscore([0.0, 0.0, 0.0, 1.0])
    assert z == pytest.approx([-0.25 / sd] * 3 + [0.75 / sd])


def test_group_zscore_constant_group_and_single_value_are_zero():
    assert group_zscore([0.7, 0.7]) == [0.0, 0.0]
    assert group_zscore([3.0]) == [0.0]


def test_group_zscore_validates():
    with pytest.raises(ValueError, match="empty"):
        group_zscore([])
    with pytest.raises(ValueError, match=r"values\[1\]"):
        group_zscore([0.0, NAN])
    with pytest.raises(ValueError, match="eps"):
        group_zscore([0.0, 1.0], eps=0.0)


@given(st.lists(finite, min_size=2, max_size=32))
def test_group_zscore_has_mean_about_zero(values):
    z = group_zscore(values)
    assert abs(math.fsum(z) / len(z)) < 1e-6
    assert all(abs(v) <= math.sqrt(len(values) - 1) + 1e-6 for v in z)  # Samuelson bound


# regret and win rate ----------------------------------------------------------------------------


def test_regret_worked_example_and_sign_kept():
    # hinted mean 3/4, unhinted mean 1/4
    assert regret([1, 1, 1, 0], [0, 0, 1, 0]) == pytest.approx(0.5)
    assert regret([0.0, 0.0], [1.0, 0.0]) == pytest.approx(-0.5)


def test_regret_rejects_empty_arm_and_nan():
    with pytest.raises(ValueError, match="hinted_returns is empty"):
        regret([], [1.0])
    with pytest.raises(ValueError, match="unhinted_returns is empty"):
        regret([1.0], [])
    with pytest.raises(ValueError, match="finite"):
        regret([NAN], [1.0])


def test_win_rate_counts_strictly_positive_returns():
    assert win_rate([1.0, 0.0, -1.0, 0.01, 0.0]) == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="empty"):
        win_rate([])


# plateau ----------------------------------------------------------------------------------------


def test_plateau_worked_points():
    assert plateau(0.4) == plateau(0.5) == plateau(0.6) == 1.0
    assert plateau(0.2) == pytest.approx(1 - 0.2 / 0.25)  # 0.2
    assert plateau(0.7) == pytest.approx(1 - 0.1 / 0.25)  # 0.6
    assert plateau(0.15) == pytest.approx(0.0, abs=1e-12)
    assert plateau(0.85) == pytest.approx(0.0, abs=1e-12)
    assert plateau(0.0) == plateau(1.0) == 0.0
    # the 4B recipe's later band: lo 0.2, hi 0.4, ramp 0.2 -> w = 0.5 gives 1 - 0.1 / 0.2
    assert plateau(0.5, lo=0.2, hi=0.4, ramp=0.2) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(win_rate=1.2), "win_rate must lie in"),
        (dict(win_rate=-0.1), "win_rate must lie in"),
        (dict(win_rate=NAN), "win_rate must be finite"),
        (dict(win_rate=0.5, lo=0.7, hi=0.6), "lo must be <= hi"),
        (dict(win_rate=0.5, ramp=0.0), "ramp must be > 0"),
        (dict(win_rate=0.5, ramp=-1.0), "ramp must be > 0"),
    ],
)
def test_plateau_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plateau(**kwargs)


@given(rates, rates, rates, st.floats(min_value=1e-3, max_value=1.0))
def test_plateau_lies_in_unit_interval(w, a, b, ramp):
    lo, hi = min(a, b), max(a, b)
    p = plateau(w, lo=lo, hi=hi, ramp=ramp)
    assert 0.0 <= p <= 1.0
    if lo <= w <= hi:
        assert p == 1.0


# blend ------------------------------------------------------------------------------------------


def test_blend_worked_numbers():
    # win 0.3 -> plateau 1 - 0.1/0.25 = 0.6; regret 0.06 -> 0.06/0.15 = 0.4
    assert blend(0.3, 0.06) == pytest.approx(0.6 * 0.6 + 0.4 * 0.4)  # 0.52
    # regret above the scale saturates at 1; win 0.5 is on the plateau
    assert blend(0.5, 0.9) == pytest.approx(1.0)
    # negative regret floored: only the plateau term remains (win 0.8 -> 1 - 0.2/0.25 = 0.2)
    assert blend(0.8, -0.3) == pytest.approx(0.6 * 0.2)
    # unfloored: regret -0.3 / 0.15 = -2
    assert blend(0.8, -0.3, floor=False) == pytest.approx(0.6 * 0.2 + 0.4 * -2.0)
    # the solve-rate ablation: plateau only
    assert blend(0.3, 0.5, plateau_weight=1.0, regret_weight=0.0) == pytest.approx(0.6)


def test_blend_matches_reference_vector_t19():
    # reference T19 (regret 1, plateau 1, floor): win 0.5 hint 0.8 -> 2.0; win 0.2 regret 0.075
    assert blend(0.5, 0.8, plateau_weight=1, regret_weight=1) == pytest.approx(2.0)
    assert blend(0.2, 0.075, plateau_weight=1, regret_weight=1) == pytest.approx(0.7)
    assert blend(1.0, -1.0, plateau_weight=1, regret_weight=1) == 0.0


def test_blend_validates():
    with pytest.raises(ValueError, match="regret must be finite"):
        blend(0.5, NAN)
    with pytest.raises(ValueError, match="regret_scale"):
        blend(0.5, 0.1, regret_scale=0.0)
    with pytest.raises(ValueError, match="win_rate"):
        blend(1.5, 0.1)


@given(rates, finite, finite)
def test_blend_is_monotone_in_regret_and_bounded_when_floored(w, r1, r2):
    lo, hi = min(r1, r2), max(r1, r2)
    assert blend(w, lo) <= blend(w, hi)
    assert 0.0 <= blend(w, lo) <= 1.0 + 1e-12


# variance, centring -----------------------------------------------------------------------------


def test_variance_reward_worked_numbers():
    assert variance_reward([0, 1]) == pytest.approx(1.0)  # var 0.25
    # [0, 0, 0, 1]: var 0.1875 -> exp(-(0.0625^2) / 0.02)
    assert variance_reward([0, 0, 0, 1]) == pytest.approx(math.exp(-0.00390625 / 0.02))
    assert variance_reward([1, 1, 1]) == pytest.approx(math.exp(-0.0625 / 0.02))
    with pytest.raises(ValueError, match="empty"):
        variance_reward([])


def test_center_by_group_subtracts_each_group_mean():
    # logic: mean 0.5; math: mean 0.2
    out = center_by_group([0.2, 0.8, 0.1, 0.3, 0.2], ["logic", "logic", "math", "math", "math"])
    assert out == pytest.approx([-0.3, 0.3, -0.1, 0.1, 0.0])
    assert center_by_group([], []) == []
    with pytest.raises(ValueError, match="differ in length"):
        center_by_group([1.0], ["a", "b"])
    with pytest.raises(ValueError, match="finite"):
        center_by_group([NAN], ["a"])


# LearningPotential ------------------------------------------------------------------------------


def test_learning_potential_reference_vector_t1():
    lp = LearningPotential(gamma_fast=0.8, gamma_slow=0.2)
    assert lp.potential == 0.0 and lp.count == 0
    lp1 = lp.update(0.25)
    assert (lp1.fast, lp1.slow, lp1.potential) == (0.25, 0.25, 0.0)
    lp2 = lp1.update(0.75)
    # fast = 0.2*0.25 + 0.8*0.75 = 0.65; slow = 0.8*0.25 + 0.2*0.75 = 0.35
    assert lp2.fast == pytest.approx(0.65) and lp2.slow == pytest.approx(0.35)
    assert lp2.potential == pytest.approx(0.3)
    assert lp2.potential / (2 * (0.8 - 0.2)) == pytest.approx(0.25)  # the reference's scaled value
    assert lp1.count == 1 and lp2.count == 2 and lp.fast is None  # updates never mutate


def test_learning_potential_defaults_and_flat_signal():
    lp = LearningPotential()
    assert (lp.gamma_fast, lp.gamma_slow) == (0.98, 0.85)
    for _ in range(50):
        lp = lp.update(0.4)
    assert lp.potential == pytest.approx(0.0, abs=1e-12)  # mediocre but flat: nothing to learn


def test_learning_potential_round_trips_through_json():
    lp = LearningPotential().update(0.0).update(1.0).update(0.5)
    back = LearningPotential.from_dict(json.loads(json.dumps(lp.to_dict())))
    assert back == lp and back.potential == lp.potential


def test_learning_potential_validates():
    with pytest.raises(ValueError, match="gamma_slow < gamma_fast"):
        LearningPotential(gamma_fast=0.2, gamma_slow=0.8)
    with pytest.raises(ValueError, match="all unset"):
        LearningPotential(fast=0.1)
    with pytest.raises(ValueError, match="unknown"):
        LearningPotential.from_dict({"gamma_fast": 0.9, "mu": 1.0})
    with pytest.raises(ValueError, match="finite"):
        LearningPotential().update(NAN)



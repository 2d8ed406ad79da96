"""The uncertainty maths on vectors small enough to check by hand."""

from __future__ import annotations

import itertools

import pytest

from spadework.evaluate.stats import bootstrap_ci, holm, mean, pass_at_k, sign_flip_pvalue


def test_bootstrap_of_constant_items_has_zero_width():
    assert bootstrap_ci([0.25] * 7) == (0.25, 0.25)
    assert bootstrap_ci([]) == (0.0, 0.0)


def test_bootstrap_of_two_values_spans_the_attainable_means():
    # Two items, 0 and 1: a replicate's mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4,
    # so the 2.5% and 97.5% percentiles are 0 and 1.
    assert bootstrap_ci([0.0, 1.0], reps=4000) == (0.0, 1.0)


def test_bootstrap_matches_the_normal_approximation_on_a_large_sample():
    values = [1.0] * 300 + [0.0] * 700  # p = 0.3, se = sqrt(.3 * .7 / 1000) = 0.01449
    lo, hi = bootstrap_ci(values, reps=4000)
    assert lo == pytest.approx(0.3 - 1.96 * 0.01449, abs=0.006)
    assert hi == pytest.approx(0.3 + 1.96 * 0.01449, abs=0.006)


def test_stratified_bootstrap_keeps_each_stratum_fixed():
    # Stratum a is all 1, stratum b all 0: resampling within strata never changes the mean,
    # while resampling across them does.
    values, strata = [1.0, 1.0, 0.0, 0.0], ["a", "a", "b", "b"]
    assert bootstrap_ci(values, strata) == (0.5, 0.5)
    lo, hi = bootstrap_ci(values)
    assert lo < 0.5 < hi


def test_bootstrap_is_reproducible_from_its_seed():
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.5]
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)


def test_exact_sign_flip_counts_patterns_by_hand():
    # d = (2, 1): the four sign patterns give means 1.5, 0.5, -0.5, -1.5; two are as extreme
    # as the observed 1.5 in absolute value.
    assert sign_flip_pvalue([2, 1]) == 0.5
    # d = (1, 1, 1, 1): only all-plus and all-minus reach |mean| = 1: 2 of 16.
    assert sign_flip_pvalue([1, 1, 1, 1]) == 2 / 16
    # d = (3, 1, 1): |mean| >= 5/3 needs the 3 and both 1s of one sign: 2 of 8 patterns.
    assert sign_flip_pvalue([3, 1, 1]) == 2 / 8


def test_exact_sign_flip_agrees_with_brute_force():
    d = [0.5, -0.25, 1.0, 0.0, 0.75]
    obs = abs(sum(d)) / len(d)
    patterns = list(itertools.product((1, -1), repeat=len(d)))
    want = sum(abs(sum(s * x for s, x in zip(p, d))) / len(d) >= obs - 1e-12
               for p in patterns) / len(patterns)
    assert sign_flip_pvalue(d) == want


def test_monte_carlo_sign_flip_is_near_the_exact_value():
    d = [1.0] * 12 + [-1.0] * 8  # 20 items: Monte Carlo; exact p = P(|Bin(20,.5) - 10| >= 2)
    exact = 1 - sum(__import__("math").comb(20, k) for k in (9, 10, 11)) / 2**20
    assert sign_flip_pvalue(d, reps=20000) == pytest.approx(exact, abs=0.01)


def test_no_difference_gives_p_one():
    assert sign_flip_pvalue([0, 0, 0]) == 1.0
    assert sign_flip_pvalue([]) == 1.0


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 -> 3 * 0.01, 2 * 0.02, 1 * 0.04, made monotone
    assert holm([0.04, 0.01, 0.02]) == [0.04, 0.03, 0.04]
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert holm([0.2]) == [0.2]
    assert holm([]) == []


def test_pass_at_k_and_mean():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - (3 * 2) / (5 * 4))
    assert mean([0.0, 1.0, 0.5]) == 0.5


def test_summary_counts_every_failure_as_a_loss():
    from spadework.evaluate.items import Sample
    from spadework.evaluate.summary import summarize

    def row(task, bucket, item, j, correct, status="ok"):
        return Sample("s", task, bucket, f"{task}/{item}", j, j, "h", correct=correct,
                      status=status)

    rows = [row("a", "X", 1, 0, True), row("a", "X", 1, 1, False),     # item mean 0.5
            row("a", "X", 2, 0, True), row("a", "X", 2, 1, True),      # 1.0
            row("b", "Y", 3, 0, False, "too_long"), row("b", "Y", 3, 1, False, "too_long"),
            row("b", "Y", 4, 0, False, "gen_timeout"), row("b", "Y", 4, 1, False, "gen_timeout")]
    m = summarize(rows, disjoint=["a"])
    assert m["overall"]["score"] == 0.375 and m["overall"]["items"] == 4
    assert m["overall"]["samples"] == 8 and m["overall"]["correct"] == 3
    assert m["overall"]["pass@2"] == 0.5
    assert m["buckets"]["X"]["score"] == 0.75 and m["buckets"]["Y"]["ci95"] == [0.0, 0.0]
    assert m["statuses"] == {"ok": 4, "too_long": 2, "gen_timeout": 2}
    assert m["disjoint"]["score"] == 0.75 and m["tasks"]["b"] == {"score": 0.0, "items": 2,
                                                                   "samples": 4}


def test_an_all_zero_score_gets_an_exact_bound_besides_its_empty_bootstrap():
    from spadework.evaluate.items import Sample
    from spadework.evaluate.summary import summarize

    rows = [Sample("s", "t", "b", f"t/{i}", 0, i, "h") for i in range(120)]
    m = summarize(rows)
    assert m["overall"]["ci95"] == [0.0, 0.0]
    assert m["overall"]["exact95"] == [0.0, pytest.approx(0.02465, abs=1e-4)]  # 1 - .05**(1/120)
    assert "exact95" not in summarize(rows[:1] + [Sample("s", "t", "b", "t/x", 0, 0, "h",
                                                         correct=True)])["overall"]

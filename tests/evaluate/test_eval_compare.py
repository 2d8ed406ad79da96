"""`eval compare` on synthetic sample files whose effect is known."""

from __future__ import annotations

import pytest

from spadework.evaluate.compare import compare_paths, compare_samples, format_comparison
from spadework.evaluate.items import Sample
from spadework.evaluate.judge import EvalError
from spadework.evaluate.summary import write_samples


def side(correct_items: set[int], *, items: int = 40, samples: int = 2, suite: str = "rg-hard",
         seed_shift: int = 0) -> list[Sample]:
    """``items`` items over two buckets (two tasks each); the listed items are always correct."""
    rows = []
    for i in range(items):
        bucket = "Math" if i % 2 else "Logic"
        task = f"{bucket.lower()}_{i % 4}"
        for j in range(samples):
            rows.append(Sample(suite, task, bucket, f"{task}/{i}", j, 1000 * i + j + seed_shift,
                               f"h{i}", correct=i in correct_items, reward=float(i in correct_items)))
    return rows


def write(tmp_path, name, rows):
    path = tmp_path / name / rows[0].suite / "samples.jsonl"
    write_samples(path, rows)
    return tmp_path / name


def test_a_large_known_effect_is_found_and_its_size_is_exact(tmp_path):
    a = write(tmp_path, "a", side(set(range(30))))   # 30 of 40 items right
    b = write(tmp_path, "b", side(set(range(10))))   # 10 of 40, a subset of A's
    result = compare_paths(a, b)
    overall = next(r for r in result["comparisons"] if r["scope"] == "overall")
    assert overall["a"] == 0.75 and overall["b"] == 0.25 and overall["diff"] == 0.5
    # the paired bootstrap over items, seed 0: 20 items differ by +1 and 20 by 0. Resampling the
    # two sides apart (unpaired) widens it to about [0.30, 0.675]: pinned, the test tells them apart
    assert overall["ci95"] == [0.35, 0.65]
    # 20 items differ, all in A's favour: 2 of the 2**20 sign patterns are as extreme, so the
    # Monte Carlo p-value is (1 + ~0) / (1 + 10000).
    assert overall["p"] < 0.001 and overall["significant"]
    assert {r["scope"] for r in result["comparisons"]} == {"overall", "Logic", "Math"}
    assert result["tests"] == 3
    text = format_comparison(result)
    assert "unadjusted" in text and "Holm" in text


def test_no_effect_is_not_significant(tmp_path):
    rows = side({1, 2, 3, 5, 8, 13, 21, 34})
    result = compare_paths(write(tmp_path, "a", rows), write(tmp_path, "b", rows))
    for r in result["comparisons"]:
        assert r["diff"] == 0 and r["p"] == 1.0 and not r["significant"]


def test_holm_applies_across_scopes_and_suites():
    a = {"s1": side(set(range(6)), items=8, suite="s1"), "s2": side({0}, items=8, suite="s2")}
    b = {"s1": side(set(), items=8, suite="s1"), "s2": side(set(), items=8, suite="s2")}
    result = compare_samples(a, b)
    rows = result["comparisons"]
    assert result["tests"] == len(rows) == 6
    ps = sorted(r["p"] for r in rows)
    assert min(r["p_holm"] for r in rows) == pytest.approx(min(1.0, 6 * ps[0]))


def test_significance_is_judged_on_the_holm_adjusted_p():
    """6 of 16 items better in each of two suites: each suite's overall p is 0.031, under 0.05,
    but six comparisons were made, Holm raises it to 0.19, and neither is called significant."""
    a = {s: side(set(range(6)), items=16, suite=s) for s in ("s1", "s2")}
    b = {s: side(set(), items=16, suite=s) for s in ("s1", "s2")}
    rows = compare_samples(a, b)["comparisons"]
    overall = [r for r in rows if r["scope"] == "overall"]
    assert [round(r["p"], 4) for r in overall] == [0.0312, 0.0312]
    assert [round(r["p_holm"], 4) for r in overall] == [0.1875, 0.1875]
    assert not any(r["significant"] for r in rows)


def test_different_seeds_are_refused(tmp_path):
    a = write(tmp_path, "a", side({1}))
    b = write(tmp_path, "b", side({1}, seed_shift=1))
    with pytest.raises(EvalError, match="different seed"):
        compare_paths(a, b)


def test_different_items_are_refused(tmp_path):
    a = write(tmp_path, "a", side({1}, items=40))
    b = write(tmp_path, "b", side({1}, items=38))
    with pytest.raises(EvalError, match="different items"):
        compare_paths(a, b)


def test_missing_folder_says_what_to_give(tmp_path):
    with pytest.raises(EvalError, match="samples.jsonl"):
        compare_paths(tmp_path / "nowhere", tmp_path)

"""``spadework eval compare A B``: paired differences A - B per suite and bucket.

Both sides must have played the same items with the same per-(item, sample) seeds and prompts
(the same suite, preset and seed do that); a mismatch is an error naming the first differing row.
Per item, the difference of mean correctness; per scope (a suite overall, each bucket): the mean
difference, a paired bootstrap 95% CI over items (stratified by task within a bucket), and a
two-sided sign-flip permutation p-value. A difference is called significant when its
Holm-adjusted p-value, across every scope of every suite compared, is below 0.05. The CIs are
not adjusted for multiplicity, and the output says so.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from spadework.evaluate.items import Sample
from spadework.evaluate.judge import EvalError
from spadework.evaluate.stats import bootstrap_ci, holm, mean, sign_flip_pvalue
from spadework.evaluate.summary import SAMPLES_FILE, item_scores, read_samples

ALPHA = 0.05
NOTE = ("CIs are unadjusted 95% paired-bootstrap intervals over items; 'significant' uses "
        "Holm-adjusted sign-flip p-values (alpha 0.05) across all {n} scopes compared.")


def load_side(path: Path) -> dict[str, list[Sample]]:
    """Suite name -> samples, from an eval output folder, one suite's folder or a samples file."""
    path = Path(path)
    if path.is_file():
        files = [path]
    elif (path / SAMPLES_FILE).is_file():
        files = [path / SAMPLES_FILE]
    else:
        files = sorted(path.glob(f"*/{SAMPLES_FILE}")) if path.is_dir() else []
    if not files:
        raise EvalError(f"{path} holds no {SAMPLES_FILE}: give an eval output folder, a suite "
                        "folder or a samples file")
    out: dict[str, list[Sample]] = defaultdict(list)
    for f in files:
        for s in read_samples(f):
            out[s.suite].append(s)
    return dict(out)


def _pair(suite: str, a: list[Sample], b: list[Sample]) -> None:
    """Raise EvalError unless both sides hold the same (item, sample) rows, seeds and prompts."""
    ka = {(s.item_id, s.sample_index): s for s in a}
    kb = {(s.item_id, s.sample_index): s for s in b}
    if ka.keys() != kb.keys():
        only_a, only_b = sorted(ka.keys() - kb.keys()), sorted(kb.keys() - ka.keys())
        raise EvalError(f"{suite}: the two sides played different items ({len(only_a)} rows only "
                        f"in A, e.g. {only_a[:1]}; {len(only_b)} only in B, e.g. {only_b[:1]}); "
                        "run both with the same suite, preset and --seed")
    for key, sa in ka.items():
        sb = kb[key]
        if sa.seed != sb.seed or sa.prompt_hash != sb.prompt_hash:
            what = "seed" if sa.seed != sb.seed else "prompt"
            raise EvalError(f"{suite}: item {key[0]} sample {key[1]} has a different {what} in A "
                            "and B; run both with the same preset and --seed (and a model with "
                            "the same tokenizer and context)")


def _scope(items_a: dict, items_b: dict, ids: list[str], stratified: bool, seed: int) -> dict:
    diffs = [items_a[i][2] - items_b[i][2] for i in ids]
    strata = [items_a[i][0] for i in ids] if stratified else None
    lo, hi = bootstrap_ci(diffs, strata, seed=seed)
    return {"items": len(ids), "a": round(mean([items_a[i][2] for i in ids]), 6),
            "b": round(mean([items_b[i][2] for i in ids]), 6), "diff": round(mean(diffs), 6),
            "ci95": [lo, hi], "p": sign_flip_pvalue(diffs, seed=seed)}


def compare_samples(a: dict[str, list[Sample]], b: dict[str, list[Sample]], *,
                    seed: int = 0) -> dict[str, Any]:
    """The comparison of two sides (suite -> samples); see the module docstring."""
    suites = sorted(a.keys() & b.keys())
    if not suites:
        raise EvalError(f"no suite in common: A has {sorted(a)}, B has {sorted(b)}")
    rows = []
    for suite in suites:
        _pair(suite, a[suite], b[suite])
        ia, ib = item_scores(a[suite]), item_scores(b[suite])
        ids = list(ia)
        rows.append({"suite": suite, "scope": "overall", **_scope(ia, ib, ids, False, seed)})
        buckets: dict[str, list[str]] = defaultdict(list)
        for i in ids:
            buckets[ia[i][1]].append(i)
        if len(buckets) > 1:
            for bucket in sorted(buckets):
                rows.append({"suite": suite, "scope": bucket,
                             **_scope(ia, ib, buckets[bucket], True, seed)})
    adjusted = holm([r["p"] for r in rows])
    for r, p in zip(rows, adjusted):
        r["p_holm"] = p
        r["significant"] = p < ALPHA
    return {"comparisons": rows, "tests": len(rows), "alpha": ALPHA,
            "note": NOTE.format(n=len(rows)), "suites_only_in_one": sorted(a.keys() ^ b.keys())}


def compare_paths(a: str | Path, b: str | Path, *, seed: int = 0) -> dict[str, Any]:
    """:func:`compare_samples` of two eval outputs on disk."""
    result = compare_samples(load_side(Path(a)), load_side(Path(b)), seed=seed)
    result.update(a=str(a), b=str(b))
    return result


def format_comparison(result: dict[str, Any]) -> str:
    """A text table of a comparison, in percentage points, with the multiplicity note."""
    sw = max([18, *(len(r["suite"]) for r in result["comparisons"])])
    cw = max([12, *(len(r["scope"]) for r in result["comparisons"])])
    head = f"{'suite':<{sw}} {'scope':<{cw}} {'A %':>6} {'B %':>6} {'A-B pp':>7} {'95% CI (unadj.)':>17} " \
           f"{'p':>7} {'p Holm':>7}  sig"
    lines = [f"A = {result.get('a', 'A')}", f"B = {result.get('b', 'B')}", head]
    for r in result["comparisons"]:
        lo, hi = r["ci95"]
        lines.append(f"{r['suite']:<{sw}} {r['scope']:<{cw}} {100 * r['a']:6.1f} {100 * r['b']:6.1f} "
                     f"{100 * r['diff']:+7.1f} [{100 * lo:+6.1f}, {100 * hi:+6.1f}] "
                     f"{r['p']:7.4f} {r['p_holm']:7.4f}  {'*' if r['significant'] else ''}")
    lines.append(result["note"])
    if result.get("suites_only_in_one"):
        lines.append(f"not compared (in one side only): {', '.join(result['suites_only_in_one'])}")
    return "\n".join(lines)

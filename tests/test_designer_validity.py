"""benchmarks/designer_validity.py: its counting, driven through the real designer, sandbox and
archive by a scripted policy (first attempts, repairs, cut replies and near-copies each land in
their own row), its document sets, and its command line."""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from design_support import GOOD_CODE, ScriptedPolicy, bad, corpus, fenced

from spadework.designer import DesignConfig

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "designer_validity.py"
LOCK = (Path(__file__).resolve().parent / "fixtures" / "envs" / "good" / "combination_lock.py").read_text()


@pytest.fixture(scope="module")
def dv():
    spec = importlib.util.spec_from_file_location("designer_validity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_doctests(dv):
    assert doctest.testmod(dv).failed == 0


@pytest.mark.slow
def test_counts_every_outcome_of_first_attempts_and_repairs(dv, tmp_path):
    script = [
        [fenced(GOOD_CODE), (fenced(GOOD_CODE)[:300], "length"), "I cannot write code today."],  # slots 0-2
        [fenced(LOCK), "still no code"],  # repairs of slots 1 and 2
        [fenced(bad("never_truncates")), fenced(GOOD_CODE)],  # slots 3-4: slot 4 copies slot 0
        ["junk", "junk"],  # their repairs
    ]
    policy = ScriptedPolicy(script)
    docs = corpus().documents[:5]
    seen = []
    counts = dv.measure(policy, docs, cfg=DesignConfig(attempts_per_slot=1, repair_turns=1),
                        max_turns=6, seed=3, batch=3, archive_dir=tmp_path, progress=seen.append)
    assert [len(c) for c in policy.calls] == [3, 2, 2, 2]
    assert counts["slots"] == 5 and counts["attempts"] == 9 and counts["accepted"] == 2
    assert counts["accepted_first_attempt"] == 1 and counts["accepted_by_repair"] == 1
    assert counts["accepted_share"] == 0.4
    assert counts["accepted_ci95"] == [round(x, 4) for x in dv.wilson(2, 5)]
    assert counts["stages_first_attempt"] == {"accepted": 1, dv.CUT: 1, "extract": 1, "contract": 1,
                                              "novelty": 1}
    assert counts["stages_all_attempts"] == {"accepted": 2, dv.CUT: 1, "extract": 4, "contract": 1,
                                             "novelty": 1}
    assert counts["stages_final"] == {"accepted": 2, "extract": 3}
    assert counts["slot_outcomes"][1] == [dv.CUT, "accepted"]
    assert "near-duplicate" in counts["reasons"]["novelty"][0]
    assert "max_tokens" in counts["reasons"][dv.CUT][0]
    assert counts["slot_skills"][:2] == ["mathematical reasoning", "logical deduction"]
    # a repair carries the verdict; every slot saw its own document, in order
    assert "reply" in policy.calls[1][0].messages[-1]["content"]
    assert all(docs[i].text in policy.calls[i // 3 * 2][i % 3].messages[1]["content"] for i in range(5))
    assert [s["slots_done"] for s in seen] == [0, 3, 5] and seen[-1]["accepted"] == 2
    assert counts["output_tokens"] > 0 and counts["seconds_per_attempt"] >= 0
    assert len(counts["accepted_similarity_to_example"]) == 2
    assert all(0 <= x < 0.9 for x in counts["accepted_similarity_to_example"])


@pytest.mark.slow
def test_reuse_reads_first_attempts_back_and_samples_the_repairs_only(dv, tmp_path):
    from scripted_policy import StreamingScriptedPolicy

    def first(conv, turn):
        return fenced(bad("never_truncates"))

    def repaired(conv, turn):
        assert turn == 1, "a first attempt was sampled instead of read back"
        return fenced(GOOD_CODE)

    docs = corpus().documents[:2]
    cfg = DesignConfig(attempts_per_slot=1, repair_turns=0)
    before = dv.measure(StreamingScriptedPolicy(first), docs, cfg=cfg, max_turns=6, seed=3,
                        batch=2, archive_dir=tmp_path / "a")
    inner = StreamingScriptedPolicy(repaired)
    policy = dv.ReusedPolicy(inner, tmp_path / "a")
    after = dv.measure(policy, docs, cfg=DesignConfig(attempts_per_slot=1, repair_turns=1),
                       max_turns=6, seed=3, batch=2, archive_dir=tmp_path / "b")
    assert policy.reused == 2 and inner.streamed == 2  # two read back, the two repairs sampled
    assert before["stages_first_attempt"] == after["stages_first_attempt"] == {"contract": 2}
    assert after["accepted_by_repair"] >= 1 and after["attempts"] == 4
    with pytest.raises(ValueError, match="no archive"):
        dv.ReusedPolicy(inner, tmp_path / "nowhere")


def test_document_sets_are_disjoint_and_stable(dv):
    docs = corpus().documents
    tune, held = dv.choose_documents(docs, "tune", 4), dv.choose_documents(docs, "heldout", 4)
    assert not {d.doc_id for d in tune} & {d.doc_id for d in held}
    assert dv.choose_documents(docs, "tune", 3) == tune[:3]
    assert dv.choose_documents(tuple(reversed(docs)), "tune", 4) == tune  # source order does not matter
    with pytest.raises(ValueError, match="too few"):
        dv.choose_documents(docs, "tune", 5)


@pytest.mark.slow
def test_command_line_prints_json(tmp_path):
    """The script end to end with a scripted policy (every design a junk reply) on the default
    corpus: JSON out, progress on stderr."""
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    cmd = [sys.executable, str(SCRIPT), "--n", "3", "--batch", "2", "--docs", "heldout",
           "--policy", "test_designer_validity:junk_policy", "--progress-every", "0.5"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["slots"] == 3 and result["accepted"] == 0 and result["stages_final"] == {"extract": 3}
    assert result["backend"] == "scripted" and len(result["doc_ids"]) == 3
    assert result["settings"]["max_turns"] >= 1 and result["settings"]["repair_turns"] == 0
    assert "[designer_validity]" in out.stderr


def junk_policy() -> ScriptedPolicy:
    return ScriptedPolicy(lambda conv, turn: "No code today.")


@pytest.mark.slow
def test_a_killed_run_continues_from_its_archive(dv, tmp_path):
    """--start-slot: the slots of the calls before it are read back from the archive (first
    attempts, repairs and acceptances alike), the rest designed with the whole run's seeds."""
    docs = corpus().documents[:5]
    cfg = DesignConfig(attempts_per_slot=1, repair_turns=1)
    first = ScriptedPolicy([[fenced(GOOD_CODE), "junk", "junk"], [fenced(LOCK), "junk"]])
    dv.measure(first, docs[:3], cfg=cfg, max_turns=6, seed=3, batch=3, archive_dir=tmp_path)
    rest = ScriptedPolicy([["junk", "junk"], ["junk", "junk"]])
    counts = dv.measure(rest, docs, cfg=cfg, max_turns=6, seed=3, batch=3, archive_dir=tmp_path,
                        start_slot=3)
    assert counts["slots"] == 5 and counts["accepted"] == 2 and counts["attempts"] == 9
    assert counts["attempts_timed"] == 4
    assert counts["slot_outcomes"][:3] == [["accepted"], ["extract", "accepted"], ["extract", "extract"]]
    assert docs[3].text in rest.calls[0][0].messages[1]["content"]
    with pytest.raises(ValueError, match="multiple of the batch"):
        dv.measure(rest, docs, cfg=cfg, max_turns=6, seed=3, batch=3, archive_dir=tmp_path, start_slot=2)


def test_short_parents_are_archived_checked_and_mutated(dv, tmp_path):
    """--parents: the short games in spadework/designer/example_games pass the checker, are archived beside
    the starters, and with every slot mutating, each prompt edits one of them (the starters are
    longer than a design's example_chars, so without them no slot has a parent)."""
    parents = dv.extra_sources(ROOT / "spadework" / "designer" / "example_games")
    assert len({p.skill for p in parents}) == 6 and all(len(p.code) < 2304 for p in parents)
    docs = corpus().documents[:2]
    policy = ScriptedPolicy([["junk", "junk"]])
    cfg = DesignConfig(attempts_per_slot=1, repair_turns=0, mutation_ratio=1.0)
    dv.measure(policy, docs, cfg=cfg, max_turns=4, seed=3, batch=2, archive_dir=tmp_path / "a",
               parents=parents)
    shown = [c.messages[1]["content"] for c in policy.calls[0]]
    assert all("Here is an existing environment" in m for m in shown)
    assert all(any(p.class_name in m for p in parents) for m in shown)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no environment modules"):
        dv.extra_sources(tmp_path / "empty")

"""benchmarks/agent_replies.py: its per-iteration counts and the advantage mass under each
format shaping, on episodes built here (no model), and its command line on a real archive."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from spadework.archive import Archive, EnvRecord, archive_path
from spadework.types import Episode, Sampling, Turn

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "agent_replies.py"
T = Sampling(0.7)


@pytest.fixture(scope="module")
def ar():
    spec = importlib.util.spec_from_file_location("agent_replies", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ep(env, i, parsed, ret, arm="no_hint", status="completed"):
    turns = tuple(Turn((1, 2), (5, 6, 7), (-0.1,) * 3, "\\boxed{3}" if ok else "I think so",
                       "", "", 0.0, "move" if ok else "stop", T, ok) for ok in parsed)
    return Episode(env, arm, i, i, turns, (ret,), True, False, status)


def episodes(a="a", b="b"):
    lost = [ep(a, i, [True, i > 0], 0.0) for i in range(4)]  # no win: formatting is all there is
    mixed = [ep(b, 0, [True], 1.0)] + [ep(b, i, [True, True], 0.0) for i in (1, 2, 3)]
    return [*lost, *mixed, ep(b, 9, [False], 0.0, status="env_error"),
            ep(a, 0, [True], 1.0, arm="hint")]


def test_counts_the_unhinted_arm_and_splits_the_advantage_mass(ar):
    got = ar.iteration_figures(episodes(), 0.2)
    assert (got["plays"], got["wins"]) == (8, 1)  # the failed play is no game; the hinted arm out
    assert got["replies"] == 16 and got["with_a_move"] == 14
    assert got["finish"] == {"move": 14, "stop": 2}
    zs, added = got["advantage_mass"]["zscored"], got["advantage_mass"]["added"]
    # z-scored, group a's formatting weighs about what group b's win does (each group's |z|
    # sums to about the same; a's plays are longer): 0.57 of the mass
    assert zs["share_without_a_win"] == pytest.approx(0.571, abs=0.001)
    # added after the z-score, it is 0.2 x |share - mean share| and weighs little beside the win
    assert added["share_without_a_win"] == pytest.approx(0.055, abs=0.001)
    assert added["token_weighted_abs_advantage"] < zs["token_weighted_abs_advantage"]


def test_pairs_the_arms_by_instance_and_tests_the_discordant_ones(ar):
    def pair(i, hinted, unhinted):
        return [ep("a", i, [True], float(hinted), arm="hint"), ep("a", i, [True], float(unhinted))]

    plays = [*pair(0, 1, 0), *pair(1, 1, 1), *pair(2, 0, 1), *pair(3, 0, 0),
             ep("a", 4, [True], 1.0), ep("a", 5, [True], 1.0, arm="hint", status="env_error"),
             ep("a", 5, [True], 0.0)]  # 4: no hinted play; 5: the hinted one failed
    got = ar.arm_pairs({0: plays, 1: pair(0, 0, 1)})  # iteration 1's seed 0 is its own instance
    assert got == {"neither": 1, "unhinted_only": 2, "hinted_only": 1, "both": 1,
                   "sign_test_p": 1.0}
    lopsided = ar.arm_pairs({0: [p for i in range(6) for p in pair(i, 0, 1)]})
    assert lopsided["unhinted_only"] == 6 and lopsided["sign_test_p"] == pytest.approx(2 / 64,
                                                                                         abs=1e-4)
    assert ar.arm_pairs({})["sign_test_p"] == 1.0
    # a hinted play that opened as its unhinted twin did was shown no hint: left out, as regret
    # leaves it out (spadework.metrics.score_env)
    shown = [dataclasses.replace(e, opening="Play. Hint: go left" if e.arm == "hint" else "Play.")
             for e in pair(0, 1, 0)]
    hintless = [dataclasses.replace(e, opening="Play.") for e in pair(1, 1, 0)]
    assert ar.arm_pairs({0: shown + hintless})["hinted_only"] == 1


def test_command_line_reads_each_iteration_and_refuses_a_folder_without_a_run(ar, tmp_path):
    run = tmp_path / "run"
    envs = [EnvRecord(f"class {n}Env:\n    pass\n", f"{n}Env", "games", None, "accepted", 0)
            for n in ("A", "B")]
    with Archive.open(archive_path(run)) as a:
        for e in envs:
            a.add_env(e)
        for it in (0, 1):
            a.add_episodes(it, episodes(envs[0].env_id, envs[1].env_id))
    out = subprocess.run([sys.executable, str(SCRIPT), str(run)], capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout)["runs"][str(run)]
    per = got["iterations"]
    assert sorted(per) == ["0", "1"] and per["1"] == ar.iteration_figures(
        episodes(envs[0].env_id, envs[1].env_id), 0.2)
    # one instance a run's iteration (env a, seed 0) was played by both arms: the hinted won
    assert got["arms"] == {"neither": 0, "unhinted_only": 0, "hinted_only": 2, "both": 0,
                           "sign_test_p": 0.5}
    bad = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nothing")],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "no archive" in bad.stderr

"""The run archive: round trips, schema versions, transactions, idempotence, threads, memory, CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from starters import starter_records

from spadework.archive import (
    SCHEMA_VERSION,
    Archive,
    DesignAttempt,
    EnvRecord,
    GroundingDocument,
    archive_path,
    export_envs,
)
from spadework.archive.schema import APPLICATION_ID, migrate
from spadework.errors import ArchiveError, ConfigError
from spadework.library import starter_envs
from spadework.types import CheckReport, CheckResult, Episode, Sampling, Turn

SPADEWORK = str(Path(sys.executable).with_name("spadework"))


def code_of(name: str, body: str = "pass") -> str:
    return f"class {name}:\n    def reset(self, seed=None):\n        {body}\n    def step(self, a):\n        {body}\n"


def report(ok: bool = True, cls: str = "AEnv") -> CheckReport:
    res = [CheckResult("static", True, "imports allowed", 0.01),
           CheckResult("solvable", ok, "" if ok else "solution() lost on seed 3", 0.25)]
    return CheckReport(None, cls, tuple(res))


def env(name: str = "AEnv", *, skill: str = "logical deduction", ok: bool = True, it: int = 0,
        body: str = "pass", **kw) -> EnvRecord:
    return EnvRecord.from_check(code_of(name, body), report(ok, name), iteration=it,
                                setting="games", skill=skill, created_at=1000.0 + it, **kw)


def turn(i: int, n: int = 3) -> Turn:
    return Turn(prompt_ids=tuple(range(i, i + 50)), output_ids=tuple(range(n)),
                logprobs=tuple(-0.1 * (j + 1) / 3 for j in range(n)), text=f"reply {i} ✓",
                action=f"\\boxed{{{i}}}", observation=f"obs {i}", reward=0.1 * i,
                finish_reason="stop", sampling=Sampling(0.7, 0.95, 20) if i % 2 else None,
                parsed=bool(i % 2))


def episode(env_id: str, arm: str = "hint", play: int = 0, turns: int = 2, win: bool = True) -> Episode:
    ts = tuple(turn(i) for i in range(turns))
    return Episode(env_id=env_id, arm=arm, play_index=play, seed=12345 + play, turns=ts,
                   rewards=tuple(t.reward for t in ts[:-1]) + ((1.0 if win else 0.0),),
                   terminated=True, truncated=False, status="completed", seconds=0.75,
                   opening=f"Guess the number.\n({arm} arm, play {play})")


def attempt(it: int, slot: int, env_id: str | None = None, **kw) -> DesignAttempt:
    base = dict(iteration=it, slot=slot, attempt=0, skill="logical deduction", setting="games",
                doc_id="doc-7", messages=({"role": "user", "content": "design"},),
                reply="```python\n...\n```", prompt_ids=(1, 2, 3), output_ids=(4, 5),
                logprobs=(-0.5, -1.25), outcome="accepted" if env_id else "extract",
                reason="" if env_id else "no python block", env_id=env_id,
                memory_ids=("ab" * 32,), created_at=5.0, sampling=Sampling(0.6, 0.95, 20))
    return DesignAttempt(**{**base, **kw})


@pytest.fixture
def arc(tmp_path: Path):
    with Archive.open(tmp_path / "run" / "archive.sqlite") as a:
        yield a


# opening, versions, migration -------------------------------------------------------------------


def test_new_archive_is_wal_with_foreign_keys_and_current_schema(arc: Archive) -> None:
    assert arc.schema_version == SCHEMA_VERSION and arc.migrated_from == 0
    assert arc.query("PRAGMA journal_mode")[0][0] == "wal"
    assert arc.query("PRAGMA foreign_keys")[0][0] == 1
    assert arc.query("PRAGMA application_id")[0][0] == APPLICATION_ID


def test_newer_schema_is_refused_with_a_message(tmp_path: Path) -> None:
    p = tmp_path / "a.sqlite"
    Archive.open(p).close()
    with sqlite3.connect(p) as c:
        c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ArchiveError, match=f"schema v{SCHEMA_VERSION + 1}, newer.*upgrade spadework"):
        Archive.open(p)


def test_foreign_and_missing_files_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE t (x)")
    with pytest.raises(ArchiveError, match="not a spadework archive"):
        Archive.open(other)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(ArchiveError, match="cannot open"):
        Archive.open(junk)
    with pytest.raises(ArchiveError, match="no archive at"):
        Archive.open(tmp_path / "absent.sqlite", create=False)
    assert not (tmp_path / "absent.sqlite").exists()


def test_many_openers_of_one_new_file_build_it_once(tmp_path: Path) -> None:
    p, barrier, errors, archives = tmp_path / "a.sqlite", threading.Barrier(4), [], []

    def opener() -> None:
        barrier.wait()
        try:
            archives.append(Archive.open(p))
        except ArchiveError as e:
            errors.append(e)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and [a.schema_version for a in archives] == [SCHEMA_VERSION] * 4
    assert sorted(a.migrated_from for a in archives)[0] == 0
    for a in archives:
        a.close()


def test_code_that_no_longer_matches_its_id_is_reported(arc: Archive) -> None:
    e = env()
    arc.add_env(e)
    with arc.transaction():
        arc._exec("UPDATE envs SET code = code || '# edited'")
    with pytest.raises(ArchiveError, match="corrupt: its code hashes to"):
        arc.get_env(e.env_id)


def _v1_file(path: Path, rows: list[tuple]) -> None:
    """An archive as schema v1 wrote it: built by the v1 step only, rows inserted by v1 SQL."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, str(path), target=1)
    conn.executemany(
        "INSERT INTO envs (env_id, code, class_name, setting, skill, name, origin, doc_id, "
        "doc_excerpt, parent_id, iteration, status, report, hint, created_at) "
        "VALUES (?, ?, ?, 'games', 'optimization', NULL, 'designed', NULL, NULL, NULL, 0, ?, ?, NULL, 1.0)",
        rows)
    conn.execute("INSERT INTO env_plays VALUES (?, 0, 4, 1, 0.25, 0.5)", (rows[0][0],))
    conn.close()


def test_v1_archive_is_migrated_with_its_data_and_a_backup(tmp_path: Path) -> None:
    from spadework.archive.records import report_to_json
    from spadework.types import env_id_of

    codes = [code_of("GoodEnv"), code_of("BadEnv"), code_of("OldEnv")]
    p = tmp_path / "a.sqlite"
    _v1_file(p, [
        (env_id_of(codes[0]), codes[0], "GoodEnv", "accepted", report_to_json(report(True))),
        (env_id_of(codes[1]), codes[1], "BadEnv", "rejected", report_to_json(report(False))),
        (env_id_of(codes[2]), codes[2], "OldEnv", "rejected", None),
    ])
    with Archive.open(p) as a:
        assert (a.migrated_from, a.schema_version) == (1, SCHEMA_VERSION)
        good, bad, old = (a.get_env(env_id_of(c)) for c in codes)
        assert good.failed_stage is None and good.report == report(True)
        assert (bad.failed_stage, bad.reason) == ("solvable", "solution() lost on seed 3")
        assert old.failed_stage == "unknown" and "v1" in old.reason
        st = a.env_stats(good.env_id)
        assert (st.plays, st.wins, st.win_rate, st.regret) == (4, 1, 0.25, 0.5)
    backup = tmp_path / "a.sqlite.v1.bak"
    with sqlite3.connect(backup) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM envs").fetchone()[0] == 3


def test_failed_migration_leaves_the_v1_file_as_it_was(tmp_path: Path) -> None:
    code = code_of("BadJsonEnv")
    p = tmp_path / "a.sqlite"
    from spadework.types import env_id_of

    _v1_file(p, [(env_id_of(code), code, "BadJsonEnv", "rejected", "{not json")])
    with pytest.raises(ArchiveError, match="corrupt"):
        Archive.open(p)
    with sqlite3.connect(p) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 1
        cols = [r[1] for r in c.execute("PRAGMA table_info(envs)")]
        assert "failed_stage" not in cols


def test_v2_turns_get_parsed_backfilled_and_no_sampling_record(tmp_path: Path) -> None:
    """Schema v3 records how samples were drawn and whether replies parsed: a v2 archive's turns
    get ``parsed`` from their stored text and no sampling record (the learner then skips them)."""
    from spadework.types import env_id_of

    code = code_of("GameEnv")
    p = tmp_path / "a.sqlite"
    conn = sqlite3.connect(p, isolation_level=None)
    migrate(conn, str(p), target=2)
    conn.execute("INSERT INTO envs (env_id, code, class_name, setting, skill, origin, iteration, "
                 "status, created_at) VALUES (?, ?, 'GameEnv', 'games', 's', 'designed', 0, "
                 "'accepted', 1.0)", (env_id_of(code), code))
    conn.execute("INSERT INTO episodes VALUES (0, ?, 'no_hint', 0, 7, NULL, 1, 0, 'completed', '', "
                 "0.5, 2)", (env_id_of(code),))
    for i, text in enumerate(["I move \\boxed{3}", "no move"]):
        conn.execute("INSERT INTO turns VALUES (0, ?, 'no_hint', 0, ?, 0, NULL, NULL, NULL, ?, '', "
                     "'', 0.0, 'stop')", (env_id_of(code), i, text))
    conn.close()
    with Archive.open(p) as a:
        (ep,) = a.episodes()
        assert [t.parsed for t in ep.turns] == [True, False]
        assert [t.sampling for t in ep.turns] == [None, None]


def test_v3_archive_keeps_everything_and_gets_its_documents_from_the_stored_prompts(tmp_path: Path) -> None:
    """Schema v4 stores the grounding document a design read and each episode's opening
    message. A v3 archive loses nothing: its documents are recovered from the ``<document>``
    block of the stored design prompts, its excerpts stay, its episodes read back unchanged
    with an empty opening."""
    from spadework.types import env_id_of

    code = code_of("TideEnv")
    p = tmp_path / "a.sqlite"
    conn = sqlite3.connect(p, isolation_level=None)
    migrate(conn, str(p), target=3)
    conn.execute("INSERT INTO envs (env_id, code, class_name, setting, skill, origin, doc_id, "
                 "doc_excerpt, iteration, status, created_at) VALUES (?, ?, 'TideEnv', 'games', 's', "
                 "'designed', 'Tides', 'Tides rise', 0, 'accepted', 1.0)", (env_id_of(code), code))
    prompt = json.dumps([{"role": "system", "content": "design"},
                         {"role": "user", "content": "Read.\n<document>\nTides rise twice a day.\n"
                          "The moon pulls.\n</document>\nWrite it."}])
    for slot, (doc, msgs) in enumerate([("Tides", prompt), ("Lost", "[]"), (None, prompt)]):
        conn.execute("INSERT INTO attempts (iteration, slot, attempt, skill, setting, doc_id, messages, "
                     "reply, finish_reason, outcome, reason, memory_ids, created_at) VALUES "
                     "(0, ?, 0, 's', 'games', ?, ?, 'r', 'stop', 'accepted', '', '[]', 1.0)",
                     (slot, doc, msgs))
    conn.execute("INSERT INTO episodes (iteration, env_id, arm, play_index, seed, rewards, terminated, "
                 "truncated, status, error, seconds, n_turns) VALUES (0, ?, 'hint', 0, 7, NULL, 1, 0, "
                 "'completed', '', 0.5, 0)", (env_id_of(code),))
    conn.close()
    with Archive.open(p) as a:
        assert (a.migrated_from, a.schema_version) == (3, SCHEMA_VERSION)
        doc = a.document("Tides")
        assert doc.text == "Tides rise twice a day.\nThe moon pulls." and doc.title is None
        assert a.document("Lost") is None  # no prompt to recover it from: the excerpt stays
        rec = a.get_env(env_id_of(code))
        assert (rec.doc_id, rec.doc_excerpt) == ("Tides", "Tides rise")
        (ep,) = a.episodes()
        assert (ep.seed, ep.status, ep.opening) == (7, "completed", "")
        assert len(a.attempts()) == 3
        new = GroundingDocument("Moon", "The moon is a satellite.", "Moon")
        assert a.add_document(new) and not a.add_document(GroundingDocument("Moon", "other"))
        assert a.document("Moon") == new
    with sqlite3.connect(tmp_path / "a.sqlite.v3.bak") as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 3


def test_v5_archive_gets_levels_backfilled_and_loses_nothing(tmp_path: Path) -> None:
    """Schema v6 records difficulty levels: how many an environment declares (from its stored
    check report) and the level each episode and each iteration's plays were at. A v5 archive's
    environments had none, so everything reads back at level 1, with its data unchanged."""
    from spadework.archive.records import report_to_json
    from spadework.types import CheckReport, CheckResult, Episode, env_id_of

    code, code3 = code_of("OneEnv"), code_of("ThreeEnv")
    three = CheckReport(env_id_of(code3), "ThreeEnv", (CheckResult("static", True, "ok"),), 4, levels=3)
    p = tmp_path / "a.sqlite"
    conn = sqlite3.connect(p, isolation_level=None)
    migrate(conn, str(p), target=5)
    for c, name, rep in ((code, "OneEnv", report_to_json(report(True))), (code3, "ThreeEnv", report_to_json(three))):
        conn.execute("INSERT INTO envs (env_id, code, class_name, setting, skill, origin, iteration, "
                     "status, report, created_at) VALUES (?, ?, ?, 'games', 's', 'designed', 0, "
                     "'accepted', ?, 1.0)", (env_id_of(c), c, name, rep))
    conn.execute("INSERT INTO env_plays VALUES (?, 0, 4, 1, 0.25, 0.5)", (env_id_of(code),))
    conn.execute("INSERT INTO episodes (iteration, env_id, arm, play_index, seed, rewards, terminated, "
                 "truncated, status, error, seconds, n_turns, opening) VALUES (0, ?, 'hint', 0, 7, NULL, "
                 "1, 0, 'completed', '', 0.5, 0, 'Go.')", (env_id_of(code),))
    conn.close()
    with Archive.open(p) as a:
        assert (a.migrated_from, a.schema_version) == (5, SCHEMA_VERSION)
        assert a.get_env(env_id_of(code)).levels == 1 and a.get_env(env_id_of(code3)).levels == 3
        assert [r[0] for r in a.query("SELECT levels FROM envs ORDER BY class_name")] == [1, 3]
        (ep,) = a.episodes()
        assert (ep.seed, ep.opening, ep.level) == (7, "Go.", 1)
        assert a.query("SELECT level FROM env_plays")[0][0] == 1
        a.add_episodes(1, [Episode(env_id_of(code3), "no_hint", 0, 9, (), (1.0,), True, False,
                                   "completed", level=2)])
        assert [e.level for e in a.episodes(iteration=1)] == [2]
    with sqlite3.connect(tmp_path / "a.sqlite.v5.bak") as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 5


# round trips ----------------------------------------------------------------------------------------


def test_env_round_trip_first_record_wins_and_hint_is_added(arc: Archive) -> None:
    good, bad = env("AEnv", doc_id="d1", doc_excerpt="Tides", parent_id="f" * 64), env("BEnv", ok=False)
    assert arc.add_env(good) and arc.add_env(bad)
    assert arc.get_env(good.env_id) == good and arc.get_env(bad.env_id) == bad
    assert bad.failed_stage == "solvable" and arc.get_env(bad.env_id).reason.startswith("solution()")
    assert not arc.add_env(dataclasses.replace(good, iteration=9))
    assert arc.get_env(good.env_id).iteration == 0
    arc.set_hint(good.env_id, "try the middle first")
    assert arc.get_env(good.env_id).hint == "try the middle first"
    with pytest.raises(ArchiveError, match="no environment"):
        arc.set_hint("0" * 64, "x")
    assert arc.get_env("0" * 64) is None


def test_list_filters_find_by_prefix_and_codes(arc: Archive) -> None:
    recs = [env("AEnv", it=2), env("BEnv", ok=False, it=1), env("CEnv", skill="optimization", it=0)]
    for r in recs:
        arc.add_env(r)
    assert [r.class_name for r in arc.list_envs()] == ["CEnv", "BEnv", "AEnv"]
    assert [r.class_name for r in arc.list_envs(status="accepted")] == ["CEnv", "AEnv"]
    assert [r.class_name for r in arc.list_envs(skill="logical deduction", limit=1)] == ["BEnv"]
    assert sorted(arc.env_codes()) == sorted([recs[0].code, recs[2].code])
    assert arc.find_env(recs[0].env_id[:10].upper()) == recs[0]
    with pytest.raises(ArchiveError, match="no environment id"):
        arc.find_env("ffff" if not recs[0].env_id.startswith("ffff") else "eeee")
    with pytest.raises(ArchiveError, match="hex characters"):
        arc.find_env("zzzz")
    with pytest.raises(ArchiveError, match="4 or more"):
        arc.find_env("ab")


def test_env_record_states_are_consistent() -> None:
    with pytest.raises(ValueError, match="failed_stage"):
        EnvRecord(code="x", class_name="X", setting="games", skill=None, status="rejected", iteration=0)
    with pytest.raises(ValueError, match="status"):
        EnvRecord(code="x", class_name="X", setting="games", skill=None, status="maybe", iteration=0)


def test_stats_are_per_iteration_and_idempotent(arc: Archive) -> None:
    e = env()
    arc.add_env(e)
    arc.record_env_stats(e.env_id, 3, plays=8, wins=2, regret=0.5)
    arc.record_env_stats(e.env_id, 3, plays=8, wins=2, regret=0.5)  # a resumed stage
    arc.record_env_stats(e.env_id, 5, plays=4, wins=3, regret=None)
    st = arc.env_stats(e.env_id)
    assert (st.plays, st.wins, st.win_rate, st.regret, st.last_played_iteration) == (12, 5, 0.75, None, 5)
    with pytest.raises(ArchiveError, match="wins <= plays"):
        arc.record_env_stats(e.env_id, 6, plays=2, wins=3, regret=0.0)
    with pytest.raises(ArchiveError, match="store an environment before"):
        arc.record_env_stats("9" * 64, 1, plays=1, wins=0, regret=0.0)


def test_attempts_round_trip_and_designer_buffer(arc: Archive) -> None:
    e = env()
    arc.add_env(e)
    a, rejected = attempt(1, 0, e.env_id), attempt(1, 1)
    arc.add_attempt(a)
    arc.add_attempt(rejected)
    assert arc.attempts(1) == [a, rejected] and arc.attempts(2) == []
    assert arc.pending_attempts() == [a, rejected]
    arc.set_attempt_reward(rejected.key, -1.0)
    arc.set_attempt_reward(a.key, 0.6)
    arc.add_attempt(a)  # stored again (a resumed design stage): the credit stays
    assert [x.reward for x in arc.attempts()] == [0.6, -1.0] and arc.pending_attempts() == []
    assert [x.key for x in arc.ready_attempts()] == [a.key, rejected.key]
    arc.mark_trained([a.key], 2)
    assert [x.key for x in arc.ready_attempts()] == [rejected.key]
    assert arc.attempts()[0].trained_iteration == 2
    with pytest.raises(ArchiveError, match="no designer attempt"):
        arc.set_attempt_reward((9, 9, 9), 0.0)
    with pytest.raises(ArchiveError, match="finite"):
        arc.set_attempt_reward(a.key, float("nan"))
    with pytest.raises(ArchiveError, match="store an environment before"):
        arc.add_attempt(attempt(1, 2, "e" * 64))


def test_episodes_round_trip_exactly_and_filter(arc: Archive) -> None:
    e1, e2 = env("AEnv"), env("BEnv")
    arc.add_env(e1)
    arc.add_env(e2)
    eps = [episode(e1.env_id, arm, p) for arm in ("hint", "no_hint") for p in range(2)]
    odd = dataclasses.replace(episode(e2.env_id, "no_hint", 0, turns=0), rewards=(), status="env_error",
                              error="EnvCrashed: killed by SIGSEGV", terminated=False)
    assert arc.add_episodes(4, eps + [odd]) == 5
    assert arc.add_episodes(5, [eps[0]]) == 1
    assert arc.episodes(iteration=4) == sorted(eps + [odd], key=lambda x: (x.env_id, x.arm, x.play_index))
    assert arc.episodes(iteration=4, env_id=e1.env_id, arm="no_hint") == eps[2:]
    assert arc.episodes(env_id=e2.env_id) == [odd]
    assert len(arc.episodes()) == 6
    t = arc.episodes(iteration=5)[0].turns[1]
    assert t.logprobs == turn(1).logprobs and t.prompt_ids == tuple(range(1, 51))


def test_growing_prompts_are_stored_once_and_come_back_whole(arc: Archive) -> None:
    e = env()
    arc.add_env(e)
    prompts = [tuple(range(100)), tuple(range(130)), tuple(range(160)), (7,) * 20, (7,) * 25]
    ts = tuple(dataclasses.replace(turn(0), prompt_ids=p) for p in prompts)
    ep = dataclasses.replace(episode(e.env_id), turns=ts, rewards=(0.0,) * 5)
    arc.add_episodes(0, [ep])
    assert arc.episodes() == [ep]
    stored = arc.query("SELECT prompt_shared, length(prompt_ids) FROM turns ORDER BY turn_index")
    assert [tuple(r) for r in stored] == [(0, 400), (100, 120), (130, 120), (0, 80), (20, 20)]


def test_storing_the_same_episodes_twice_counts_once(arc: Archive) -> None:
    e = env()
    arc.add_env(e)
    eps = [episode(e.env_id, "hint", p) for p in range(3)]
    assert arc.add_episodes(0, eps) == 3
    replay = [eps[0], dataclasses.replace(eps[1], turns=eps[1].turns[:1], rewards=(0.0,))]
    assert arc.add_episodes(0, replay) == 0
    got = arc.episodes(iteration=0)
    assert len(got) == 3 and got[1] == replay[1]
    assert arc.query("SELECT count(*) FROM turns")[0][0] == 2 + 1 + 2


def test_bad_episodes_are_refused_before_anything_is_written(arc: Archive) -> None:
    e = env()
    arc.add_env(e)
    bad = dataclasses.replace(episode(e.env_id, play=1), arm="sideways")
    with pytest.raises(ArchiveError, match="arm 'sideways'"):
        arc.add_episodes(0, [episode(e.env_id), bad])
    with pytest.raises(ArchiveError, match="store an environment before"):
        arc.add_episodes(0, [episode(e.env_id), episode("c" * 64)])
    assert arc.episodes() == []


def test_iterations_and_state_round_trip(arc: Archive) -> None:
    assert arc.iterations() == [] and arc.load_state("curriculum") is None
    arc.record_iteration(0, {"reward/agent": 0.25, "designed": 4})
    arc.record_iteration(1, {"reward/agent": 0.5})
    arc.record_iteration(1, {"reward/agent": 0.75})
    assert [(r.iteration, r.metrics) for r in arc.iterations()] == [
        (0, {"designed": 4, "reward/agent": 0.25}), (1, {"reward/agent": 0.75})]
    state = {"skills": ["optimization"], "pool": ["ab" * 32], "epoch": 3}
    arc.save_state("curriculum", state)
    assert arc.load_state("curriculum") == state
    with pytest.raises(ArchiveError, match="metrics of iteration 2.*finite"):
        arc.record_iteration(2, {"loss": float("nan")})


# transactions, kills, threads -----------------------------------------------------------------------


def test_a_failed_stage_writes_nothing(arc: Archive) -> None:
    e = env()
    with pytest.raises(RuntimeError):
        with arc.transaction():
            arc.add_env(e)
            arc.add_episodes(0, [episode(e.env_id)])
            arc.record_iteration(0, {"x": 1})
            raise RuntimeError("killed mid-stage")
    assert arc.list_envs() == [] and arc.episodes() == [] and arc.iterations() == []


def test_nested_transaction_failure_undoes_only_itself(arc: Archive) -> None:
    a, b = env("AEnv"), env("BEnv")
    with arc.transaction():
        arc.add_env(a)
        with pytest.raises(ArchiveError):
            with arc.transaction():
                arc.add_env(b)
                arc.add_episodes(0, [episode("d" * 64)])
    assert [r.class_name for r in arc.list_envs()] == ["AEnv"]


def test_a_killed_writer_leaves_committed_stages_and_nothing_else(tmp_path: Path) -> None:
    p = tmp_path / "a.sqlite"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_archive import env, episode
        from spadework.archive import Archive
        a = Archive.open({str(p)!r})
        with a.transaction():
            e = env("DoneEnv"); a.add_env(e); a.add_episodes(0, [episode(e.env_id)])
            a.record_iteration(0, {{"ok": 1}})
        with a.transaction():
            e = env("HalfEnv"); a.add_env(e); a.add_episodes(1, [episode(e.env_id)])
            print("mid-stage", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "mid-stage"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with Archive.open(p) as a:
        assert [r.class_name for r in a.list_envs()] == ["DoneEnv"]
        assert len(a.episodes()) == 1 and [r.iteration for r in a.iterations()] == [0]


def test_readers_in_two_threads_are_not_blocked_by_an_open_write(tmp_path: Path) -> None:
    p = tmp_path / "a.sqlite"
    writer = Archive.open(p)
    e = env()
    writer.add_env(e)
    writer.add_episodes(0, [episode(e.env_id, play=i) for i in range(4)])
    results: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def read(name: str) -> None:
        with Archive.open(p, busy_timeout_s=2.0) as mine:
            barrier.wait()
            results[name] = [len(mine.episodes()) for _ in range(20)]
            results[name + "-envs"] = len(mine.list_envs())

    with writer.transaction():  # uncommitted writes must stay invisible to readers
        writer.add_env(env("PendingEnv"))
        threads = [threading.Thread(target=read, args=(n,)) for n in ("r1", "r2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    writer.close()
    assert results == {"r1": [4] * 20, "r2": [4] * 20, "r1-envs": 1, "r2-envs": 1}


def test_one_archive_shared_by_two_threads(arc: Archive) -> None:
    e = env()
    arc.add_env(e)
    arc.add_episodes(0, [episode(e.env_id, play=i) for i in range(3)])
    seen: list[int] = []

    def read() -> None:
        seen.extend(len(arc.episodes()) for _ in range(30))

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert seen == [3] * 60


# memory ---------------------------------------------------------------------------------------------


def test_memory_examples_rank_by_regret_within_the_band(arc: Archive) -> None:
    # name: (skill, plays, wins, regret) -> win rates 0.5, 0.25, 0.75, 0.05 (out), 1.0 (out), 0.5
    data = {"AEnv": ("optimization", 4, 2, 0.1), "BEnv": ("optimization", 4, 1, 0.4),
            "CEnv": ("optimization", 4, 3, 0.4), "DEnv": ("optimization", 20, 1, 0.9),
            "EEnv": ("optimization", 2, 2, 0.8), "FEnv": ("logical deduction", 2, 1, 0.99)}
    for name, (skill, plays, wins, reg) in data.items():
        rec = env(name, skill=skill)
        arc.add_env(rec)
        arc.record_env_stats(rec.env_id, 1 if name != "CEnv" else 2, plays=plays, wins=wins, regret=reg)
    rejected = env("GEnv", skill="optimization", ok=False)
    arc.add_env(rejected)
    arc.record_env_stats(rejected.env_id, 1, plays=2, wins=1, regret=5.0)
    got = arc.memory_examples("optimization", k=5)
    # B and C tie on regret 0.4: C was played more recently (iteration 2) and comes first.
    assert [m.class_name for m in got] == ["CEnv", "BEnv", "AEnv"]
    assert got[0].code == code_of("CEnv") and got[0].note == "skill: optimization, win rate 0.75, regret 0.40"
    assert [m.class_name for m in arc.memory_examples("optimization", k=1)] == ["CEnv"]
    assert [m.class_name for m in arc.memory_examples(None, k=2)] == ["FEnv", "CEnv"]
    assert [m.class_name for m in arc.memory_examples("optimization", lo=0.3, hi=0.6)] == ["AEnv"]
    neg = arc.memory_negatives("optimization", k=3)  # the most extreme first: 1.0, then 0.05
    assert [(n.class_name, n.reason) for n in neg] == [("EEnv", "too easy"), ("DEnv", "too hard")]
    assert neg[0].summary == "" and "EEnv" in neg[0].note  # no docstring, no Concept line
    with pytest.raises(ArchiveError, match="lo must be <= hi"):
        arc.memory_examples("optimization", lo=0.9, hi=0.1)


def test_memory_uses_the_latest_iteration_rates(arc: Archive) -> None:
    e = env()
    arc.add_env(e)
    arc.record_env_stats(e.env_id, 1, plays=4, wins=2, regret=0.3)
    assert len(arc.memory_examples("logical deduction")) == 1
    arc.record_env_stats(e.env_id, 2, plays=4, wins=4, regret=0.0)  # the agent learned it
    assert arc.memory_examples("logical deduction") == []
    assert [n.reason for n in arc.memory_negatives("logical deduction")] == ["too easy"]


# starter, export, CLI -------------------------------------------------------------------------------


@pytest.mark.slow
def test_import_starter_is_idempotent_and_complete(arc: Archive) -> None:
    starters = starter_envs()
    records = starter_records(8)
    assert arc.import_starter(records) == len(starters) and arc.import_starter(records) == 0
    got = {r.env_id: r for r in arc.list_envs()}
    assert set(got) == {s.env_id for s in starters}
    for s in starters:
        r = got[s.env_id]
        assert (r.class_name, r.setting, r.skill, r.name, r.origin, r.status, r.iteration) == (
            s.class_name, s.setting, s.skill, s.name, "starter", "accepted", -1)
        assert r.report.ok and r.report.max_turns == 8
    assert arc.starters_checked_at(8) and not arc.starters_checked_at(3)


@pytest.mark.slow
def test_starters_rechecked_under_another_turn_limit_take_its_verdict(arc: Archive) -> None:
    """Nim's second level needs two moves: at max_turns=1 it is stored as rejected at solvable,
    and checked at 8 again it is accepted again."""
    arc.import_starter(starter_records(8))
    assert arc.import_starter(starter_records(1)) == len(starter_envs())
    puzzle = next(r for r in arc.list_envs() if r.name == "nim")
    assert (puzzle.status, puzzle.failed_stage, puzzle.report.max_turns) == ("rejected", "solvable", 1)
    assert "max_turns=1" in puzzle.reason and puzzle.reason.startswith("level 2: ")
    assert arc.starters_checked_at(1)
    arc.import_starter(starter_records(8))
    assert arc.get_env(puzzle.env_id).status == "accepted"
    with pytest.raises(ArchiveError, match="add_env"):
        arc.import_starter([env("AEnv")])


def test_export_jsonl_and_parquet(arc: Archive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = env("AEnv"), env("BEnv", ok=False, it=1)
    arc.add_env(a)
    arc.add_env(b)
    arc.record_env_stats(a.env_id, 1, plays=4, wins=1, regret=0.25)
    assert export_envs(arc, tmp_path / "out" / "e.jsonl").written == 2
    rows = [json.loads(x) for x in (tmp_path / "out" / "e.jsonl").read_text().splitlines()]
    assert [(r["class_name"], r["plays"], r["win_rate"], r["failed_stage"]) for r in rows] == [
        ("AEnv", 4, 0.25, None), ("BEnv", None, None, "solvable")]
    assert rows[1]["report"]["results"][1]["reason"] == "solution() lost on seed 3"
    assert rows[0]["code"] == a.code
    import pyarrow.parquet as pq

    assert export_envs(arc, tmp_path / "e.parquet", "parquet").written == 2
    table = pq.read_table(tmp_path / "e.parquet").to_pylist()
    assert [r["env_id"] for r in table] == [a.env_id, b.env_id] and table[0]["regret"] == 0.25
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ConfigError, match="pyarrow.*--format jsonl"):
        export_envs(arc, tmp_path / "f.parquet", "parquet")
    assert not (tmp_path / "f.parquet").exists()
    with pytest.raises(ConfigError, match="unknown export format"):
        export_envs(arc, tmp_path / "e.csv", "csv")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SPADEWORK, "archive", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_cli_import_ls_show_export(tmp_path: Path) -> None:
    run = ["--run-dir", str(tmp_path / "run")]
    n = len(starter_envs())
    out = _cli("import-starter", *run)
    assert out.returncode == 0 and out.stdout.startswith(f"{n} starter"), out.stderr
    with Archive.open(archive_path(tmp_path / "run")) as a:
        nim = next(r for r in a.list_envs() if r.name == "nim")
        a.record_env_stats(nim.env_id, 0, plays=8, wins=2, regret=0.375)
    ls = _cli("ls", *run, "--status", "accepted")
    lines = ls.stdout.splitlines()
    assert ls.returncode == 0 and len(lines) == n + 1 and lines[0].startswith("env_id")
    assert any(ln.startswith(nim.env_id[:12]) and "0.25" in ln and "0.38" in ln for ln in lines)
    show = _cli("show", nim.env_id[:8], *run)
    assert show.returncode == 0 and nim.env_id in show.stdout and "class NimEnv" in show.stdout
    assert "8 (2 won)" in show.stdout
    for fmt in ("jsonl", "parquet"):
        ex = _cli("export", *run, "--format", fmt, "--out", str(tmp_path / f"e.{fmt}"))
        assert ex.returncode == 0 and (tmp_path / f"e.{fmt}").stat().st_size > 0, ex.stderr
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == n


def test_cli_errors_are_one_line_with_exit_1(tmp_path: Path) -> None:
    missing = _cli("ls", "--db", str(tmp_path / "none.sqlite"))
    assert missing.returncode == 1 and "no archive at" in missing.stderr
    assert not (tmp_path / "none.sqlite").exists()
    neither = _cli("ls")
    assert neither.returncode == 1 and "exactly one of --db FILE or --run-dir DIR" in neither.stderr
    p = tmp_path / "new.sqlite"
    Archive.open(p).close()
    with sqlite3.connect(p) as c:
        c.execute("PRAGMA user_version = 99")
    newer = _cli("show", "abcd", "--db", str(p))
    assert newer.returncode == 1 and "newer than this spadework" in newer.stderr
    assert "Traceback" not in newer.stderr

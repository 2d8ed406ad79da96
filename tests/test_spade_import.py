"""`spadework archive import --format spade`: the reference's pools into an archive."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from spadework.archive import Archive, EnvRecord
from spadework.archive.spade_import import import_spade, read_memory
from spadework.env.checker import CheckConfig, check
from spadework.env.reference import adapt
from spadework.errors import ArchiveError
from spadework.sandbox import Limits, Sandbox

ROOT = Path(__file__).resolve().parent.parent
POOL = ROOT / "tests" / "fixtures" / "spade_pool"
HAS_MV = importlib.util.find_spec("math_verify") is not None
CLI = [sys.executable, "-c", "from spadework.cli import main; main()"]

#: What the fixtures are written to produce (see tests/fixtures/spade_pool/README.md).
EXPECTED = {
    # from its whole snippet; 'Answer in \boxed{}.' shows no concrete move: unreadable
    "game_00002_000_pattern_recognition.py": ("rejected", "readable"),
    "game_00004_000_mathematical_reasoning.py": ("rejected", "readable") if HAS_MV else ("rejected", "static"),
    "game_00004_001_logical_deduction.py": ("accepted", None),
    "game_00008_000_pattern_recognition.py": ("rejected", "solvable"),
    "game_00008_001_optimization.py": ("rejected", "solvable"),
    "game_00008_002_spatial_reasoning.py": ("rejected", "static"),
    "game_00012_000_causal_inference.py": ("rejected", "import"),
}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def dump(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return (c.execute("SELECT * FROM envs ORDER BY env_id").fetchall()
                + c.execute("SELECT * FROM imports ORDER BY env_id, source_sha256").fetchall())


def test_command_reports_each_game_and_changes_nothing_on_a_second_run(tmp_path):
    db = tmp_path / "a.sqlite"
    out = cli("archive", "import", "--format", "spade", str(POOL), "--db", str(db), "--max-turns", "6")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # nothing leaks: no warnings, no tracebacks
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"importing spade games from {POOL}") and "max_turns=6" in lines[0]
    for name, (status, stage) in EXPECTED.items():
        (line,) = [ln for ln in lines if f" {name} " in ln]
        if status == "accepted":
            assert line.startswith(f"✓ {name}  accepted as "), line
        else:
            assert line.startswith(f"✗ {name}  rejected at {stage}: "), line
    why = {name: next(ln for ln in lines if f" {name} " in ln) for name in EXPECTED}
    assert "reward is 5.0" in why["game_00008_000_pattern_recognition.py"]
    assert "reference accepts rewards in [-10, 10]" in why["game_00008_000_pattern_recognition.py"]
    assert "not solvable" in why["game_00008_001_optimization.py"]
    assert "import of 'os' is not allowed" in why["game_00008_002_spatial_reasoning.py"]
    assert "ToolUseBaseEnv" in why["game_00012_000_causal_inference.py"]
    assert "only the placeholder \\boxed{}" in why["game_00002_000_pattern_recognition.py"]
    assert any("game_00002_001_optimization.py: not in" in ln and "cut at 2000" in ln for ln in lines)
    n_ok = sum(s == "accepted" for s, _ in EXPECTED.values())
    assert lines[-1] == (f"accepted {n_ok}, rejected {7 - n_ok} ("
                         + ", ".join(f"{k} {v}" for k, v in sorted(_stage_counts().items()))
                         + "), already in the archive 0; env_memory.json: 6 records, 1 not importable")
    before = dump(db)
    again = cli("archive", "import", "--format", "spade", str(POOL), "--db", str(db), "--max-turns", "6")
    assert again.returncode == 0 and again.stdout.splitlines()[-1].startswith(
        "accepted 0, rejected 0, already in the archive 7")
    assert dump(db) == before


def _stage_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for status, stage in EXPECTED.values():
        if status == "rejected":
            counts[stage] = counts.get(stage, 0) + 1
    return counts


def test_bad_input_is_one_line_and_creates_nothing(tmp_path):
    db = tmp_path / "a.sqlite"
    out = cli("archive", "import", "--format", "spade", str(tmp_path / "nope"), "--db", str(db))
    assert out.returncode == 1 and out.stderr.strip().count("\n") == 0
    assert "is not a folder" in out.stderr and not db.exists()
    bad = tmp_path / "pool"
    bad.mkdir()
    shutil.copy(POOL / "game_00004_001_logical_deduction.py", bad)
    (bad / "env_memory.json").write_text('{"not": "a list"}')
    out = cli("archive", "import", "--format", "spade", str(bad), "--db", str(db))
    assert out.returncode == 1 and out.stderr.startswith("error: ") and "not the reference's list" in out.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    out = cli("archive", "import", "--format", "spade", str(empty), "--db", str(db))
    assert out.returncode == 1 and "no game_*.py files" in out.stderr
    out = cli("archive", "import", "--format", "jsonl", str(POOL), "--db", str(db))
    assert out.returncode == 2  # typer refuses a format it does not offer


def test_fields_land_where_the_docstring_says(tmp_path):
    memory = {r.file_name: r for r in read_memory(POOL / "env_memory.json")}
    with Sandbox(Limits(math_verify=HAS_MV)) as sb, Archive.open(tmp_path / "a.sqlite") as a:
        summary = import_spade(a, POOL, sandbox=sb, config=CheckConfig(
            max_turns=6, allow_numpy=True, allow_math_verify=HAS_MV))
        outcomes = {o.source: o for o in summary.outcomes}
        assert {k: (o.status, o.stage) for k, o in outcomes.items()} == EXPECTED
        name = "game_00004_001_logical_deduction.py"
        rec = a.get_env(outcomes[name].env_id)
        assert (rec.name, rec.skill, rec.origin, rec.iteration, rec.status, rec.setting) == (
            name[:-3], "logical deduction", "imported", -1, "accepted", "games")
        assert rec.report.max_turns == 6 and rec.class_name == "SwitchBoardEnvAdapted"
        (imp,) = a.imports(rec.env_id)
        mem = memory[name]
        assert (imp.format, imp.source_file, imp.win_rate, imp.regret, imp.rollout_id) == (
            "spade", name, mem.win_rate, mem.regret, 4)
        assert imp.source_sha256 == hashlib.sha256((POOL / name).read_bytes()).hexdigest()
        assert any("from collections import deque" in x for x in imp.adaptations)
        assert any("Counter" in x for x in imp.adaptations)
        snippet = a.imports(outcomes["game_00002_000_pattern_recognition.py"].env_id)[0]
        assert snippet.metadata == {"corpus_doc_id": "doc-1187"}
        tool = a.get_env(outcomes["game_00012_000_causal_inference.py"].env_id)
        assert tool.status == "rejected" and tool.failed_stage == "import"
        assert tool.code == (POOL / "game_00012_000_causal_inference.py").read_text()
        assert a.env_stats(rec.env_id) is None  # the reference agent's figures are not plays here


def test_adaptation_is_what_makes_the_reference_game_pass(tmp_path):
    original = (POOL / "game_00004_001_logical_deduction.py").read_text()
    cfg = CheckConfig(max_turns=6)
    with Sandbox(Limits()) as sb:
        raw = check(original, sandbox=sb, config=cfg, module=True)
        adapted = adapt(original)
        ok = check(adapted.code, sandbox=sb, config=cfg, module=True)
    assert not raw.ok and ok.ok, (raw.reason, ok.reason)
    # our rule would play the subclass defined last; the reference plays the first *Env class
    assert raw.class_name == "HardSwitchBoardEnv" and adapted.played_class == "SwitchBoardEnv"
    added = {"from collections import Counter", "from collections import deque"}
    lines = adapted.code.splitlines()
    assert added <= set(lines[:4])  # after the header docstring
    kept = [ln for ln in lines if ln not in added]
    assert kept[:len(original.splitlines())] == original.splitlines()  # the game as written


def test_import_into_an_existing_archive_clobbers_nothing(tmp_path):
    code = adapt((POOL / "game_00004_001_logical_deduction.py").read_text()).code
    db = tmp_path / "a.sqlite"
    with Sandbox(Limits()) as sb:
        report = check(code, sandbox=sb, config=CheckConfig(max_turns=6), module=True)
    mine = EnvRecord.from_check(code, report, iteration=3, setting="games", skill="my skill",
                                name="mine", origin="designed")
    with Archive.open(db) as a:
        a.add_env(mine)
        a.record_env_stats(mine.env_id, 3, plays=8, wins=3, regret=0.2)
    before = dump(db)
    out = cli("archive", "import", "--format", "spade", str(POOL), "--db", str(db), "--max-turns", "6")
    assert out.returncode == 0, out.stderr
    assert any(ln.startswith("= game_00004_001_logical_deduction.py  already in the archive as "
                             + mine.env_id[:12]) for ln in out.stdout.splitlines())
    with Archive.open_read_only(db) as a:
        kept = a.get_env(mine.env_id)
        assert (kept.origin, kept.name, kept.skill, kept.iteration) == ("designed", "mine", "my skill", 3)
        assert a.env_stats(mine.env_id).plays == 8
        assert a.imports(mine.env_id)[0].source_file == "game_00004_001_logical_deduction.py"
    after = dump(db)
    assert [r for r in before if r in after] == before  # every row that was there is unchanged


def test_an_imported_game_plays_in_a_gymnasium_loop(tmp_path):
    gym = pytest.importorskip("spadework.gym")
    db = tmp_path / "a.sqlite"
    with Sandbox(Limits()) as sb, Archive.open(db) as a:
        summary = import_spade(a, POOL, sandbox=sb, config=CheckConfig(max_turns=6))
    env_id = next(o.env_id for o in summary.outcomes if o.source == "game_00004_001_logical_deduction.py")
    with gym.make(db, env_id=env_id[:10]) as env:
        wins = 0
        for episode in range(3):
            obs, info = env.reset(seed=episode)
            assert "Turn every lamp off" in obs
            done = False
            for action in env.solution():
                obs, reward, terminated, truncated, info = env.step(action)
                done = terminated or truncated
                if done:
                    break
            wins += terminated and reward == 1.0
        assert wins == 3


def test_read_memory_refuses_malformed_records(tmp_path):
    path = tmp_path / "env_memory.json"
    path.write_text(json.dumps([{"game_file": "g.py", "skill": "x", "code_snippet": ""}]))
    with pytest.raises(ArchiveError, match="record 0 lacks actor_win_rate"):
        read_memory(path)
    path.write_text(json.dumps([{"game_file": "g.py", "skill": "x", "code_snippet": "",
                                 "actor_win_rate": float("nan")}]))
    with pytest.raises(ArchiveError, match="not a finite number"):
        read_memory(path)


@pytest.mark.skipif(not HAS_MV, reason="math_verify is not installed")
def test_check_command_allows_math_verify_where_a_file_imports_it():
    out = cli("check", str(POOL / "game_00004_000_mathematical_reasoning.py"), "--seeds", "4")
    # the raw reference game loads and plays (math_verify preloaded); it fails only because its
    # solution() is a bare answer, which the importer's adaptation boxes
    assert out.returncode == 1 and "✓ load" in out.stdout and "✗ solvable" in out.stdout, out.stdout

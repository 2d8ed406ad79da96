"""The attack suite, and reading archives on read-only locations, must also hold for a caller
that is not root.

As root, this re-runs the whole of ``test_attacks.py`` (the sandbox then uses a user namespace
instead of a uid drop, and seccomp plus Landlock carry the confinement) and
``tests/test_archive_read_only.py`` (file permissions bind only an unprivileged user) in a pytest
subprocess that has switched to uid/gid 65534 first. When the suite already runs unprivileged,
it is its own proof and these tests skip.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534


def _blocked_ancestor(path: Path) -> Path | None:
    """The first directory on the way to ``path`` that others may not traverse, if any."""
    return next((p for p in [*reversed(path.parents), path] if not os.stat(p).st_mode & 0o001), None)


def _expose(trees: list[Path]) -> None:
    """Let uid 65534 reach ``trees`` (the interpreter, the checkout with its .venv) where they
    lie under a 0700 directory (root's home, a ``mktemp -d`` clone), in this process only.

    In a private mount namespace, a 0755 tmpfs covers each blocking directory and the trees
    under it are bind-mounted back; nothing outside the subprocess sees any of this.
    """
    groups: dict[Path, list[Path]] = {}
    for tree in trees:
        blocked = _blocked_ancestor(tree)
        if blocked is not None:
            groups.setdefault(blocked, []).append(tree)
    if not groups:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    ms_rec, ms_private, ms_bind = 0x4000, 0x40000, 0x1000
    ok = (libc.unshare(0x00020000) == 0
          and libc.mount(None, b"/", None, ms_rec | ms_private, None) == 0)
    # Bind sources are opened inside the new namespace and before any cover hides them.
    keep = {tree: os.open(tree, os.O_PATH) for trees_ in groups.values() for tree in trees_} if ok else {}
    for blocked, under in groups.items():
        ok = ok and libc.mount(b"tmpfs", str(blocked).encode(), b"tmpfs", 0, b"mode=0755") == 0
        for tree in under:
            if ok:
                os.makedirs(tree, exist_ok=True)
                ok = libc.mount(f"/proc/self/fd/{keep[tree]}".encode(), str(tree).encode(), None,
                                ms_bind | ms_rec, None) == 0
    if not ok:
        raise OSError(ctypes.get_errno(), "could not expose the interpreter and checkout to uid 65534")


def _become_nobody() -> None:
    _expose([Path(sys.base_prefix).resolve(), REPO])
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def _pytest_as_nobody(*tests: str, timeout: float = 300) -> str:
    """Run pytest on ``tests`` as uid 65534; the tail of its output (asserted to pass)."""
    base = tempfile.mkdtemp(prefix="spadework-nobody-")
    os.chown(base, NOBODY, NOBODY)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": base, "OMP_NUM_THREADS": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": base}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
             os.path.join(base, "pt"), *(str(REPO / t) for t in tests)],
            cwd=REPO, env=env, preexec_fn=_become_nobody, capture_output=True, text=True,
            timeout=timeout,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, tail
    assert " passed" in tail, tail  # layer-specific skips are allowed, as for root
    return tail


ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="already unprivileged: the suite is the proof")


@ROOT_ONLY
def test_the_whole_attack_suite_as_nobody():
    tail = _pytest_as_nobody("tests/sandbox/test_attacks.py")
    assert "deselected" not in tail


@ROOT_ONLY
def test_reading_archives_on_read_only_locations_as_nobody():
    tail = _pytest_as_nobody("tests/test_archive_read_only.py", timeout=120)
    assert "skipped" not in tail  # the permission tests ran, not skipped as under root

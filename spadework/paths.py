"""Where spadework keeps its caches, and how a write that finds no room is reported: a module
near the leaves (it imports only ``spadework.errors``) that anything may import.

It reads one environment variable, ``SPADEWORK_HOME``, and nothing else; with ``config.py`` and
the ``spadework.cli`` package it is the only module that reads the process environment.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
from collections.abc import Iterator
from pathlib import Path

from spadework.errors import StorageError

#: The errors that mean "no room": the disk, a quota, a file-size limit (``ulimit -f``).
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def home_dir() -> Path:
    """Where spadework keeps caches (models, corpus): ``$SPADEWORK_HOME``, else ``~/.cache/spadework``."""
    env = os.environ.get("SPADEWORK_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "spadework"


def model_cache_dir() -> Path:
    """Where pulled models live: ``home_dir() / "models"`` (see ``spadework.policy.registry``)."""
    return home_dir() / "models"


#: How libraries that do not raise ``OSError`` (safetensors) word the same errors.
_NO_ROOM_TEXT = ("No space left", "File too large", "Disk quota", "os error 28", "os error 27",
                 "os error 122")
_NEARLY_FULL = 64 << 20


def _folder(path: Path) -> Path:
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p if p.is_dir() else p.parent


def free_space(path: Path) -> str:
    """The space left on the disk that holds ``path`` (its nearest existing folder), in words."""
    try:
        free = shutil.disk_usage(_folder(path)).free
    except OSError:
        return "unknown space left"
    return f"{free / 2**20:,.0f} MiB left on its disk"


def no_room(path: Path, error: BaseException) -> str | None:
    """Why ``error``, raised while writing ``path``, means there is no room (the disk, a quota, a
    file-size limit), or None when it does not. A library that loses the ``OSError`` (torch's
    ``save`` says only "unexpected pos") is judged by a 1 MiB probe written beside ``path``, by
    the space left and by the process's file-size limit (``ulimit -f``)."""
    if isinstance(error, OSError):
        return error.strerror or str(error) if error.errno in NO_ROOM else None
    text = str(error)
    if any(t in text for t in _NO_ROOM_TEXT):
        return text
    folder = _folder(path)
    probe = folder / f".spadework-room-probe-{os.getpid()}"
    try:
        with open(probe, "wb") as f:
            f.write(b"\0" * (1 << 20))
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        if e.errno in NO_ROOM:
            return e.strerror or str(e)
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    try:
        if shutil.disk_usage(folder).free < _NEARLY_FULL:
            return "the disk is nearly full"
    except OSError:
        pass
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        return f"{text or type(error).__name__}, under a file-size limit of {limit:,} bytes"
    return None


@contextlib.contextmanager
def room_to_write(path: Path, what: str) -> Iterator[None]:
    """Turn a write that fails for want of room into a :class:`StorageError` naming ``what``,
    ``path`` and the space left (:func:`no_room`); other errors pass through. The writer inside
    the block writes to a temporary file and renames it, so the previous file is intact when
    this raises."""
    try:
        yield
    except Exception as e:
        why = no_room(path, e)
        if why is None:
            raise
        raise StorageError(f"{what} could not be written to {path}: {why} "
                           f"({free_space(path)}); the previous one is intact. Free some space "
                           "(or raise the file-size limit) and run the same command again to "
                           "resume") from e

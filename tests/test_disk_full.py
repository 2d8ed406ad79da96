"""Writes that find no room: a checkpoint that does not fit leaves the previous one as the latest,
no half-written folder, and a StorageError that names the file and the space left.

The fault is real: a child process with a file-size limit (``ulimit -f``, SIGXFSZ ignored so the
write fails with EFBIG instead of killing it), writing through torch and safetensors, whose
errors do not say "no room" the way an OSError does.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import textwrap

import pytest

from spadework.errors import StorageError
from spadework.paths import room_to_write

CHILD = textwrap.dedent("""
    import json, resource, signal, sys
    from pathlib import Path
    import torch
    from safetensors.torch import save_file
    from spadework.errors import StorageError
    from spadework.train.checkpoint import latest_checkpoint, save_rotating

    class Learner:
        def __init__(self, numbers, how):
            self.numbers, self.how = numbers, how
        def save(self, folder):
            folder.mkdir(parents=True, exist_ok=True)
            t = torch.arange(self.numbers, dtype=torch.float32)
            if self.how == "torch":
                torch.save({"w": t}, folder / "optimizer.pt")
            else:
                save_file({"w": t}, str(folder / "trainable.safetensors"))
            return folder

    root, how = Path(sys.argv[1]), sys.argv[2]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    save_rotating(Learner(1000, how), root, 0, keep=False)
    try:
        save_rotating(Learner(1 << 20, how), root, 1, keep=False)  # 4 MiB: over the limit
        out = {"error": None}
    except StorageError as e:
        out = {"error": str(e)}
    it, folder = latest_checkpoint(root)
    out.update(latest=it, files=sorted(p.name for p in root.iterdir()),
               kept=sorted(p.name for p in folder.iterdir()))
    print(json.dumps(out))
""")


@pytest.mark.parametrize("how", ["torch", "safetensors"])
def test_a_checkpoint_over_the_file_size_limit_keeps_the_previous_one(tmp_path, how):
    root = tmp_path / "checkpoints"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root), how], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] is not None, "the write over the limit did not fail"
    assert f"the checkpoint of iteration 1 could not be written to {root / 'iter_0001'}" in out["error"]
    assert "MiB left on its disk" in out["error"] and "previous one is intact" in out["error"]
    assert out["latest"] == 0  # the pointer still names iteration 0, whose files are whole
    assert not any(name.startswith(".tmp") for name in out["files"]), out["files"]
    assert "iter_0001" not in out["files"] and "run.json" in out["kept"]


def test_only_errors_that_mean_no_room_become_storage_errors(tmp_path):
    room = room_to_write(tmp_path / "m", "metrics.jsonl")
    with pytest.raises(StorageError, match="metrics.jsonl could not be written to .*No space"), room:
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(PermissionError), room_to_write(tmp_path / "m", "metrics.jsonl"):
        raise PermissionError(errno.EACCES, "Permission denied")
    # the probe beside the file finds room, the disk has room, no file-size limit is set
    with pytest.raises(ValueError, match="unrelated"), room_to_write(tmp_path / "m", "metrics"):
        raise ValueError("unrelated")
    assert list(tmp_path.iterdir()) == []  # the probe is gone


ARCHIVE_CHILD = textwrap.dedent("""
    import json, os, resource, signal, sys
    from pathlib import Path
    from spadework.archive import Archive
    path = Path(sys.argv[1])
    a = Archive.open(path)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 4096, resource.RLIM_INFINITY))
    stored = 0
    try:
        for i in range(2000):
            with a.transaction():
                a.save_state(f"k{i}", {"x": "y" * 5000})
            stored += 1
        print(json.dumps({"error": None}))
    except Exception as e:
        print(json.dumps({"error": str(e), "kind": type(e).__name__, "stored": stored}))
""")


def test_an_archive_write_that_finds_no_room_says_so_and_keeps_what_was_stored(tmp_path):
    path = tmp_path / "archive.sqlite"
    proc = subprocess.run([sys.executable, "-c", ARCHIVE_CHILD, str(path)], capture_output=True,
                          text=True, timeout=300, check=False)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["kind"] == "ArchiveError" and f"archive {path}" in out["error"]
    assert "no room to write (File too large" in out["error"] and "MiB left" in out["error"]
    from spadework.archive import Archive

    with Archive.open(path, create=False) as a:  # every committed transaction is there
        assert [a.load_state(f"k{i}") is not None for i in range(out["stored"] + 1)] == \
            [True] * out["stored"] + [False]

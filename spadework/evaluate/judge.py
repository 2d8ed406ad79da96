"""The host side of the judge worker: requests with deadlines, kill and restart on a timeout.

``with Judge() as judge:`` starts nothing yet; the first request starts the worker
(:mod:`spadework.evaluate.worker`, about 4 s of imports), which confines itself and reports its
layers. A request that passes its deadline kills the worker (SIGKILL by pid) and raises
:class:`JudgeTimeout`; the next request starts a fresh worker. A request the worker answers with
an error raises :class:`JudgeError` carrying the worker's message. The worker's stderr (library
warnings, prints) goes to a temporary log file, never to the terminal.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from typing import Any

from spadework.errors import SandboxUnavailable, SpadeworkError
from spadework.sandbox.limits import DEFAULT_REQUIRED

#: The worker's PYTHONHASHSEED (recorded in every summary): items must not depend on the process.
HASH_SEED = "0"
#: Seconds the worker may take to import its libraries and confine itself.
START_SECONDS = 120.0


class EvalError(SpadeworkError):
    """An evaluation could not be done as asked (bad suite, missing data, unreadable samples)."""


class JudgeError(EvalError):
    """The judge worker answered a request with an error (a benchmark's own failure)."""


class JudgeTimeout(JudgeError):
    """A judge request passed its deadline; the worker was killed."""


class Judge:
    """A judge worker and its requests; see the module docstring. Not thread-safe.

    ``allow_degraded``: go on when a required confinement layer (rlimits, no_new_privs,
    seccomp, as the sandbox requires) does not hold; the report in :attr:`layers` says which.
    """

    def __init__(self, *, allow_degraded: bool = False) -> None:
        self.allow_degraded = allow_degraded
        self.layers: list[list] = []
        self.restarts = 0
        self._proc: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile(prefix="spadework-judge-")

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._kill()
        self._log.close()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                if f is not None:
                    f.close()

    def _start(self) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
        # A fixed hash seed: some generators (polynomial_multiplication) iterate over sets, so
        # their items depend on it; a restarted worker must regenerate the very same item.
        env.update(PYTHONHASHSEED=HASH_SEED, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore", PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "spadework.evaluate.worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=tempfile.gettempdir(),
        )
        self._proc = proc
        hello = self._read(time.monotonic() + START_SECONDS, "starting the judge worker")
        self.layers = hello.get("hello", [])
        missing = [n for n, active, _ in self.layers if n in DEFAULT_REQUIRED and not active]
        if missing and not self.allow_degraded:
            self._kill()
            reasons = "; ".join(f"{n}: {r}" for n, a, r in self.layers if n in missing)
            raise SandboxUnavailable(f"the judge worker cannot confine itself ({reasons}); "
                                     "pass allow_degraded=True to score answers anyway")
        return proc

    def _read(self, deadline: float, what: str) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self._kill()
                self.restarts += 1
                raise JudgeTimeout(f"{what} passed its deadline; the judge worker was killed")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self._kill()
                self.restarts += 1
                raise JudgeError(f"the judge worker died while {what}: {self.log_tail()}")
            buf += chunk
        return json.loads(buf)

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; the reply's fields, or JudgeTimeout / JudgeError."""
        proc = self._proc if self._proc is not None and self._proc.poll() is None else None
        if proc is None:
            self._kill()
            proc = self._start()
        assert proc.stdin is not None
        try:
            proc.stdin.write((json.dumps(req) + "\n").encode())
            proc.stdin.flush()
        except OSError as e:
            self._kill()
            raise JudgeError(f"the judge worker is gone ({e}): {self.log_tail()}") from e
        reply = self._read(time.monotonic() + timeout, f"answering {req.get('op')}")
        if not reply.get("ok"):
            raise JudgeError(str(reply.get("error", "unknown error")))
        return reply

    def log_tail(self, chars: int = 600) -> str:
        """The end of the worker's stderr log (what explains a crash)."""
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(size - chars, 0))
        return self._log.read().decode("utf-8", "replace").strip() or "(no output)"

    # -- the operations ----------------------------------------------------------------------

    def rg_item(self, task: str, kwargs: dict, index: int, timeout: float) -> tuple[str, str | None]:
        """(question, gold answer or None) of one reasoning-gym item."""
        r = self.request({"op": "rg_item", "task": task, "kwargs": kwargs, "index": index}, timeout)
        return r["question"], r["answer"]

    def rg_score(self, task: str, kwargs: dict, index: int, answer: str | None,
                 timeout: float) -> float:
        """The task's own ``score_answer`` of ``answer`` for that item."""
        req = {"op": "rg_score", "task": task, "kwargs": kwargs, "index": index, "answer": answer}
        return float(self.request(req, timeout)["reward"])

    def math_verify(self, gold: str, pred: str, timeout: float) -> bool:
        """Whether ``pred`` equals ``gold`` by math-verify (both parsed as boxed answers)."""
        return bool(self.request({"op": "math_verify", "gold": gold, "pred": pred}, timeout)["correct"])

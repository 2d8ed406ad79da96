"""One environment instance living in one hardened child: the host side of its pipe pair.

Every call holds the handle's own lock, so a handle is safe to share between threads; calls on
different handles run in parallel (the I/O waits in ``poll``, which releases the GIL). Deadlines
are enforced here: a call that does not answer in time gets its child SIGKILLed by pid and raises
:class:`~spadework.errors.EnvTimeout`. Each call's deadline is the earliest of the per-call limit
(``Limits.step_seconds``), what is left of the episode's (``Limits.episode_seconds``) and the
caller's own ``deadline=`` (a ``time.monotonic()`` instant: the checker passes its whole-check
budget down this way, so a slow call is cut when the budget ends, not after it); after that, or after a crash, the handle is dead and every
call raises :class:`~spadework.errors.EnvCrashed` saying so. For asyncio, ``areset``, ``astep``,
``asolution``, ``ahint`` and ``atools`` run the blocking call in a worker thread
(``asyncio.to_thread``), so an event loop can drive many handles at once.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import threading
import time
from typing import Any, Protocol

from spadework.errors import EnvCrashed, EnvError, EnvLoadError, EnvRaised, EnvTimeout
from spadework.sandbox import child as wire
from spadework.sandbox.limits import Limits


class ChildOwner(Protocol):
    """What a handle needs from the sandbox that forked its child
    (:class:`spadework.sandbox.base.Sandbox`)."""

    limits: Limits

    def release_child(self, pid: int) -> None:
        """SIGKILL the child without waiting for its teardown."""

    def reap_child(self, pid: int) -> int | None:
        """SIGKILL and wait for the child; its wait status, or None if unknown."""

    def forget_handle(self, handle: EnvHandle) -> None:
        """The handle is closed: stop tracking it and delete its scratch directory."""

    def zygote_alive(self) -> bool:
        """Whether the fork server still runs (while it does, a child's pid is not reused)."""

STDERR_TAIL_BYTES = 4096


def _strings(payload: object, n: int) -> bool:
    return isinstance(payload, list) and len(payload) == n and all(isinstance(x, str) for x in payload)


class _Deadline(Exception):
    """The current call ran out of time."""


def describe_status(status: int) -> str:
    """A wait status in words.

    >>> describe_status(9)
    'killed by signal SIGKILL'
    >>> describe_status(3 << 8)
    'exited with code 3'
    """
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"killed by signal {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exited with code {os.WEXITSTATUS(status)}"


class EnvHandle:
    """The live environment instance of one child (see :meth:`Sandbox.load`)."""

    def __init__(self, sandbox: ChildOwner, pid: int, req_fd: int, resp_fd: int, log_fd: int,
                 scratch: str) -> None:
        self._sandbox = sandbox
        self.pid = pid
        self._req, self._resp, self._log = req_fd, resp_fd, log_fd
        self.scratch = scratch
        self._limits = sandbox.limits
        self._lock = threading.Lock()
        self._dead: str | None = None
        self._closed = False
        # Seconds the environment may still spend inside calls this episode. Time the host spends
        # elsewhere (a slow policy choosing the next action) is not the environment's to pay for.
        self._episode_left = self._limits.episode_seconds
        os.set_blocking(req_fd, False)
        os.set_blocking(resp_fd, False)

    # ------------------------------------------------------------------ the contract's methods

    def reset(self, seed: int | None = None, *, deadline: float | None = None) -> Any:
        """``env.reset(seed=seed)`` as the env returned it; refills the episode budget."""
        with self._lock:
            self._episode_left = self._limits.episode_seconds
            return self._call("reset", seed, until=deadline)

    def step(self, action: str, *, deadline: float | None = None) -> Any:
        """``env.step(action)`` as the env returned it (no coercion of flags or reward)."""
        with self._lock:
            return self._call("step", action, until=deadline)

    def solution(self, *, deadline: float | None = None) -> Any:
        with self._lock:
            return self._call("solution", None, until=deadline)

    def hint(self, *, deadline: float | None = None) -> Any:
        """``env.hint()``, or None when the environment defines no ``hint``."""
        with self._lock:
            return self._call("hint", None, until=deadline)

    def levels(self, *, deadline: float | None = None) -> Any:
        """The class's ``LEVELS`` attribute as it holds it (1 when it declares none); the host
        judges its type (:func:`spadework.env.probe.levels_of`)."""
        with self._lock:
            return self._call("levels", None, until=deadline)

    def tools(self, *, deadline: float | None = None) -> Any:
        """``env.tools()`` (tool-use environments), or ``[]`` when it defines none."""
        with self._lock:
            return self._call("tools", None, until=deadline)

    async def areset(self, seed: int | None = None) -> Any:
        return await asyncio.to_thread(self.reset, seed)

    async def astep(self, action: str) -> Any:
        return await asyncio.to_thread(self.step, action)

    async def asolution(self) -> Any:
        return await asyncio.to_thread(self.solution)

    async def ahint(self) -> Any:
        return await asyncio.to_thread(self.hint)

    async def atools(self) -> Any:
        return await asyncio.to_thread(self.tools)

    @property
    def alive(self) -> bool:
        return self._dead is None and not self._closed

    def close(self) -> None:
        """Kill and reap the child, free its pipes, log and scratch dir. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._dead is None:
                self._dead = "closed"
                self._sandbox.release_child(self.pid)
            for fd in (self._req, self._resp, self._log):
                os.close(fd)
            self._sandbox.forget_handle(self)

    def __enter__(self) -> EnvHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load_module(self, spec: object, seconds: float, *, deadline: float | None = None) -> None:
        """Send the module to the waiting child and instantiate its environment within
        ``seconds`` and before ``deadline`` (called once by the sandbox that forked it); raises
        EnvLoadError or EnvTimeout."""
        self._call("load", spec, seconds=seconds, until=deadline)

    # ------------------------------------------------------------------ the wire

    def _call(self, op: str, arg: object, seconds: float | None = None,
              until: float | None = None) -> Any:
        if self._dead is not None:
            raise EnvCrashed(f"{op}(): this environment handle is dead ({self._dead})")
        budget = self._limits.step_seconds if seconds is None else seconds
        episode = op != "load" and self._episode_left <= budget
        what = "episode" if episode else f"{budget:g}s call"
        started = time.monotonic()
        deadline = started + (self._episode_left if episode else budget)
        if until is not None and until < deadline:
            deadline, what = until, "caller's"
        try:
            request = wire.frame(wire.encode([op, arg]), self._limits.max_message_bytes)
        except (wire.Unsendable, wire.ProtocolError) as e:
            kind = EnvLoadError if op == "load" else EnvError  # e.g. a module over the size cap
            raise kind(f"{op}(): the request cannot be sent: {e}") from e
        try:
            self._write(request, deadline)
            reply = self._read(deadline)
        except _Deadline as e:
            self._episode_left = 0.0
            self._kill(f"{op}() passed its {what} deadline")
            raise EnvTimeout(f"{op}() passed its {what} deadline; the child was killed") from e
        except (wire.ProtocolError, ValueError, TypeError, OSError) as e:
            raise self._crashed(f"{op}(): {e}") from e
        finally:
            if op != "load":
                self._episode_left -= time.monotonic() - started
        if not (isinstance(reply, list) and len(reply) == 2):
            raise self._crashed(f"{op}(): malformed reply (not a [status, payload] pair)")
        status, payload = reply
        if status == wire.OK:
            return payload
        # Anything else must have the shape the child's own code sends; env code can write
        # forged frames onto the reply pipe, and a malformed one is a protocol violation.
        if status == wire.RAISED and _strings(payload, 3):
            exc_type, message, tb = payload
            raise EnvRaised(f"{op}() raised {exc_type}: {message}", exc_type, tb)
        if status == wire.UNSENDABLE and _strings(payload, 2):
            type_name, detail = payload
            raise EnvRaised(detail, f"unsendable {type_name}", "")
        if status == wire.LOAD_FAILED and op == "load" and _strings(payload, 2):
            exc_type, tb = payload
            self._kill("load failed")
            tail = "\n".join(tb.strip().splitlines()[-6:])
            raise EnvLoadError(f"loading the environment raised {exc_type}:\n{tail}")
        raise self._crashed(f"{op}(): malformed reply (status {str(status)[:20]!r})")

    def handshake(self, deadline: float) -> list:
        """Wait for the child's first message: the isolation layers it applied to itself
        (called once by the sandbox that forked it)."""
        try:
            status, layers = self._read(deadline)  # type: ignore[misc]
        except _Deadline as e:
            self._kill("hardening timed out")
            raise EnvTimeout("the child did not finish hardening within Limits.load_seconds") from e
        except (wire.ProtocolError, ValueError, TypeError, OSError) as e:
            raise self._crashed(f"hardening the child failed: {e}") from e
        if status != wire.OK:
            raise self._crashed(f"hardening: unexpected reply status {status!r}")
        return layers

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        poller = select.poll()
        poller.register(self._req, select.POLLOUT)
        while view:
            self._wait(poller, deadline)
            try:
                view = view[os.write(self._req, view):]
            except BlockingIOError:
                continue
            except BrokenPipeError as e:
                raise wire.ProtocolError("the child closed its request pipe") from e

    def _read_exact(self, n: int, deadline: float, poller: select.poll) -> bytes:
        chunks = []
        while n:
            self._wait(poller, deadline)
            try:
                chunk = os.read(self._resp, min(n, 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise wire.ProtocolError("the child closed its reply pipe")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _read(self, deadline: float) -> object:
        poller = select.poll()
        poller.register(self._resp, select.POLLIN)
        (size,) = wire.HEADER.unpack(self._read_exact(wire.HEADER.size, deadline, poller))
        if size > self._limits.max_message_bytes:
            raise wire.ProtocolError(
                f"reply of {size} bytes exceeds Limits.max_message_bytes={self._limits.max_message_bytes}"
            )
        return wire.decode(self._read_exact(size, deadline, poller))

    @staticmethod
    def _wait(poller: select.poll, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Deadline()
        poller.poll(max(1, int(remaining * 1000) + 1))

    # ------------------------------------------------------------------ death

    def _kill(self, why: str) -> int | None:
        """SIGKILL the child by pid, reap it through the zygote; returns its wait status."""
        if self._dead is not None:
            return None
        self._dead = why
        if self._sandbox.zygote_alive():  # while the zygote holds it unreaped, the pid is ours
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return self._sandbox.reap_child(self.pid)

    def stderr_tail(self, lines: int = 20) -> str:
        """The last lines the child wrote to stderr (tracebacks of its own death, mostly)."""
        size = os.fstat(self._log).st_size
        data = os.pread(self._log, STDERR_TAIL_BYTES, max(0, size - STDERR_TAIL_BYTES))
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])

    def _crashed(self, what: str) -> EnvError:
        status = self._kill(f"crashed: {what}")
        tail = self.stderr_tail()
        how = describe_status(status) if status is not None else "state unknown"
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
            return EnvTimeout(f"{what}: the child used up Limits.cpu_seconds ({how})")
        reason = f"{what}; child {how}"
        if tail:
            reason += f"; stderr ends: {tail.splitlines()[-1][:300]}"
        return EnvCrashed(reason, tail)

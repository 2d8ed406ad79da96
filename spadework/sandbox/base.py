"""The host side of the sandbox: start the zygote, fork hardened children, supervise them.

See the package docstring for the threat model. Descriptor passing: the host creates each
child's two pipes and its stderr log file, and hands the child's ends to the zygote with
SCM_RIGHTS over a SOCK_SEQPACKET socketpair; the zygote forks, the child moves them to fds
2, 3 and 4 and closes everything else; the host closes its copies of the child's ends at once.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import OrderedDict, deque
from pathlib import Path

import msgpack

from spadework.env import pyparse
from spadework.env.contract import find_env_class
from spadework.errors import (
    ConfigError,
    ContractError,
    EnvCrashed,
    EnvError,
    EnvLoadError,
    SandboxUnavailable,
)
from spadework.sandbox.handle import EnvHandle
from spadework.sandbox.kits import TOOLENV, gameenv_files, site_dirs, toolenv_files
from spadework.sandbox.limits import Isolation, Limits

_HERE = Path(__file__).resolve().parent
_PROBE = "class Probe:\n    def __init__(self, max_turns=10): pass\n" \
         "    def reset(self, seed=None): return '', {}\n    def step(self, a): return '', 0.0, True, False, {}\n"
_ZYGOTE_START_SECONDS = 30.0
_CODE_CACHE = 256


class Sandbox:
    """Runs untrusted environment code in hardened children of one fork server.

    ``with Sandbox(Limits()) as sb:`` starts the zygote and probes which isolation layers hold
    (``sb.isolation``); a required layer that does not hold raises SandboxUnavailable naming it
    and the opt-out, ``Limits(allow_degraded=True)``. ``sb.load(code)`` returns an
    :class:`EnvHandle`; the sandbox is thread-safe and its handles may be used from many threads.
    """

    def __init__(self, limits: Limits | None = None, *, toolenv_path: str | Path | None = None,
                 prefork: int = 2) -> None:
        if isinstance(prefork, bool) or not isinstance(prefork, int) or prefork < 0:
            raise ConfigError(f"Sandbox(prefork=...) must be an int >= 0, got {prefork!r}")
        self.limits = limits or Limits()
        # Children forked ahead of time, hardening themselves and then waiting for a module:
        # forking and hardening (~5 ms) happen off the load path, several in parallel.
        self.prefork = prefork
        self._spares: deque[EnvHandle] = deque()
        self._trash: list[str] = []
        self._wake = threading.Condition(threading.Lock())
        self._filler: threading.Thread | None = None
        self._stopping = False
        self._kits = {"toolenv": toolenv_files(Path(toolenv_path) if toolenv_path is not None else TOOLENV),
                      "gameenv": gameenv_files()}
        self._zlock = threading.Lock()
        self._hlock = threading.Lock()
        self._handles: set[EnvHandle] = set()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._dir: str | None = None
        self._zlog = None
        #: Zygotes started in place of one that died (killed from outside, out of memory).
        self.revived = 0
        self._code_cache: OrderedDict[str, tuple[bytes, str | ContractError]] = OrderedDict()
        self.isolation: Isolation | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the zygote and probe the isolation layers; idempotent."""
        if self._proc is not None:
            return
        if not sys.platform.startswith("linux"):
            raise SandboxUnavailable(
                f"the sandbox needs Linux (fork server, seccomp, Landlock), not {sys.platform}; "
                "run spadework in a Linux container or VM"
            )
        self._dir = tempfile.mkdtemp(prefix="spadework-sandbox-")
        os.chmod(self._dir, 0o711)  # an unprivileged child must reach its own scratch dir
        # A sandbox dropped without close() still leaves no tree behind (the zygote exits on
        # EOF once the socket is collected; its children die with it).
        weakref.finalize(self, shutil.rmtree, self._dir, True)
        try:
            try:
                hello = self._start_zygote()
            except SandboxUnavailable:
                killed = self._proc is not None and (self._proc.poll() or 0) < 0
                if not killed:  # it failed on its own: its reason stands
                    raise
                self._drop_zygote()  # killed by a signal while it started: once more
                hello = self._start_zygote()
            handle = self._fork_child()
            try:
                layers = handle.handshake(time.monotonic() + self.limits.load_seconds)
            finally:
                handle.close()
            self.isolation = Isolation.from_report(layers, runtime=hello["runtime"])
        except BaseException:
            self.close()
            raise
        self._require(self.isolation)
        self._stopping = False
        self._filler = threading.Thread(target=self._fill, name="spadework-prefork", daemon=True)
        self._filler.start()

    def _fill(self) -> None:
        """Background thread: keep ``prefork`` spare children forked and delete used scratch dirs.

        Spares harden themselves in parallel while they wait; ``load`` reads a spare's handshake
        (usually already there) exactly as it would a fresh child's, so a layer that failed to
        hold is reported the same way. A failure here only stops the pre-forking: ``load`` then
        forks on its own path, where the same failure is raised to the caller with its reason.
        """
        while True:
            with self._wake:
                while not self._stopping and not self._trash and len(self._spares) >= self.prefork:
                    self._wake.wait()
                if self._stopping:
                    return
                trash, self._trash = self._trash, []
                want = len(self._spares) < self.prefork
            for path in trash:
                shutil.rmtree(path, ignore_errors=True)
            if not want:
                continue
            try:
                handle = self._fork_child()
            except (EnvError, SandboxUnavailable):
                return
            with self._wake:
                keep = not self._stopping
                if keep:
                    self._spares.append(handle)
            if not keep:
                handle.close()  # outside the lock: close() reaches _forget, which takes it
                return

    def _hardened_child(self, deadline: float, fresh: bool = False) -> tuple[EnvHandle, list]:
        """A spare if one is waiting (and tell the filler to replace it) unless ``fresh``, else a
        fresh fork; with the isolation layers its handshake reports."""
        proc = self._proc
        if proc is not None and proc.poll() is not None:  # the zygote died: its spares too
            self._revive(self.revived)
        with self._wake:
            handle = self._spares.popleft() if self._spares and not fresh else None
            self._wake.notify()
        if handle is not None:
            try:
                return handle, handle.handshake(deadline)
            except EnvCrashed:  # the spare died while it waited (killed from outside): it ran
                handle.close()  # no environment code, so this is no fault of the module
        handle = self._fork_child()
        try:
            return handle, handle.handshake(deadline)
        except BaseException:
            handle.close()
            raise

    def _start_zygote(self) -> dict:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cfg = {
            "here": str(_HERE),
            "site_dirs": site_dirs(("msgpack", "pyseccomp", "numpy")
                                    + (("math_verify",) if self.limits.math_verify else ())),
            "numpy": self.limits.numpy,
            "math_verify": self.limits.math_verify,
            "kits": self._kits,
            "namespaces": self.limits.namespaces,
        }
        # PYTHONHASHSEED fixes str hashing (set order) across runs: reset(seed) must reproduce.
        env = {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"}
        self._zlog = tempfile.TemporaryFile(dir=self._dir)
        argv = [sys.executable, "-s", "-S", "-B", "-P", str(_HERE / "zygote.py"),
                str(theirs.fileno()), json.dumps(cfg)]
        try:
            self._proc = subprocess.Popen(
                argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self._zlog, env=env, cwd=self._dir,
                start_new_session=True,  # Ctrl-C in a terminal reaches the host, not the zygote
            )
        finally:
            theirs.close()
        self._sock = ours
        ours.settimeout(_ZYGOTE_START_SECONDS)
        try:
            data = ours.recv(1 << 16)
        except OSError as e:
            raise SandboxUnavailable(f"the zygote did not start: {e}; {self._zygote_tail()}") from e
        finally:
            ours.settimeout(None)
        if not data:
            raise SandboxUnavailable(f"the zygote exited at start: {self._zygote_tail()}")
        return msgpack.unpackb(data, raw=False)

    def _drop_zygote(self) -> None:
        """Close what a zygote that failed to start left: its socket, process and log."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
        if self._zlog is not None:
            self._zlog.close()
            self._zlog = None

    def _zygote_tail(self) -> str:
        if self._zlog is None:
            return ""
        self._zlog.seek(0)
        return "stderr: " + self._zlog.read()[-2000:].decode("utf-8", "replace")

    def close(self) -> None:
        """Kill every child, stop the zygote, remove the scratch tree. Idempotent."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if self._filler is not None and self._filler is not threading.current_thread():
            self._filler.join()
            self._filler = None
        with self._wake:
            spares, self._trash = list(self._spares), []
            self._spares.clear()
        for handle in spares:
            handle.close()
        with self._hlock:
            handles = list(self._handles)
        for handle in handles:
            handle.close()
        if self._sock is not None:
            try:
                with self._zlock:
                    self._sock.sendall(msgpack.packb({"op": "exit"}))
            except OSError:
                pass
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._zlog is not None:
            self._zlog.close()
            self._zlog = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _require(self, isolation: Isolation) -> None:
        missing = isolation.missing(self.limits.required_layers)
        if missing and not self.limits.allow_degraded:
            self.close()
            why = "; ".join(f"{layer.name}: {layer.reason}" for layer in isolation.layers
                            if layer.name in missing)
            raise SandboxUnavailable(
                f"required isolation layer(s) {', '.join(missing)} not active ({why}). Remove them "
                "from Limits.required_layers or set Limits(allow_degraded=True) to run anyway."
            )

    # ------------------------------------------------------------------ environments

    def load(self, code: str, max_turns: int = 10, *, class_name: str | None = None,
             kwargs: dict | None = None, deadline: float | None = None,
             level: int | None = None) -> EnvHandle:
        """Fork a hardened child, import ``code`` in it and instantiate its environment class.

        The class is found on the host by :func:`find_env_class` (AST only; ContractError when
        there is none) unless ``class_name`` is given. ``level``: the difficulty level to build
        (passed as the ``level`` keyword; None passes none, so the class's default, level 1,
        and a class without levels is built exactly as before). Raises EnvLoadError when import or
        ``cls(max_turns=max_turns, **kwargs)`` fails, EnvTimeout past ``Limits.load_seconds`` or
        past ``deadline`` (a ``time.monotonic()`` instant, when the caller has an earlier one),
        EnvCrashed when the child dies, SandboxUnavailable when a required layer did not hold.
        """
        blob, found = self._prepared(code)
        if class_name is None and isinstance(found, ContractError):
            raise ContractError(found.reason)  # a fresh exception each time, not the cached one
        name = class_name or found
        own = time.monotonic() + self.limits.load_seconds
        extra = dict(kwargs or {})
        if level is not None:
            extra["level"] = level
        spec = {"code": blob, "class_name": name, "max_turns": max_turns, "kwargs": extra}
        handle, layers = self._hardened_child(min(own, deadline) if deadline is not None else own)
        if not _alive(handle.pid):  # a spare killed from outside while it waited: the module
            handle.close()          # never reached it, so this is no fault of the module
            handle, layers = self._hardened_child(
                min(own, deadline) if deadline is not None else own, fresh=True)
        try:
            iso = Isolation.from_report(layers)
            missing = iso.missing(self.limits.required_layers)
            if missing and not self.limits.allow_degraded:
                raise SandboxUnavailable(
                    f"required isolation layer(s) {', '.join(missing)} did not hold in a child "
                    "(see sb.isolation); set Limits(allow_degraded=True) to run anyway"
                )
            handle.load_module(spec, seconds=max(0.001, own - time.monotonic()), deadline=deadline)
        except BaseException:
            handle.close()
            raise
        return handle

    def _fork_child(self) -> EnvHandle:
        if self._sock is None:
            raise EnvError("the sandbox is not started (use `with Sandbox(...) as sb:`)")
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        scratch = tempfile.mkdtemp(dir=self._dir, prefix="env-")
        log = tempfile.TemporaryFile(dir=self._dir)
        log_fd = os.dup(log.fileno())
        log.close()
        try:
            if os.geteuid() == 0:
                os.chown(scratch, self.limits.uid, self.limits.gid)
            plan = {"scratch": scratch, "uid": self.limits.uid, "gid": self.limits.gid,
                    "limits": self.limits.rlimits(), "cap": self.limits.max_message_bytes}
            msg, generation = {"op": "spawn", "plan": plan}, self.revived
            try:
                reply = self._request(msg, [log_fd, req_r, resp_w])
            except EnvCrashed:
                if not self._revive(generation):
                    raise
                reply = self._request(msg, [log_fd, req_r, resp_w])  # our ends are still open
        except BaseException:
            for fd in (req_w, resp_r, log_fd):
                os.close(fd)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        finally:
            for fd in (req_r, resp_w):
                os.close(fd)
        handle = EnvHandle(self, reply["pid"], req_w, resp_r, log_fd, scratch)
        with self._hlock:
            self._handles.add(handle)
        return handle

    def _revive(self, generation: int) -> bool:
        """Start a new zygote in place of one that died (SIGKILLed from outside, killed for
        memory): the environments the old one held died with it (their episodes fail as
        crashed), its spares are dropped, and loads work again. True when a new one runs; False
        while the sandbox stops, or when the zygote is alive (the failure was something else).
        ``generation``: :attr:`revived` when the caller's request was sent (another thread may
        have started the new zygote since: True)."""
        with self._zlock:
            if self.revived != generation:
                return True
            if self._stopping or self._proc is None or self._proc.poll() is None:
                return False
            if self._sock is not None:
                self._sock.close()
            if self._zlog is not None:
                self._zlog.close()
            self._start_zygote()
            self.revived += 1
        with self._wake:
            dead, self._spares = list(self._spares), deque()
            self._wake.notify_all()
        for handle in dead:  # their release goes to the new zygote, which knows no such pid
            handle.close()
        return True

    # ------------------------------------------------------------------ the zygote connection

    def _request(self, msg: dict, fds: list[int] = (), reply: bool = True) -> dict:  # type: ignore[assignment]
        with self._zlock:
            if self._sock is None:
                raise EnvCrashed("the sandbox is closed")
            try:
                socket.send_fds(self._sock, [msgpack.packb(msg)], list(fds))
                if not reply:
                    return {}
                data = self._sock.recv(1 << 16)
            except OSError as e:
                raise EnvCrashed(f"the zygote connection failed: {e}", self._zygote_tail()) from e
        if not data:
            raise EnvCrashed("the zygote died", self._zygote_tail())
        reply = msgpack.unpackb(data, raw=False)
        if "error" in reply:
            raise EnvCrashed(f"the zygote refused a request: {reply['error']}")
        return reply

    @property
    def zygote_pid(self) -> int | None:
        """The fork server's pid while the sandbox runs (its children are the environments)."""
        return self._proc.pid if self._proc is not None else None

    def zygote_alive(self) -> bool:
        """Whether the fork server runs and its socket is open."""
        return self._proc is not None and self._proc.poll() is None and self._sock is not None

    def _prepared(self, code: str) -> tuple[bytes, str | ContractError]:
        """(marshalled code object, class name or the ContractError), once per code string.

        The play loop loads the same environment many times; parsing and compiling it once per
        sandbox saves ~2 ms per load. Compiling runs nothing; the child unmarshals what the
        trusted host produced. ``dont_inherit`` keeps this module's ``from __future__`` flags
        out of the environment's code.
        """
        with self._hlock:
            entry = self._code_cache.get(code)
            if entry is not None:
                self._code_cache.move_to_end(code)
                return entry
        try:
            name: str | ContractError = find_env_class(code)
        except ContractError as e:
            name = e
        try:
            blob = marshal.dumps(pyparse.compile_code(code, "<env>"))
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
            raise EnvLoadError(f"the module does not compile: {type(e).__name__}: {e}") from e
        with self._hlock:
            self._code_cache[code] = (blob, name)
            while len(self._code_cache) > _CODE_CACHE:
                self._code_cache.popitem(last=False)
        return blob, name

    def release_child(self, pid: int) -> None:
        """SIGKILL ``pid`` through the zygote without waiting for its teardown (no reply)."""
        try:
            self._request({"op": "release", "pid": pid}, reply=False)
        except EnvCrashed:
            pass

    def reap_child(self, pid: int) -> int | None:
        """SIGKILL and waitpid ``pid`` in the zygote; its wait status, or None if unknown."""
        try:
            return self._request({"op": "reap", "pid": pid}).get("status")
        except EnvCrashed:
            return None

    def forget_handle(self, handle: EnvHandle) -> None:
        """Stop tracking a closed handle; its scratch directory is deleted off the hot path."""
        with self._hlock:
            self._handles.discard(handle)
        with self._wake:
            if self._filler is not None and not self._stopping:
                self._trash.append(handle.scratch)  # deleted off the hot path (~1.5 ms each)
                self._wake.notify()
                return
        shutil.rmtree(handle.scratch, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (not gone, not a zombie awaiting its reaper): read from
    /proc, about 20 µs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def probe(limits: Limits | None = None) -> Isolation:
    """Start a sandbox just long enough to report which isolation layers hold here.

    Required layers are not enforced (``allow_degraded``), so the report is always complete;
    compare it with ``limits.required_layers`` via :meth:`Isolation.missing`.
    """
    limits = limits or Limits()
    relaxed = Limits(**{**{f: getattr(limits, f) for f in limits.__dataclass_fields__},
                        "allow_degraded": True})
    with Sandbox(relaxed) as sb:
        return sb.isolation  # type: ignore[return-value] - set by start()

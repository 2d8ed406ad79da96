"""The fork server: started once per Sandbox, forks one hardened child per environment instance.

Run as a script by file path (``python -s -S -B -P zygote.py SOCK_FD CONFIG_JSON``), never as a
spadework import: the interpreter has no site-packages on ``sys.path`` and no ``.pth`` processing,
so ``import spadework`` fails in every child. The zygote briefly puts the named site directories
on ``sys.path`` to import msgpack, pyseccomp and numpy, then removes them again: numpy's lazy
submodules still load through ``numpy.__path__``, but no other third-party package is reachable.

It pre-imports the allowed runtime (so a fork costs milliseconds, not an interpreter start),
registers the tool-use and games kits (``spadework/env/toolenv/``, ``spadework/env/gameenv/``)
as the packages ``toolenv`` and ``gameenv``, and enters fresh network, IPC and UTS namespaces
(inside a user namespace when not root) that every child inherits.

Host protocol: one SOCK_SEQPACKET message per request and per reply, msgpack maps.
``{"op": "spawn", "plan": {...}}`` with three descriptors attached (SCM_RIGHTS: the child's log
file, request pipe read end, reply pipe write end) -> ``{"pid": N}``. The host created the pipes,
so it already holds the other ends. ``{"op": "reap", "pid": N}`` -> SIGKILL (harmless when the
child already exited) and waitpid -> ``{"status": wait_status}``; ``{"op": "release",
"pid": N}`` -> SIGKILL and no reply at all; the zombie is reaped by a sweep within ~50 ms. The
zygote is the children's parent and reaps a pid only when asked, so a pid the host still holds
can never be reused by an unrelated process. EOF or ``{"op": "exit"}`` kills and reaps every child, then exits.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import importlib.util
import json
import os
import signal
import socket
import sys
import traceback

#: Standard-library modules imported before the first fork: the static checker's allowlist and
#: what the child's own code needs, so that no child pays for their import.
PRELOAD = (
    "random", "re", "math", "json", "itertools", "collections", "functools", "string", "heapq",
    "statistics", "fractions", "decimal", "dataclasses", "typing", "copy", "operator", "bisect",
    "enum", "textwrap", "abc", "array", "cmath", "datetime", "hashlib", "unicodedata", "numbers",
    "struct", "types", "ctypes", "threading",
)

_CLONE_NEWUTS, _CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWNET = 0x04000000, 0x08000000, 0x10000000, 0x40000000


def _load_file(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _register_kit(name: str, files: list[list[str]] | None) -> str:
    """Make ``from NAME import ...`` work in children for one of spadework's kits (``toolenv``,
    ``gameenv``): register the package ``name`` and run its modules' source (``files``: [module
    name, path], submodules first) into it, so their relative imports resolve; returns a note
    for the report."""
    if not files:
        return f"{name}: no package"
    package = type(sys)(name)
    package.__path__, package.__package__, package.__file__ = [], name, f"{name}/__init__.py"
    sys.modules[name] = package
    loaded = [name]
    try:
        for module_name, path in files:
            module = package if module_name == name else type(sys)(module_name)
            if module is not package:
                module.__package__, module.__file__ = name, module_name.replace(".", "/") + ".py"
                sys.modules[module_name] = module  # before exec: dataclasses look the module up there
                loaded.append(module_name)
                setattr(package, module_name.rpartition(".")[2], module)
            with open(path, encoding="utf-8") as f:
                exec(compile(f.read(), module.__file__, "exec"), module.__dict__)  # noqa: S102 - ours
    except Exception as e:  # noqa: BLE001 - reported; environments using the kit then fail to import
        for module_name in loaded:
            sys.modules.pop(module_name, None)
        traceback.print_exc()
        return f"{name}: failed to load ({type(e).__name__}: {e})"
    return f"{name}: registered"


def _preload(cfg: dict) -> tuple[list[str], str]:
    """Import the runtime; returns the read-only paths children need and a note on numpy."""
    sys.path[:0] = cfg["site_dirs"]
    try:
        import msgpack  # noqa: F401 - the child's codec
        try:
            import pyseccomp  # noqa: F401 - loaded now so the child needs no file access for it
        except (ImportError, RuntimeError, OSError):
            pass
        note = "numpy disabled by Limits.numpy"
        paths = [os.path.dirname(os.__file__)]
        if cfg.get("math_verify"):
            note_mv = _preload_math_verify(paths)
        if cfg["numpy"]:
            try:
                import numpy
                import numpy.linalg  # noqa: F401
                import numpy.random  # noqa: F401

                base = os.path.dirname(numpy.__file__)
                paths += [base, base + ".libs", os.path.join(os.path.dirname(base), "numpy.libs")]
                note = f"numpy {numpy.__version__}"
            except ImportError as e:
                note = f"numpy not importable: {e}"
    finally:
        del sys.path[: len(cfg["site_dirs"])]
    for name in PRELOAD:
        importlib.import_module(name)
    for name in [m for m in sys.modules if m == "spadework" or m.startswith("spadework.")]:
        del sys.modules[name]
    if cfg.get("math_verify"):
        note = f"{note}; {note_mv}"
    return paths, note


#: math_verify and the packages it imports: read-only for children (their lazy submodules load
#: through each package's ``__path__``, as numpy's do).
MATH_VERIFY_PACKAGES = ("math_verify", "latex2sympy2_extended", "sympy", "mpmath", "antlr4")


def _preload_math_verify(paths: list[str]) -> str:
    """Import math_verify (and sympy under it) once, so games may ``from math_verify import
    parse, verify``; add its packages' folders to the children's read-only paths."""
    try:
        import math_verify  # noqa: F401
    except ImportError as e:
        return f"math_verify not importable: {e}"
    for name in MATH_VERIFY_PACKAGES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            paths.append(os.path.dirname(module.__file__))
    from importlib.metadata import version

    return f"math_verify {version('math-verify')}"


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _namespaces(enabled: bool) -> tuple[bool, str, bool]:
    """Enter fresh net/IPC/UTS namespaces; returns (active, reason, network_isolated)."""
    if not enabled:
        return False, "disabled by Limits.namespaces", False
    libc = ctypes.CDLL(None, use_errno=True)
    flags = _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS
    uid, gid = os.geteuid(), os.getegid()
    userns = uid != 0
    if libc.unshare(flags | (_CLONE_NEWUSER if userns else 0)) != 0:
        e = ctypes.get_errno()
        what = "user+network" if userns else "network"
        return False, f"unshare({what} namespaces) refused: {os.strerror(e)}", False
    if userns:
        try:
            _write_file("/proc/self/setgroups", "deny")
            _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
            _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as e:
            return False, f"user namespace id maps could not be written: {e}", True
    kind = "user, network, IPC, UTS" if userns else "network, IPC, UTS"
    return True, f"fresh {kind} namespaces (no interfaces, not even loopback up)", True


def _spawn(plan: dict, fds: list[int], devnull: int, libc, harden, child) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        # Like a fresh interpreter: `random` reseeds itself at fork; numpy's global generator
        # would otherwise repeat the zygote's stream in every child and hide unseeded envs.
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        harden.setup_descriptors(fds, devnull, libc)
        layers = harden.apply(plan, libc)
        child.write_all(child.RESP_FD, child.frame(child.encode([child.OK, layers]), plan["cap"]))
        child.serve(plan["cap"])
    except BaseException:  # the child's last words go to its log; the host reports them
        try:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            code = 71
    os._exit(code)


def _sweep(released: set[int]) -> None:
    """Reap released children that have finished dying (they were SIGKILLed on release)."""
    for pid in list(released):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done == pid:
            released.discard(pid)


def _handle(req: dict, fds: list[int], live: set[int], released: set[int], spawn) -> dict | None:
    op, pid = req.get("op"), req.get("pid")
    if op == "spawn":
        try:
            pid = spawn(req["plan"], fds)
        except OSError as e:  # EAGAIN under a process limit: the host gets a typed error
            return {"error": f"fork failed: {e}"}
        finally:
            for fd in fds:
                os.close(fd)
        live.add(pid)
        return {"pid": pid}
    if op in ("reap", "release") and pid in live:
        # Only pids still unreaped are signalled: a reaped pid could belong to anyone by now.
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        live.discard(pid)
        if op == "release":  # no reply, no wait for the teardown: swept later
            released.add(pid)
            return None
        return {"status": os.waitpid(pid, 0)[1]}
    if op == "release":
        return None  # never answered, whatever the pid
    return {"error": f"bad request {op!r} for pid {pid!r}"}


def _serve(sock: socket.socket, devnull: int, base: dict, harden, child, msgpack) -> None:
    live: set[int] = set()
    released: set[int] = set()

    libc = harden.libc_handle()

    def spawn(plan: dict, fds: list[int]) -> int:
        return _spawn({**plan, **base}, fds, devnull, libc, harden, child)

    try:
        while True:
            _sweep(released)
            sock.settimeout(0.05 if released else None)
            try:
                data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
            except TimeoutError:
                continue
            if not data:
                return
            req = msgpack.unpackb(data, raw=False)
            if req.get("op") == "exit":
                return
            reply = _handle(req, fds, live, released, spawn)
            if reply is not None:
                sock.sendall(msgpack.packb(reply))
    finally:
        for pid in live | released:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    cfg = json.loads(sys.argv[2])
    read_paths, numpy_note = _preload(cfg)
    import msgpack

    here = cfg["here"]
    harden = _load_file("sandbox_harden", os.path.join(here, "harden.py"))
    child = _load_file("sandbox_child", os.path.join(here, "child.py"))
    kit_notes = "; ".join(_register_kit(name, files) for name, files in cfg.get("kits", {}).items())
    active, reason, netns = _namespaces(cfg["namespaces"])
    devnull = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    hello = {
        "pid": os.getpid(),
        "namespaces": [active, reason],
        "netns": netns,
        "read_paths": read_paths,
        "runtime": f"{numpy_note}; {kit_notes}",
        "root": os.geteuid() == 0,
    }
    gc.freeze()  # children never traverse (and so never copy) the runtime's pages in a GC pass
    sock.sendall(msgpack.packb(hello))
    program, note = harden.build_seccomp()
    base = {"namespaces": [active, reason], "netns": netns, "zygote_pid": os.getpid(),
            "read_paths": read_paths, "seccomp_program": program, "seccomp_note": note}
    _serve(sock, devnull, base, harden, child, msgpack)


if __name__ == "__main__":
    main()

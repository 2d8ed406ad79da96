"""Adversarial tests: one per property the sandbox's threat model lists.

Each attack is bounded so that it cannot harm the host even if the sandbox failed (a few forks
that exit at once, signals that are harmless or caught, loopback only, files in a throwaway
world-writable dir), and each test asserts both that the attack was contained and that the host
is untouched. Layer-specific properties skip, naming the layer, where ``sb.isolation`` says the
layer does not hold on this machine.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import spadework
from spadework.errors import EnvCrashed, EnvRaised, EnvTimeout
from spadework.sandbox import Limits, Sandbox

REPO = Path(__file__).resolve().parents[2]

#: Wraps an attack so the env reports what happened instead of raising.
TRY = """
results = []
def attempt(label, fn):
    try:
        results.append(f"{label}=ok:{fn()!r}"[:200])
    except BaseException as e:
        results.append(f"{label}={type(e).__name__}")
"""


def attack(make_env, body: str) -> str:
    """An env whose step() runs ``body`` (calls to attempt()) and returns the results joined."""
    return make_env(body + "\nreturn ' '.join(results), 0.0, False, False, {}",
                    extra=TRY, reset_body="results.clear()\nreturn 'start', {}")


def run_attack(box: Sandbox, code: str, arg: str = "a") -> str:
    with box.load(code) as env:
        env.reset()
        return env.step(arg)[0]


def needs(box: Sandbox, layer: str) -> None:
    if not box.isolation.active(layer):
        pytest.skip(f"layer {layer} not active here: "
                    + next(x.reason for x in box.isolation.layers if x.name == layer))


@pytest.fixture
def open_dir():
    """A world-writable, world-readable dir outside the sandbox: only the sandbox protects it."""
    path = Path(tempfile.mkdtemp(prefix="spadework-attack-"))
    path.chmod(0o777)
    secret = path / "secret.txt"
    secret.write_text("TOP-SECRET-7731")
    secret.chmod(0o666)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_isolation_matches_privilege(sb):
    assert sb.isolation.active("uid_drop") == (os.geteuid() == 0), str(sb.isolation)
    for name in ("rlimits", "no_new_privs", "seccomp", "network"):
        assert sb.isolation.active(name), str(sb.isolation)


def test_read_files_outside_runtime(sb, make_env, open_dir):
    needs(sb, "landlock")
    secret = open_dir / "secret.txt"
    out = run_attack(sb, attack(make_env, f"""
attempt("secret", lambda: open({str(secret)!r}).read())
attempt("shadow", lambda: open("/etc/shadow").read())
attempt("passwd", lambda: open("/etc/passwd").read())
attempt("listdir", lambda: os.listdir({str(open_dir)!r}))
attempt("repo", lambda: open({str(REPO / "pyproject.toml")!r}).read())
"""))
    assert "TOP-SECRET" not in out and "root:" not in out and "spadework" not in out
    assert "=ok" not in out, out
    assert secret.read_text() == "TOP-SECRET-7731"


def test_shadow_unreadable_without_landlock_too(sb, make_env):
    out = run_attack(sb, attack(make_env, 'attempt("shadow", lambda: open("/etc/shadow").read())'))
    assert out.startswith("shadow=") and "=ok" not in out


def test_write_outside_scratch(sb, make_env, open_dir):
    needs(sb, "landlock")
    target = open_dir / "pwned.txt"
    out = run_attack(sb, attack(make_env, f"""
attempt("outside", lambda: open({str(target)!r}, "w").write("x"))
attempt("tmp", lambda: open("/tmp/spadework-pwned-{os.getpid()}", "w").write("x"))
attempt("unlink", lambda: os.unlink({str(open_dir / "secret.txt")!r}))
attempt("scratch", lambda: open("inside.txt", "w").write("fine"))
"""))
    assert "outside=PermissionError" in out and "tmp=PermissionError" in out
    assert "unlink=PermissionError" in out and "scratch=ok:4" in out
    assert not target.exists() and not Path(f"/tmp/spadework-pwned-{os.getpid()}").exists()
    assert (open_dir / "secret.txt").exists()


def test_connect_to_loopback_listener(sb, make_env):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    try:
        out = run_attack(sb, attack(make_env, f"""
import socket
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=1))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
"""))
        assert "=ok" not in out, out
        listener.settimeout(0.3)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_fork_bomb_and_threads(sb, make_env, zygote_children):
    out = run_attack(sb, attack(make_env, """
import threading
def fork_once():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return pid
for i in range(3):
    attempt(f"fork{i}", fork_once)
attempt("thread", lambda: threading.Thread(target=lambda: None).start())
"""))
    assert out.count("=PermissionError") == 3 and "thread=RuntimeError" in out, out
    assert zygote_children(sb) == []


def test_memory_bomb(small_sb, make_env):
    code = attack(make_env, """
attempt("one_block", lambda: len(bytearray(8 << 30)))
hoard = []
def grow():  # bounded at 512 MiB even if RLIMIT_AS (256 MiB here) did not hold
    for _ in range(512):
        hoard.append(bytearray(1 << 20))
attempt("grow", grow)
hoard.clear()
""")
    with small_sb.load(code) as env:
        env.reset()
        out = env.step("a")[0]
        assert out == "one_block=MemoryError grow=MemoryError", out
        assert env.alive


def test_regaining_privileges_or_limits(sb, make_env):
    out = run_attack(sb, attack(make_env, """
import resource, ctypes
inf = resource.RLIM_INFINITY
attempt("setuid", lambda: os.setuid(0))
attempt("setgid", lambda: os.setgid(0))
attempt("as", lambda: resource.setrlimit(resource.RLIMIT_AS, (inf, inf)))
attempt("cpu", lambda: resource.setrlimit(resource.RLIMIT_CPU, (inf, inf)))
attempt("nproc", lambda: resource.setrlimit(resource.RLIMIT_NPROC, (100, 100)))
attempt("chroot", lambda: os.chroot("/"))
libc = ctypes.CDLL(None, use_errno=True)
attempt("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
"""))
    for name in ("setuid", "setgid", "as", "cpu", "nproc", "chroot"):
        # EPERM, or EINVAL where uid 0 is not even mapped (the unprivileged user namespace)
        assert any(f"{name}={e}" in out for e in ("PermissionError", "ValueError", "OSError")), out
    assert "mount=ok:-1" in out, out


def test_cpu_loop_hits_step_deadline(quick_sb, make_env):
    with quick_sb.load(make_env("while True:\n    pass")) as env:
        env.reset()
        with pytest.raises(EnvTimeout):
            env.step("a")
        pid = env.pid
        assert not env.alive
    assert not Path(f"/proc/{pid}").exists() or "Z" not in Path(f"/proc/{pid}/stat").read_text()


def test_cpu_seconds_limit(make_env):
    with Sandbox(Limits(cpu_seconds=1, step_seconds=20)) as box:
        with box.load(make_env("while True:\n    pass")) as env:
            env.reset()
            with pytest.raises(EnvTimeout, match="cpu_seconds"):
                env.step("a")


def test_sleep_hits_deadline(quick_sb, make_env):
    with quick_sb.load(make_env("import time\ntime.sleep(60)")) as env:
        env.reset()
        with pytest.raises(EnvTimeout):
            env.step("a")


def test_no_exec_system_subprocess(sb, make_env, open_dir):
    markers = [open_dir / f"m{i}" for i in range(4)]
    out = run_attack(sb, attack(make_env, f"""
import subprocess
attempt("system", lambda: os.system("touch {markers[0]}"))
attempt("run", lambda: subprocess.run(["/usr/bin/touch", "{markers[1]}"]))
attempt("spawn", lambda: os.posix_spawn("/usr/bin/touch", ["touch", "{markers[2]}"], {{}}))
attempt("execv", lambda: os.execv("/usr/bin/touch", ["touch", "{markers[3]}"]))
"""))
    assert "run=PermissionError" in out and "execv=PermissionError" in out, out
    assert "spawn=ok" not in out
    # os.system reports failure as a status, not an exception: it must not be 0.
    assert "system=ok:0" not in out
    assert not any(m.exists() for m in markers)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="raw syscall numbers are x86_64")
def test_raw_syscalls_through_ctypes(sb, make_env):
    host = os.getpid()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        out = run_attack(sb, attack(make_env, f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(*args):
    rc = libc.syscall(*args)
    return rc, ctypes.get_errno()
attempt("socket", lambda: call(41, 2, 1, 0))
attempt("fork", lambda: call(57))
attempt("clone", lambda: call(56, 17, 0, 0, 0, 0))
attempt("ptrace", lambda: call(101, 16, {host}, 0, 0))
attempt("kill", lambda: call(62, {sleeper.pid}, 9))
attempt("unshare", lambda: call(272, 0x10000000))
attempt("execve", lambda: call(59, b"/bin/true", None, None))
"""))
        for name in ("socket", "fork", "clone", "ptrace", "kill", "unshare", "execve"):
            assert f"{name}=ok:(-1, 1)" in out, out  # -1 with EPERM
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_proc_and_signals_to_host(sb, make_env):
    received = []
    old = signal.signal(signal.SIGUSR1, lambda *a: received.append(a))
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        out = run_attack(sb, attack(make_env, f"""
import signal
attempt("host", lambda: os.kill({os.getpid()}, signal.SIGUSR1))
attempt("sleeper", lambda: os.kill({sleeper.pid}, signal.SIGKILL))
attempt("group", lambda: os.killpg({os.getpgid(0)}, signal.SIGUSR1))
attempt("everyone", lambda: os.kill(-1, 0))
attempt("proc", lambda: len(os.listdir("/proc")))
attempt("hostmem", lambda: open("/proc/{os.getpid()}/mem", "rb").read(1))
attempt("self", lambda: os.kill(os.getpid(), 0))
"""))
        for name in ("host", "sleeper", "group", "everyone"):
            assert f"{name}=PermissionError" in out, out
        assert "hostmem=ok" not in out and "self=ok:None" in out
        # Landlock denies /proc; without it, an empty tmpfs covers /proc in the child.
        assert "proc=PermissionError" in out or "proc=ok:0" in out, out
        time.sleep(0.05)
        assert received == [] and sleeper.poll() is None
    finally:
        signal.signal(signal.SIGUSR1, old)
        sleeper.kill()
        sleeper.wait()


def test_filling_the_disk(small_sb, make_env):
    file_cap, scratch_cap = small_sb.limits.file_bytes, small_sb.limits.scratch_bytes
    code = attack(make_env, """
def fill(name):
    with open(name, "wb") as f:
        for _ in range(32):
            f.write(b"x" * (64 << 10))
for i in range(4):
    attempt(f"f{i}", lambda: fill(f"big{i}.bin"))
attempt("many", lambda: [open(f"small{i}", "w").close() for i in range(1500)])
""")
    with small_sb.load(code) as env:
        env.reset()
        out = env.step("a")[0]
        # The child's own view of its scratch (a tmpfs in its mount namespace), read as root.
        seen = Path(f"/proc/{env.pid}/root{env.scratch}")
        sizes = [p.stat().st_size for p in seen.iterdir()] if os.access(seen, os.R_OK) else None
    assert out.count("=OSError") == 5, out  # EFBIG per file, ENOSPC for the whole dir
    if sizes is not None:
        assert max(sizes) <= file_cap and sum(sizes) <= scratch_cap
    # The host's disk got nothing. os.walk, not glob: the sandbox deletes used scratch dirs on a
    # background thread, and a glob fails on a directory that vanishes while it is being read.
    assert not any(f.startswith("big") for _, _, files in os.walk(Path(env.scratch).parent)
                   for f in files)


def test_flooding_stdout_and_stderr(small_sb, make_env):
    code = attack(make_env, """
def flood_out():
    for _ in range(20):
        print("y" * (1 << 20))
        os.write(1, b"z" * (1 << 20))
def flood_err():
    for _ in range(8):
        sys.stderr.write("e" * (1 << 20))
        sys.stderr.flush()
attempt("stdout", flood_out)
attempt("stderr", flood_err)
""")
    with small_sb.load(code) as env:
        env.reset()
        out = env.step("a")[0]
        assert "stdout=ok" in out
        assert os.fstat(env._log).st_size <= small_sb.limits.file_bytes
        assert env.step("a")[0].startswith("stdout=ok")  # still answering


def test_huge_reply_is_refused(small_sb, make_env):
    with small_sb.load(make_env("return 'x' * (4 << 20), 0.0, False, False, {}")) as env:
        env.reset()
        with pytest.raises(EnvRaised, match="too much"):
            env.step("a")
        assert env.alive


def test_forged_oversize_frame_kills_child(small_sb, make_env):
    code = make_env("import struct, time\nos.write(4, struct.pack('>I', 0xFFFFFFF0))\ntime.sleep(30)")
    with small_sb.load(code) as env:
        env.reset()
        with pytest.raises(EnvCrashed, match="exceeds"):
            env.step("a")
        assert not env.alive


def test_garbage_on_protocol_pipe(small_sb, make_env):
    code = make_env("os.write(4, b'\\x00\\x00\\x00\\x04\\xc1\\xc1\\xc1\\xc1')\nreturn 'ok', 0.0, False, False, {}")
    with small_sb.load(code) as env:
        env.reset()
        with pytest.raises(EnvCrashed, match="undecodable"):
            env.step("a")
        with pytest.raises(EnvCrashed, match="dead"):
            env.reset()


def test_import_or_patch_spadework(sb, make_env):
    init = Path(spadework.__file__)
    digest = hashlib.sha256(init.read_bytes()).hexdigest()
    out = run_attack(sb, attack(make_env, f"""
attempt("plain", lambda: __import__("spadework"))
sys.path.insert(0, {str(REPO)!r})
def patch():
    import spadework
    spadework.PWNED = True
    return spadework.__file__
attempt("path", patch)
attempt("write", lambda: open({str(init)!r}, "a").write("PWNED = True\\n"))
sys.modules["spadework"] = type(sys)("spadework")
attempt("modules", lambda: setattr(sys.modules["spadework"], "PWNED", True))
"""))
    assert "plain=ModuleNotFoundError" in out, out
    assert "write=ok" not in out
    if sb.isolation.active("landlock"):
        assert "path=ok" not in out, out
    assert not hasattr(spadework, "PWNED")
    assert hashlib.sha256(init.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("reply", [
    "[1, 'just one']",      # RAISED with the wrong shape
    "[3, 'Exc', 'tb']",     # LOAD_FAILED outside load
    "{'not': 'a list'}",
    "[7, None]",
])
def test_forged_reply_frames(small_sb, make_env, reply):
    code = make_env(f"""
import sys
pack = sys.modules["sandbox_child"].encode
data = pack({reply})
os.write(4, len(data).to_bytes(4, "big") + data)
import time
time.sleep(30)
""")
    with small_sb.load(code) as env:
        env.reset()
        with pytest.raises(EnvCrashed, match="malformed|undecodable|cannot unpack"):
            env.step("a")
        assert not env.alive


def test_host_death_takes_zygote_and_children_along(tmp_path):
    script = (
        "import os, sys\n"
        "from spadework.sandbox import Sandbox\n"
        "sb = Sandbox().__enter__()\n"
        "env = sb.load('class E:\\n def __init__(self, max_turns=10): pass\\n"
        " def reset(self, seed=None): return \"o\", {}\\n def step(self, a): return \"o\", 0.0, False, False, {}\\n')\n"
        "print(sb.zygote_pid, env.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([__import__("sys").executable, "-c", script], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    zygote, child = (int(x) for x in proc.stdout.split())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in (zygote, child)):
        time.sleep(0.02)
    for pid in (zygote, child):
        # Gone, or at most a zombie waiting for init to reap it.
        assert not Path(f"/proc/{pid}").exists() or " Z " in Path(f"/proc/{pid}/stat").read_text()


def test_math_verify_preloaded_opens_no_door(make_env, open_dir):
    """With ``Limits(math_verify=True)`` the child inherits sympy, whose string parsers run
    ``eval``: code reached that way is still the child's code, under the same layers. The
    attack goes through sympy's parser to the files, processes and network the child lacks, and
    imports other site packages; only math_verify itself (and what it imported) is reachable."""
    pytest.importorskip("math_verify")
    marker = open_dir / "touched"
    with Sandbox(Limits(math_verify=True, step_seconds=10.0, load_seconds=20.0)) as box:
        assert "math_verify" in box.isolation.runtime
        out = run_attack(box, attack(make_env, f"""
import math_verify
attempt("verify", lambda: math_verify.verify(math_verify.parse("$1/2$"), math_verify.parse("$0.5$")))
from sympy.parsing.sympy_parser import parse_expr
attempt("read", lambda: parse_expr("__import__('builtins').open({str(open_dir / 'secret.txt')!r}).read()"))
attempt("exec", lambda: parse_expr("__import__('os').system('touch {marker}')"))
attempt("socket", lambda: parse_expr("__import__('socket').socket()"))
attempt("other_pkg", lambda: __import__("typer"))
"""))
    assert "verify=ok:True" in out, out
    assert "TOP-SECRET" not in out
    if box.isolation.active("landlock"):
        assert "read=PermissionError" in out, out
    assert "exec=ok:0" not in out and not marker.exists()
    assert "socket=PermissionError" in out, out
    assert "other_pkg=ModuleNotFoundError" in out, out

"""Isolation layers a sandbox child applies to itself before any generated code runs.

Standard library only (the zygote compiles the seccomp filter once with the optional
``pyseccomp`` binding of libseccomp; children load the raw program): the zygote loads
this file by path, and the host imports it as ``spadework.sandbox.harden`` only for the layer
names. Each layer function returns ``(active, reason)`` and never raises, so the child can report
exactly which layers hold; the host refuses to send code to a child that lacks a required layer.

Order matters: descriptors first, then the steps that need privilege (the scratch tmpfs in a
private mount namespace, rlimits, the uid drop), capabilities emptied, ``PR_SET_NO_NEW_PRIVS`` (which
Landlock and seccomp need without CAP_SYS_ADMIN), Landlock (its syscalls would otherwise be
filtered), and seccomp last.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import struct

#: Every layer the sandbox reports on, in the order ``spadework doctor`` prints them.
LAYERS = ("namespaces", "uid_drop", "no_new_privs", "seccomp", "landlock", "rlimits", "network")

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_SYS_CLOSE_RANGE = 436
_CAP_VERSION_3 = 0x20080522
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 1, 2, 4, 8, 0x4000, 0x40000
_SCRATCH_INODES = 1024

# Landlock filesystem rights (include/uapi/linux/landlock.h).
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1, 2, 4, 8
_LL_REMOVE_DIR, _LL_REMOVE_FILE, _LL_MAKE_DIR, _LL_MAKE_REG = 16, 32, 128, 256
_LL_TRUNCATE = 1 << 14

#: Syscalls refused with EPERM: no new processes or threads, no exec, no sockets, no tracing,
#: no mounts or namespaces, no kernel-facing admin calls. Names absent on an architecture are
#: skipped. Threads are refused too: no environment needs one, and a stray thread would keep
#: running (and spending CPU) after the call that started it returned.
DENIED_SYSCALLS = (
    "execve", "execveat", "fork", "vfork", "clone", "socket", "socketpair", "connect", "bind",
    "listen", "accept", "accept4", "ptrace", "process_vm_readv", "process_vm_writev", "mount",
    "umount2", "pivot_root", "chroot", "unshare", "setns", "kexec_load", "kexec_file_load", "bpf",
    "perf_event_open", "keyctl", "add_key", "request_key", "pidfd_open", "pidfd_send_signal",
    "pidfd_getfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
    "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct",
    "settimeofday", "clock_settime", "adjtimex", "syslog", "quotactl", "name_to_handle_at",
    "open_by_handle_at", "kcmp", "fanotify_init", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "move_pages", "migrate_pages", "lookup_dcookie",
)

#: Signal-sending syscalls allowed only when their first argument is the child's own pid.
SELF_ONLY_SYSCALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")


def libc_handle() -> ctypes.CDLL:
    """The C library with errno capture; the zygote makes one and every child inherits it
    (its function pointers already resolved, which saves each child the lookups)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for name in ("syscall", "prctl", "capset", "unshare"):
        getattr(libc, name)
    return libc


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _err(what: str) -> str:
    e = ctypes.get_errno()
    return f"{what} failed: {errno.errorcode.get(e, e)} ({os.strerror(e)})"


def setup_descriptors(fds: list[int], devnull: int, libc: ctypes.CDLL) -> None:
    """Make ``fds`` the child's 2 (log), 3 (requests), 4 (replies), 0/1 /dev/null; close the rest."""
    log_fd, req_fd, resp_fd = fds
    # Move the passed descriptors above 4 first so that dup2 never clobbers one we still need.
    moved = [os.dup(fd) for fd in (devnull, log_fd, req_fd, resp_fd)]
    for target, fd in zip((0, 2, 3, 4), moved):
        os.dup2(fd, target, inheritable=False)
    os.dup2(0, 1, inheritable=False)
    if libc.syscall(_SYS_CLOSE_RANGE, 5, 0xFFFFFFFF, 0) != 0:
        os.closerange(5, os.sysconf("SC_OPEN_MAX"))


def scratch_quota(scratch: str, size: int, uid: int | None, gid: int | None,
                  libc: ctypes.CDLL) -> str:
    """Mount a size-capped tmpfs on the scratch dir in a private mount namespace.

    Needs CAP_SYS_ADMIN (root, or the zygote's user namespace): the child still has it here.
    The mount dies with the child, so nothing is left to clean up. Returns a note for the report.
    """
    owner = (uid, gid) if os.geteuid() == 0 and uid is not None else (os.geteuid(), os.getegid())
    opts = f"size={size},nr_inodes={_SCRATCH_INODES},mode=0700,uid={owner[0]},gid={owner[1]}"
    if libc.unshare(_CLONE_NEWNS) != 0:
        return _err("scratch not size-capped: unshare(mount namespace)")
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return _err("scratch not size-capped: making mounts private")
    if libc.mount(b"tmpfs", scratch.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                  opts.encode()) != 0:
        return _err("scratch not size-capped: mount tmpfs")
    hidden = [path for path in _HIDDEN if _cover(path, libc)]
    return f"scratch {size} B tmpfs ({_SCRATCH_INODES} files); {', '.join(hidden) or 'nothing'} hidden"


#: Covered by an empty read-only tmpfs in the child's mount namespace: other processes'
#: /proc/<pid>/{mem,environ,...} and the host-shared /dev/shm, even where Landlock is missing.
_HIDDEN = ("/proc", "/dev/shm")


def _cover(path: str, libc: ctypes.CDLL) -> bool:
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY
    return os.path.isdir(path) and libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags,
                                               b"size=4096,nr_inodes=1,mode=0555") == 0


def apply_rlimits(limits: dict) -> tuple[bool, str]:
    """CPU, address space, file size, open files and core; processes come after the uid drop."""
    try:
        cpu = int(limits["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"],) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"],) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError) as e:
        return False, f"setrlimit failed: {e}"
    # Writing past RLIMIT_FSIZE then fails with EFBIG instead of killing the child silently.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return True, (
        f"cpu {cpu}s, address space {limits['memory_bytes']} B, file size {limits['file_bytes']} B, "
        f"open files {limits['open_files']}, processes 0, core 0"
    )


def drop_uid(uid: int | None, gid: int | None) -> tuple[bool, str]:
    """As root: setgroups([]) and switch every uid/gid to the unprivileged pair."""
    if os.geteuid() != 0 or uid is None:
        return False, (
            f"not started as root (uid {os.geteuid()}): the child keeps the caller's uid; "
            "seccomp and Landlock confine it instead"
        )
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as e:
        return False, f"could not switch to uid {uid}/gid {gid}: {e}"
    if os.getresuid() != (uid, uid, uid):
        return False, f"uid switch did not hold: {os.getresuid()}"
    return True, f"runs as uid {uid}, gid {gid}, no supplementary groups"


def drop_capabilities(libc: ctypes.CDLL) -> bool:
    """Empty the effective, permitted and inheritable capability sets (matters in a user ns)."""
    header = struct.pack("Ii", _CAP_VERSION_3, 0)
    data = bytes(24)
    return libc.capset(header, data) == 0


def process_limits(zygote_pid: int, libc: ctypes.CDLL) -> None:
    """No new processes, die with the zygote, and make /proc/<pid> unreadable to siblings."""
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != zygote_pid:  # the zygote died before PDEATHSIG was armed
        os._exit(70)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def no_new_privs(libc: ctypes.CDLL) -> tuple[bool, str]:
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False, _err("prctl(PR_SET_NO_NEW_PRIVS)")
    return True, "set; exec can never gain privileges"


def landlock(read_paths: list[str], rw_paths: list[str], libc: ctypes.CDLL) -> tuple[bool, str]:
    """Read-only ``read_paths``, read-write ``rw_paths``, nothing else; TCP and signals scoped."""
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)
    if abi < 0:
        return False, _err("landlock_create_ruleset (kernel without Landlock, or disabled)")
    fs = (1 << 13) - 1
    fs |= (1 << 13) if abi >= 2 else 0
    fs |= _LL_TRUNCATE if abi >= 3 else 0
    fs |= (1 << 15) if abi >= 5 else 0
    net = 3 if abi >= 4 else 0  # bind and connect TCP, with no rule allowing either
    scoped = 3 if abi >= 6 else 0  # abstract UNIX sockets and signals outside the domain
    attr = struct.pack("QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, attr, len(attr), 0)
    if ruleset < 0:
        return False, _err("landlock_create_ruleset")
    read = _LL_READ_FILE | _LL_READ_DIR
    write = read | _LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE_DIR | _LL_MAKE_REG
    write |= _LL_TRUNCATE if abi >= 3 else 0
    try:
        for paths, access in ((read_paths, read), (rw_paths, write)):
            for path in paths:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
                except OSError:
                    continue  # a runtime path that does not exist here needs no rule
                rule = struct.pack("<Qi", access, fd)
                rc = libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, rule, 0)
                os.close(fd)
                if rc != 0:
                    return False, _err(f"landlock_add_rule({path})")
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return False, _err("landlock_restrict_self")
    finally:
        os.close(ruleset)
    extra = ", TCP bind/connect denied" if net else ""
    extra += ", signals and abstract sockets scoped to the child" if scoped else ""
    return True, f"ABI {abi}: read-only runtime, read-write scratch only{extra}"


#: Stands in for the child's pid in the filter the zygote compiles once; each child patches it.
PID_SENTINEL = 0x5EC0FFEE
_BPF_INSN = struct.Struct("<HBBI")
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def build_seccomp() -> tuple[bytes | None, str]:
    """Compile the filter once (in the zygote) to raw BPF: refuse :data:`DENIED_SYSCALLS`, allow
    signals only to :data:`PID_SENTINEL`. Returns ``(program, note)``; program None if impossible.

    libseccomp does the architecture checks (other ABIs, x32 syscalls: killed) and the 64-bit
    argument comparison; the child only replaces the sentinel with its pid and loads the result.
    """
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as e:
        return None, f"pyseccomp/libseccomp not importable: {e}"
    try:
        flt = sc.SyscallFilter(sc.ALLOW)
        deny = sc.ERRNO(errno.EPERM)
        skipped = []
        for name in DENIED_SYSCALLS:
            try:
                flt.add_rule(deny, name)
            except (OSError, ValueError, RuntimeError):
                skipped.append(name)
        # clone3 cannot be filtered by flags (they live in memory): ENOSYS makes libc fall back
        # to clone, which the rule above refuses.
        flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        for name in SELF_ONLY_SYSCALLS:
            flt.add_rule(deny, name, sc.Arg(0, sc.NE, PID_SENTINEL))
        read_end, write_end = os.pipe()
        try:
            with os.fdopen(write_end, "wb") as sink:
                flt.export_bpf(sink)
            program = b"".join(iter(lambda: os.read(read_end, 1 << 16), b""))
        finally:
            os.close(read_end)
    except (OSError, ValueError, RuntimeError) as e:
        return None, f"seccomp filter could not be compiled: {e}"
    note = f" ({', '.join(skipped)} not on this architecture)" if skipped else ""
    return program, f"{len(DENIED_SYSCALLS) - len(skipped) + 1} syscalls refused, signals to self only{note}"


def patch_pid(program: bytes, pid: int) -> bytes:
    """Replace the sentinel immediate of every BPF instruction with ``pid``.

    >>> insn = _BPF_INSN.pack(0x15, 1, 0, PID_SENTINEL)
    >>> _BPF_INSN.unpack(patch_pid(insn + insn, 42)[8:])
    (21, 1, 0, 42)
    """
    out = bytearray(program)
    hits = 0
    for offset in range(0, len(out), _BPF_INSN.size):
        code, jt, jf, k = _BPF_INSN.unpack_from(out, offset)
        if k == PID_SENTINEL:
            _BPF_INSN.pack_into(out, offset, code, jt, jf, pid)
            hits += 1
    if hits == 0:
        raise ValueError("the compiled filter has no pid comparison to patch")
    return bytes(out)


def seccomp(program: bytes | None, note: str, libc: ctypes.CDLL) -> tuple[bool, str]:
    """Load the zygote-compiled filter with this child's pid (needs no_new_privs first)."""
    if program is None:
        return False, note
    try:
        patched = patch_pid(program, os.getpid())
    except ValueError as e:
        return False, f"seccomp filter unusable: {e}"
    buf = ctypes.create_string_buffer(patched, len(patched))
    prog = _SockFprog(len(patched) // _BPF_INSN.size, ctypes.addressof(buf))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return False, _err("prctl(PR_SET_SECCOMP)")
    return True, note


def apply(plan: dict, libc: ctypes.CDLL) -> list[list]:
    """Apply every layer in order; returns ``[[layer, active, reason], ...]`` for the host."""
    layers: dict[str, tuple[bool, str]] = {"namespaces": tuple(plan["namespaces"])}
    os.setsid()
    quota = scratch_quota(plan["scratch"], plan["limits"]["scratch_bytes"], plan.get("uid"),
                          plan.get("gid"), libc)
    os.chdir(plan["scratch"])  # after the mount, so the cwd is the tmpfs
    active, reason = apply_rlimits(plan["limits"])
    layers["rlimits"] = (active, f"{reason}; {quota}")
    layers["uid_drop"] = drop_uid(plan.get("uid"), plan.get("gid"))
    caps = drop_capabilities(libc)
    process_limits(plan["zygote_pid"], libc)
    if not caps and layers["uid_drop"][0] is False and os.geteuid() == 0:
        layers["uid_drop"] = (False, layers["uid_drop"][1] + "; capabilities could not be dropped")
    layers["no_new_privs"] = no_new_privs(libc)
    layers["landlock"] = landlock(plan["read_paths"], [plan["scratch"]], libc)
    layers["seccomp"] = seccomp(plan.get("seccomp_program"), plan.get("seccomp_note", "not compiled"), libc)
    ways = []
    if plan.get("netns"):
        ways.append("empty network namespace")
    if layers["seccomp"][0]:
        ways.append("seccomp refuses socket()")
    if layers["landlock"][0] and "TCP" in layers["landlock"][1]:
        ways.append("Landlock denies TCP")
    layers["network"] = (bool(ways), "; ".join(ways) or "no layer blocks network access")
    return [[name, *layers[name]] for name in LAYERS]

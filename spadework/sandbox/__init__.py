"""Run untrusted environment code: one hardened child process per environment instance.

Threat model. Environment code is written by a language model and may be wrong, wasteful or
hostile. The sandbox protects the host (the trainer process, its files, other processes, the
network) and keeps one environment from disturbing another:

- it never runs in the host process: a zygote forks one child per ``load``, which hardens itself
  before any generated code is compiled;
- time: per-call and per-episode wall-clock deadlines, and any earlier deadline the caller
  passes (``deadline=``, the checker's whole-check budget), SIGKILL by pid; RLIMIT_CPU;
- memory and disk: RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NOFILE; the scratch dir is a size-capped
  tmpfs in the child's own mount namespace (gone when the child dies); stdout goes to /dev/null,
  stderr to a size-capped log file whose tail explains crashes;
- processes: no fork, vfork, clone (threads included) or exec (seccomp, RLIMIT_NPROC=0); signals
  only to itself (seccomp argument filter, Landlock signal scoping); dies with the zygote;
- files: Landlock allows reading the Python runtime and read-write in one scratch dir, nothing
  else (no /proc, no /etc, no spadework source); as root the child also runs as uid 65534; in
  the child's mount namespace empty read-only tmpfs cover /proc and /dev/shm (Landlock or not);
- network: seccomp refuses socket(); the zygote sits in an empty network namespace; Landlock
  denies TCP bind/connect;
- privilege: PR_SET_NO_NEW_PRIVS, capabilities emptied, no ptrace, mount, namespaces, bpf, keyring;
- the protocol: msgpack frames with a size cap both ways, never pickle; garbage or an oversize
  frame kills the child (EnvCrashed); spadework itself cannot be imported in the child;
- third-party code: only msgpack, numpy (``Limits.numpy``) and, when asked for with
  ``Limits(math_verify=True)`` and installed, math_verify with what it imports (sympy, mpmath,
  latex2sympy2_extended, antlr4) are in the child; no other site package is importable.
  math_verify is there because the reference's generated games call it to grade answers. sympy's
  string parsers run ``eval``, so an environment reaches ``eval`` through them whatever the
  static stage forbids; what runs is still the child's own code under every layer above, and
  the only new access is reading those packages' folders.

It does not protect against: kernel exploits (seccomp default-allows the ordinary syscalls),
side channels and timing, CPU, memory-bandwidth or page-cache contention between children and the
host, an environment lying about its own results or forging its own replies (the checker's job;
a malformed reply is a crash), children of one sandbox sharing uid 65534, and, where Landlock is
missing, reading world-readable files and writing into world-writable dirs such as /tmp (each
file capped by RLIMIT_FSIZE); ``sb.isolation`` says which layers hold.
The zygote must stay alive: if it dies, its children die with it and the Sandbox must be
restarted. Closing a handle waits for a call in flight on it (at most its deadline).

Use: ``with Sandbox(Limits()) as sb:`` then ``with sb.load(code) as env:``. Handles are
thread-safe; for asyncio use ``await env.astep(action)`` (a worker thread).
"""

from spadework.sandbox.base import Sandbox, probe
from spadework.sandbox.handle import EnvHandle
from spadework.sandbox.limits import DEFAULT_REQUIRED, Isolation, Layer, Limits

__all__ = ["DEFAULT_REQUIRED", "EnvHandle", "Isolation", "Layer", "Limits", "Sandbox", "probe"]

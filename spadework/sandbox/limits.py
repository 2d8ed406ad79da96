"""Sandbox limits (validated once, at construction) and the isolation report."""

from __future__ import annotations

from dataclasses import dataclass, field

from spadework.errors import ConfigError
from spadework.sandbox.harden import LAYERS

#: Layers that hold on an ordinary Linux box, as root or not: required unless opted out.
DEFAULT_REQUIRED = frozenset({"rlimits", "no_new_privs", "seccomp"})

_MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """What one sandbox child may use, and which isolation layers must hold.

    Deadlines are wall-clock and enforced by the host (SIGKILL of the child's pid); the rest are
    kernel limits the child sets on itself before any generated code runs.

    >>> Limits(step_seconds=2).step_seconds
    2
    >>> Limits(required_layers={"warp_drive"})
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: Limits.required_layers: unknown layer 'warp_drive'; choose from namespaces, uid_drop, no_new_privs, seccomp, landlock, rlimits, network
    """

    step_seconds: float = 5.0
    """Wall-clock seconds for one reset/step/solution/hint/tools call."""
    episode_seconds: float = 60.0
    """Wall-clock seconds the environment may spend inside its calls, summed from reset() (or
    from load, before the first reset). Time between calls (the policy thinking) is not counted,
    so a slow model never kills a healthy environment."""
    load_seconds: float = 10.0
    """Wall-clock seconds to fork, harden, import the module and instantiate the class."""
    cpu_seconds: int = 30
    """CPU seconds for the child's whole life (RLIMIT_CPU); exceeding it is an EnvTimeout."""
    memory_bytes: int = 1024 * _MIB
    """Address space of the child (RLIMIT_AS), including the runtime it inherits (~100 MiB)."""
    file_bytes: int = 16 * _MIB
    """Largest file the child may write (RLIMIT_FSIZE), also caps its stderr log."""
    scratch_bytes: int = 16 * _MIB
    """Size of the child's scratch dir: a private tmpfs (memory, freed when the child dies)."""
    open_files: int = 64
    """Descriptors the child may hold (RLIMIT_NOFILE); it starts with five."""
    max_message_bytes: int = 4 * _MIB
    """Largest msgpack message either way; a bigger reply is an error, not an allocation."""
    uid: int = 65534
    """Unprivileged uid the child switches to when the sandbox runs as root."""
    gid: int = 65534
    """Unprivileged gid the child switches to when the sandbox runs as root."""
    namespaces: bool = True
    """Put the zygote (and so every child) in fresh network, IPC and UTS namespaces."""
    numpy: bool = True
    """Pre-import numpy in the zygote (when importable) so environments may use it."""
    math_verify: bool = False
    """Pre-import math_verify (and sympy, which it needs) in the zygote when it is installed, so
    environments may ``from math_verify import parse, verify`` as the reference's designer
    template does. Off by default: it adds about 0.4 s to the sandbox's start (134 -> 555 ms)
    and 40 MiB to the zygote's resident memory (37 -> 77 MiB), measured by
    ``benchmarks/gym.py`` on a loaded two-core machine; forks share those pages."""
    required_layers: frozenset[str] = field(default=DEFAULT_REQUIRED)
    """Layers that must be active; a missing one raises SandboxUnavailable."""
    allow_degraded: bool = False
    """Run anyway when a required layer is missing (the report still says which)."""

    def __post_init__(self) -> None:
        for name in ("step_seconds", "episode_seconds", "load_seconds"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"Limits.{name} must be > 0 seconds, got {getattr(self, name)!r}")
        if not (isinstance(self.cpu_seconds, int) and self.cpu_seconds >= 1):
            raise ConfigError(f"Limits.cpu_seconds must be an int >= 1, got {self.cpu_seconds!r}")
        floors = {"memory_bytes": 256 * _MIB, "file_bytes": 4096, "open_files": 8,
                  "scratch_bytes": 65536,
                  "max_message_bytes": 1024}
        for name, floor in floors.items():
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= floor):
                raise ConfigError(f"Limits.{name} must be an int >= {floor}, got {value!r}")
        if self.max_message_bytes >= 1 << 32:
            raise ConfigError("Limits.max_message_bytes must be < 4 GiB (4-byte length prefix)")
        for name in ("uid", "gid"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) > 0):
                raise ConfigError(f"Limits.{name} must be a positive int (not root), got {getattr(self, name)!r}")
        layers = frozenset(self.required_layers)
        unknown = sorted(layers - set(LAYERS))
        if unknown:
            raise ConfigError(
                f"Limits.required_layers: unknown layer {unknown[0]!r}; choose from {', '.join(LAYERS)}"
            )
        object.__setattr__(self, "required_layers", layers)

    def rlimits(self) -> dict:
        """The kernel limits as the child's hardening plan expects them."""
        return {
            "cpu_seconds": self.cpu_seconds,
            "memory_bytes": self.memory_bytes,
            "file_bytes": self.file_bytes,
            "scratch_bytes": self.scratch_bytes,
            "open_files": self.open_files,
        }


@dataclass(frozen=True)
class Layer:
    """One isolation layer: whether it holds in the children, and why (or why not)."""

    name: str
    active: bool
    reason: str


@dataclass(frozen=True)
class Isolation:
    """Which isolation layers hold, as reported by a hardened child of this sandbox.

    >>> iso = Isolation((Layer("seccomp", True, "on"), Layer("landlock", False, "old kernel")))
    >>> iso.active("seccomp"), iso.missing({"seccomp", "landlock"})
    (True, ['landlock'])
    >>> print(iso)
    seccomp   active    on
    landlock  inactive  old kernel
    """

    layers: tuple[Layer, ...]
    runtime: str = ""

    @classmethod
    def from_report(cls, rows: list, runtime: str = "") -> Isolation:
        return cls(tuple(Layer(str(n), bool(a), str(r)) for n, a, r in rows), runtime)

    def active(self, name: str) -> bool:
        return any(layer.name == name and layer.active for layer in self.layers)

    def missing(self, required: frozenset[str] | set[str]) -> list[str]:
        """Required layers that are not active, in report order."""
        return [n for n in LAYERS if n in required and not self.active(n)] + sorted(
            n for n in required if n not in LAYERS
        )

    def __str__(self) -> str:
        width = max((len(layer.name) for layer in self.layers), default=0)
        return "\n".join(
            f"{layer.name:<{width}}  {'active' if layer.active else 'inactive':<8}  {layer.reason}"
            for layer in self.layers
        )

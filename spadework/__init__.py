"""spadework: SPADE self-play in sandboxed, synthetic, executable environments.

One language model plays two roles: a designer that writes multi-turn environments as Python
code, and an agent that plays them with and without a privileged hint. This module re-exports the
small public API only; importing it has no side effects and pulls in no torch, transformers or ray.
"""

__version__ = "0.1.0"

from spadework.errors import (  # noqa: E402
    ActionParseError,
    ArchiveError,
    ConfigError,
    ContractError,
    EnvCrashed,
    EnvError,
    EnvLoadError,
    EnvRaised,
    EnvTimeout,
    ExtractError,
    PolicyError,
    SandboxUnavailable,
    SpadeworkError,
)

__all__ = [
    "__version__",
    "ActionParseError",
    "ArchiveError",
    "ConfigError",
    "ContractError",
    "EnvCrashed",
    "EnvError",
    "EnvLoadError",
    "EnvRaised",
    "EnvTimeout",
    "ExtractError",
    "PolicyError",
    "SandboxUnavailable",
    "SpadeworkError",
]

"""Exceptions, typed by the boundary they crossed.

A bad episode or a bad design is data, not a crash: the one place that composes stages catches
these types and records them. Each error carries a ``reason`` a person can act on.
"""

from __future__ import annotations


class SpadeworkError(Exception):
    """Base class of every error spadework raises on purpose."""

    def __init__(self, reason: str, *args: object) -> None:
        super().__init__(reason, *args)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class ConfigError(SpadeworkError, ValueError):
    """A setting is missing or invalid; the message names the setting and what to set."""


class ExtractError(SpadeworkError):
    """No usable environment module could be pulled out of a designer reply."""


class ActionParseError(SpadeworkError):
    """An agent reply does not contain a well-formed action (box, answer or tool call)."""


class ContractError(SpadeworkError):
    """Environment code breaks the written contract (no class, wrong signature, bad return)."""


class CheckBudgetExceeded(ContractError):
    """A check ran out of its total time budget; the reason says in which stage and how far it got."""


class EnvError(SpadeworkError):
    """Something went wrong while running environment code in the sandbox."""


class EnvLoadError(EnvError):
    """The environment module could not be imported or instantiated inside the sandbox."""


class EnvTimeout(EnvError):
    """A call into the environment passed its wall-clock or CPU deadline; the child was killed."""


class EnvCrashed(EnvError):
    """The sandbox child died (signal, resource limit, protocol violation); the handle is dead."""

    def __init__(self, reason: str, stderr_tail: str = "") -> None:
        super().__init__(reason)
        self.stderr_tail = stderr_tail


class EnvRaised(EnvError):
    """The environment's own code raised an exception; the child is still alive.

    ``exc_type`` and ``traceback`` are the child's, as text (nothing is unpickled).
    """

    def __init__(self, reason: str, exc_type: str = "", traceback: str = "") -> None:
        super().__init__(reason)
        self.exc_type = exc_type
        self.traceback = traceback


class SandboxUnavailable(SpadeworkError):
    """A required isolation layer is not available on this machine (see ``spadework doctor``)."""


class PolicyError(SpadeworkError):
    """A model backend failed: server down, garbage reply, prompt too long, bad weights."""


class ArchiveError(SpadeworkError):
    """The run archive cannot be read or written (corrupt file, newer schema, locked)."""


class StorageError(SpadeworkError):
    """A file could not be written because its disk (or a file-size limit) is full; the message
    names the file and the space left. What was stored before is intact."""


class CorpusError(SpadeworkError):
    """A document corpus cannot be loaded or fetched (missing file, no documents, no library)."""


class SpaceError(SpadeworkError, ValueError):
    """A value lies outside a declared Gymnasium space: an observation the environment produced
    or an action the caller passed. It is refused, never clipped, truncated or re-encoded."""

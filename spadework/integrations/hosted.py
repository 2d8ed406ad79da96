"""One spadework environment behind plain ``reset``/``step`` calls, its code only in the sandbox.

:class:`HostedEnv` is what every host outside the self-play loop drives: the Gymnasium
environment (:mod:`spadework.gym`), the MCP server and the OpenEnv server. Every episode runs in
a fresh hardened child of a fork server, as the loop plays them: the constructor forks the first
(so a module that does not load fails at once, and its ``LEVELS`` is read), each later
``reset()`` kills the used child and forks a new one, ``step()`` is a round trip over its pipe.
The fork server is owned (started here, stopped by :meth:`HostedEnv.close`) or shared (a started
:class:`spadework.sandbox.Sandbox` passed in, which many hosted environments may fork from at
once: the sandbox is thread-safe).

Results are held to the environment contract (:func:`spadework.env.probe.validate_step`), an
episode ends by the environment's flags or truncated after ``max_turns`` steps, and the
environment's failures are raised as typed errors (EnvTimeout, EnvCrashed, EnvRaised,
ContractError, ...); after one the episode is over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spadework.env.checker import levels_of
from spadework.env.probe import call_env, validate_reset, validate_step
from spadework.errors import ConfigError, ContractError, EnvError, SpadeworkError
from spadework.integrations.source import Resolved, resolve
from spadework.sandbox import Limits, Sandbox
from spadework.settings.check import CheckConfig
from spadework.types import EnvSource

#: Turns per episode when the source does not say (the checker's default limit).
DEFAULT_MAX_TURNS = CheckConfig().max_turns
#: The longest observation, by default: the checker's cap, so a checked environment fits.
MAX_OBS_CHARS = CheckConfig().max_obs_chars


class EpisodeOver(SpadeworkError):
    """``step()`` was called with no episode running: call ``reset()`` first."""


@dataclass(frozen=True)
class Turn:
    """One step's result. ``turn_limit`` is True when the episode was truncated here because
    ``max_turns`` steps were used, not by the environment's own flag."""

    obs: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)
    turn: int = 0
    turn_limit: bool = False

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class HostedEnv:
    """A sandboxed spadework environment (see the module docstring).

    ``source`` is a starter name, a ``.py`` module file, an archive file or run directory
    together with ``env_id``, or an :class:`~spadework.types.EnvSource`. ``max_turns`` defaults
    to the turn limit an archived environment was checked under, else the checker's default.
    ``level`` is the difficulty level played (1, the easiest, to the environment's ``LEVELS``).
    ``max_obs_chars`` caps an observation's length (a longer one is a ContractError).
    """

    def __init__(self, source: str | Path | EnvSource, env_id: str | None = None, *,
                 level: int = 1, max_turns: int | None = None, sandbox: Any = None,
                 limits: Any = None, allow_rejected: bool = False,
                 max_obs_chars: int = MAX_OBS_CHARS) -> None:
        found = resolve(source, env_id, allow_rejected=allow_rejected)
        turns = max_turns if max_turns is not None else (found.max_turns or DEFAULT_MAX_TURNS)
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
            raise ConfigError(f"max_turns must be a positive integer, got {turns!r}")
        if isinstance(level, bool) or not isinstance(level, int) or level < 1:
            raise ConfigError(f"level must be an integer >= 1, got {level!r}")
        self.found: Resolved = found
        self.source: EnvSource = found.env
        self.max_turns = turns
        self.level = level
        self.max_obs_chars = max_obs_chars
        self.seed: int | None = None
        self.turns = 0
        self._done = True
        self._handle = None
        self._fresh = False  # the handle holds an instance no episode has used yet
        self._owned = sandbox is None
        self._sandbox = sandbox if sandbox is not None else start_sandbox(limits, found.imports)
        try:
            self._handle = self._load(level=1)  # reads LEVELS before the level is asked for
            self.levels = self._levels()
            if self.level != 1:
                self._handle.close()
                self._handle = self._load()
            self._fresh = True
        except BaseException:
            self.close()
            raise

    @property
    def env_id(self) -> str:
        """The sha256 of the environment's code (its identity in an archive)."""
        return self.source.env_id

    @property
    def setting(self) -> str:
        return self.source.setting

    @property
    def done(self) -> bool:
        """True before the first reset, after the episode ended, and after an error."""
        return self._done

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        """Start the episode of instance ``seed`` in a fresh child: its first observation and the
        environment's info dict."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"seed must be an integer, got {seed!r}")
        if self._handle is None:
            raise EpisodeOver("this environment is closed")
        self._done = True
        if not self._fresh:
            self._handle.close()
            self._handle = None
            self._handle = self._load()
        self._fresh = False
        self.turns, self.seed = 0, seed
        what = f"reset(seed={seed})"
        reply = self._handle.reset(seed=seed)
        obs = validate_reset(reply, what, self.max_obs_chars)
        self._done = False
        return obs, reply[1]

    def step(self, action: str) -> Turn:
        """One agent reply. Raises :class:`EpisodeOver` when no episode runs, and the
        environment's failure (an :class:`~spadework.errors.EnvError`), which ends the episode."""
        if self._done or self._handle is None:
            raise EpisodeOver("no episode is running: call reset() first (the episode has ended "
                              "or not begun)")
        what = f"step() #{self.turns + 1}"
        try:
            result = validate_step(self._handle.step(action), what, self.max_obs_chars)
        except (EnvError, ContractError):
            self._done = True
            raise
        self.turns += 1
        truncated, limit = result.truncated, False
        if not (result.terminated or truncated) and self.turns >= self.max_turns:
            truncated = limit = True
        self._done = result.terminated or truncated
        reward = float(result.reward)
        assert math.isfinite(reward)  # validate_step holds rewards to finite numbers
        return Turn(result.obs, reward, result.terminated, truncated, dict(result.info),
                    self.turns, limit)

    # ------------------------------------------------------------------ privileged access

    def tools(self) -> list[dict]:
        """A tool-use environment's tools in the OpenAI function format (after a reset)."""
        if self.setting != "tool-use":
            raise ConfigError(f"{self.source.class_name} is a {self.setting} environment; only "
                              "tool-use environments declare tools")
        return self._live().tools()

    def solution(self) -> Any:
        """The environment's ``solution()`` for the current episode (privileged: for
        evaluation and hints, not for the agent)."""
        return self._live().solution()

    def hint(self) -> str | None:
        """The environment's own privileged hint, or None when it defines none."""
        return self._live().hint()

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Kill the episode's child and, when this environment started it, the fork server."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
        sandbox, self._sandbox = getattr(self, "_sandbox", None), None
        if sandbox is not None and self._owned:
            sandbox.close()
        self._done = True

    def __enter__(self) -> HostedEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _live(self):
        if self._handle is None:
            raise EpisodeOver("this environment is closed")
        return self._handle

    def _load(self, level: int | None = None):
        level = self.level if level is None else level
        return self._sandbox.load(self.source.code, max_turns=self.max_turns,
                                  class_name=self.source.class_name,
                                  level=None if level == 1 else level)

    def _levels(self) -> int:
        """The environment's levels, with ``self.level`` checked against them: its LEVELS, or
        for an archived environment the levels its check counted, fewer where its top levels
        gave one game (``spadework.env.stages.same_levels``), as a run plays it."""
        declared = levels_of(call_env("LEVELS", self._handle.levels))
        levels = min(declared, self.source.levels) if self.found.origin == "archive" else declared
        if self.level > levels:
            why = (f"declares LEVELS = {declared}" if levels == declared else
                   f"declares LEVELS = {declared}, but its levels above {levels} gave the same "
                   f"game as level {levels} when it was checked")
            raise ConfigError(f"level {self.level} was asked for, but {self.source.class_name} "
                              f"{why}; choose a level from 1 to {levels}")
        return levels


def start_sandbox(limits: Any, imports: frozenset[str]):
    """A started fork server for code with these imports (math_verify preloaded when needed),
    with ``limits`` or the default ones."""
    if limits is None:
        limits = Limits(math_verify="math_verify" in imports)
    sandbox = Sandbox(limits)
    sandbox.start()
    return sandbox

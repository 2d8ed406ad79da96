"""One spadework environment as a ``gymnasium.Env``, its code running in the sandbox.

Every episode runs in a fresh hardened child of a fork server (as the self-play loop plays
them): ``reset()`` forks one (the first is forked by the constructor, so a module that does not
load fails at ``make``), ``step()`` is a round trip over its pipe, and ``close()`` kills it and,
when this environment started the fork server itself, stops that too. A fork server is either
owned (the default: each environment starts its own, which costs a Python start plus the
runtime's import) or shared (``sandbox=`` a started :class:`spadework.sandbox.Sandbox`; many
environments, e.g. the members of a vector environment, then fork from one, and closing them
leaves it running). ``benchmarks/gym.py`` measures both.

Spaces are ``Text`` spaces with a declared charset and length (:mod:`spadework.gym.spaces`).
Observations are checked against the observation space and actions against the action space;
anything outside raises :class:`~spadework.errors.SpaceError` and is never altered. Results are
held to the environment contract (:func:`spadework.env.probe.validate_step`: a string
observation, a finite reward in [-1, 1], boolean flags, a dict info), else ContractError.

Seeding follows Gymnasium: ``reset(seed=s)`` plays instance ``s`` (the environment's own
``reset(seed=s)``), and ``reset()`` without a seed plays an instance drawn from ``np_random``,
so one seed at the first reset fixes every later episode. The instance played is in
``info["spadework"]["seed"]``; tool-use environments also put their tool schemas there
(``"tools"``). An episode ends by the environment's own flags, or truncated after ``max_turns``
steps, as in the self-play loop (``info["spadework"]["turn_limit"]`` then says so). The
environment's failures are raised as typed errors (EnvTimeout, EnvCrashed, EnvRaised, ...),
or, with ``on_error="truncate"``, end the episode: an empty observation, reward 0, truncated,
and the reason in ``info["spadework"]["error"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
from gymnasium.envs.registration import EnvSpec
from gymnasium.error import ResetNeeded

from spadework.errors import ConfigError, EnvError
from spadework.gym.registration import ENTRY_POINT, NAMESPACE, gym_id
from spadework.gym.spaces import require_in, text_space
from spadework.integrations.hosted import MAX_OBS_CHARS, HostedEnv
from spadework.integrations.source import Resolved
from spadework.types import EnvSource

#: The longest action, by default (the reference cuts actions at the same length).
MAX_ACTION_CHARS = 100_000
_ON_ERROR = ("raise", "truncate")
_NO_CAP = 1 << 62  # the contract's shape check without its length cap: the space judges length


def spec_id(found: Resolved) -> str:
    """The Gymnasium id of an environment made without gymnasium.make: a starter's registered
    id, else ``spadework/<file stem or first 12 hex digits of its env id>-v0``.

    >>> from spadework.integrations.source import resolve
    >>> spec_id(resolve("maze"))
    'spadework/Maze-v0'
    """
    if found.origin == "starter" and found.env.name:
        return gym_id(found.env.name)
    name = found.env.name if found.origin == "file" and found.env.name else found.env.env_id[:12]
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    return f"{NAMESPACE}/{safe}-v0"


class SpadeworkEnv(gymnasium.Env):
    """A sandboxed spadework environment behind the Gymnasium API (see the module docstring).

    ``source`` is a starter name, a ``.py`` module file, an archive file or run directory
    together with ``env_id``, or an :class:`~spadework.types.EnvSource`. ``max_turns`` defaults
    to the turn limit an archived environment was checked under, else 20. ``level`` is the
    difficulty level to play (1, the easiest, to the environment's ``LEVELS``). ``charset``,
    ``max_obs_chars`` and ``max_action_chars`` declare the spaces.
    """

    # render_fps: Gymnasium's checker asks for one; a text game has no frame rate of its own, and
    # "human" rendering prints each observation without waiting.
    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(self, source: str | Path | EnvSource, *, env_id: str | None = None,
                 max_turns: int | None = None, sandbox: Any = None, limits: Any = None,
                 charset: str | frozenset[str] | set[str] | None = None,
                 max_obs_chars: int = MAX_OBS_CHARS, max_action_chars: int = MAX_ACTION_CHARS,
                 render_mode: str | None = None, on_error: str = "raise",
                 allow_rejected: bool = False, level: int = 1) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be one of {self.metadata['render_modes']} or None, "
                              f"got {render_mode!r}")
        if on_error not in _ON_ERROR:
            raise ConfigError(f"on_error must be one of {', '.join(_ON_ERROR)}, got {on_error!r}")
        self.observation_space = text_space(max_obs_chars, charset)
        self.action_space = text_space(max_action_chars, charset)
        self._hosted: HostedEnv | None = None
        self._hosted = HostedEnv(source, env_id, level=level, max_turns=max_turns,
                                 sandbox=sandbox, limits=limits, allow_rejected=allow_rejected,
                                 max_obs_chars=_NO_CAP)
        self.source = self._hosted.source
        self.max_turns = self._hosted.max_turns
        self.level = level
        self.levels = self._hosted.levels
        # A spec that remakes this environment, so Gymnasium's tools (check_env, wrappers that
        # copy an environment) work on one made without gymnasium.make; gymnasium.make replaces
        # it with the registered one.
        self.spec = EnvSpec(
            id=spec_id(self._hosted.found), entry_point=ENTRY_POINT,
            kwargs={"source": source, "env_id": env_id, "max_turns": max_turns,
                    "sandbox": sandbox, "limits": limits, "charset": charset,
                    "max_obs_chars": max_obs_chars, "max_action_chars": max_action_chars,
                    "on_error": on_error, "allow_rejected": allow_rejected, "level": level})
        self.render_mode = render_mode
        self.on_error = on_error
        self._last_obs: str | None = None

    @property
    def env_id(self) -> str:
        """The sha256 of the environment's code (its identity in an archive)."""
        return self.source.env_id

    # ------------------------------------------------------------------ the Gymnasium API

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if options:
            raise ConfigError(f"reset() takes no options, got {sorted(options)}")
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        if self._hosted is None:
            raise ResetNeeded("this environment is closed")
        raw, env_info = self._hosted.reset(episode_seed)
        obs = self._observed(raw, f"reset(seed={episode_seed})")
        extra: dict[str, Any] = {"seed": episode_seed, "env_id": self.env_id}
        if self.source.setting == "tool-use":
            extra["tools"] = self._hosted.tools()
        self._last_obs = obs
        return obs, {**env_info, "spadework": extra}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._hosted is None or self._hosted.done:
            raise ResetNeeded("call reset() before step() (the episode has ended or not begun)")
        require_in(self.action_space, action, "the action",
                   "actions are text of the declared charset and length (make(charset=..., "
                   "max_action_chars=...))")
        try:
            turn = self._hosted.step(action)
        except EnvError as e:
            if self.on_error == "raise":
                raise
            self._last_obs = ""
            return "", 0.0, False, True, {"spadework": {"error": e.reason,
                                                         "error_type": type(e).__name__}}
        obs = self._observed(turn.obs, f"step() #{turn.turn}")
        extra: dict[str, Any] = {"turn": turn.turn}
        if turn.turn_limit:
            extra["turn_limit"] = True
        self._last_obs = obs
        return obs, turn.reward, turn.terminated, turn.truncated, {**turn.info, "spadework": extra}

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        text = self._last_obs or ""
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        """Kill the episode's child and, when this environment started it, the fork server."""
        hosted, self._hosted = getattr(self, "_hosted", None), None
        if hosted is not None:
            hosted.close()
        super().close()

    # ------------------------------------------------------------------ privileged access

    def solution(self) -> Any:
        """The environment's ``solution()`` for the current episode (privileged: for evaluation
        and hints, not for the agent)."""
        return self._live().solution()

    def hint(self) -> str | None:
        """The environment's own privileged hint, or None when it defines none."""
        return self._live().hint()

    # ------------------------------------------------------------------ helpers

    def _live(self) -> HostedEnv:
        if self._hosted is None:
            raise ResetNeeded("this environment is closed")
        return self._hosted

    def _observed(self, obs: str, what: str) -> str:
        return require_in(self.observation_space, obs, f"the observation of {what}",
                          "declare the characters this environment prints with make(charset=...) "
                          "or its length with max_obs_chars=")

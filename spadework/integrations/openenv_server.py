"""An environment as an OpenEnv server (the ``openenv`` extra: ``pip install 'spadework[openenv]'``).

``spadework openenv serve ARCHIVE --env ID`` (or :func:`build_app`) serves an archived (or
starter, or module-file) environment with OpenEnv's own FastAPI server: its WebSocket sessions
(``/ws``, what OpenEnv's ``EnvClient`` and ``GenericEnvClient`` speak; one episode at a time per
session, sessions side by side), its stateless ``/reset`` and ``/step``, ``/state``, ``/schema``
and ``/health``. Every session plays in its own sandboxed child forked from one fork server, so
the environment's code never runs in the server's process.

- The action is :class:`SpadeworkAction`: ``{"message": "<the agent's reply>"}``, the text the
  agent would write in the self-play loop (``\\boxed{...}`` for games, ``<tool_call>`` and
  ``<answer>`` for tool use).
- ``reset`` takes ``seed`` (the instance; without one, the next of a sequence drawn from the
  server's ``--seed``) and ``level`` (default: the server's ``--level``).
- The observation (:class:`SpadeworkObservation`) carries the text, OpenEnv's ``reward`` and
  ``done``, and ``truncated``, ``turn``, ``seed``, ``level``, the tool schemas of a tool-use
  environment at reset, and ``error`` when the environment failed (hung, crashed, broke the
  contract: the episode then ends with reward 0) or a step came with no episode running.
- ``state`` (:class:`SpadeworkState`) adds the environment's id and class, ``max_turns``,
  ``levels`` and the episode's total reward.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spadework.errors import ConfigError, ContractError, EnvError
from spadework.integrations.hosted import DEFAULT_MAX_TURNS, HostedEnv, start_sandbox
from spadework.integrations.source import resolve

try:
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ConfigError("spadework openenv needs OpenEnv: pip install 'spadework[openenv]'") from e


class SpadeworkAction(Action):
    """One agent reply, as text."""

    message: str = Field(description="The agent's reply: \\boxed{...} for games, <tool_call> "
                         "and <answer> tags for tool use")


class SpadeworkObservation(Observation):
    """What the agent sees after a reset or a step (``reward`` and ``done`` are OpenEnv's)."""

    text: str = Field(default="", description="The environment's observation")
    truncated: bool = Field(default=False, description="Ended by the turn limit")
    turn: int = Field(default=0, description="Steps taken in this episode")
    seed: int | None = Field(default=None, description="The instance played")
    level: int = Field(default=1, description="The difficulty level played")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="A tool-use "
                                        "environment's tools (OpenAI function format), at reset")
    error: str | None = Field(default=None, description="Why the episode ended abnormally")


class SpadeworkState(State):
    """The episode's state (``episode_id`` and ``step_count`` are OpenEnv's)."""

    env_id: str = ""
    class_name: str = ""
    seed: int | None = None
    level: int = 1
    levels: int = 1
    max_turns: int = DEFAULT_MAX_TURNS
    episode_reward: float = 0.0
    done: bool = True


class SpadeworkEnvironment(Environment[SpadeworkAction, SpadeworkObservation, SpadeworkState]):
    """One session's environment: a :class:`HostedEnv` forked from the server's shared sandbox.
    Made by the factory :func:`build_app` hands to OpenEnv's server."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, spec: _Served) -> None:
        super().__init__()
        self._spec = spec
        self._hosted: HostedEnv | None = None
        self._rng = random.Random(spec.seed)
        self._state = SpadeworkState(env_id=spec.source.env_id, class_name=spec.source.class_name,
                                     level=spec.level, max_turns=spec.max_turns)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              level: int | None = None, **kwargs: Any) -> SpadeworkObservation:
        if kwargs:
            raise ConfigError(f"reset takes seed, episode_id and level, not {sorted(kwargs)}")
        level = self._spec.level if level is None else level
        if seed is None:
            seed = self._rng.randrange(2**31 - 1)
        hosted = self._hosted
        if hosted is None or hosted.level != level:
            if hosted is not None:
                hosted.close()
                self._hosted = None
            hosted = self._hosted = self._spec.host(level)
        obs, _ = hosted.reset(seed)
        self._state = SpadeworkState(
            episode_id=episode_id, step_count=0, env_id=hosted.env_id,
            class_name=hosted.source.class_name, seed=seed, level=level, levels=hosted.levels,
            max_turns=hosted.max_turns, episode_reward=0.0, done=False)
        tools = hosted.tools() if hosted.setting == "tool-use" else []
        return SpadeworkObservation(text=obs, reward=0.0, done=False, seed=seed, level=level,
                                    tools=tools)

    def step(self, action: SpadeworkAction, timeout_s: float | None = None,
             **kwargs: Any) -> SpadeworkObservation:
        hosted, st = self._hosted, self._state
        if hosted is None or hosted.done:
            return self._ended("no episode is running: reset first (the episode has ended or "
                               "not begun)")
        try:
            turn = hosted.step(action.message)
        except (EnvError, ContractError) as e:
            st.done = True
            return self._ended(f"the environment failed: {e.reason}")
        st.step_count, st.episode_reward, st.done = turn.turn, st.episode_reward + turn.reward, turn.done
        return SpadeworkObservation(text=turn.obs, reward=turn.reward, done=turn.done,
                                    truncated=turn.truncated, turn=turn.turn, seed=st.seed,
                                    level=st.level, metadata=_jsonable(turn.info))

    @property
    def state(self) -> SpadeworkState:
        return self._state

    def close(self) -> None:
        hosted, self._hosted = self._hosted, None
        if hosted is not None:
            hosted.close()

    def _ended(self, why: str) -> SpadeworkObservation:
        st = self._state
        return SpadeworkObservation(text="", reward=0.0, done=True, turn=st.step_count,
                                    seed=st.seed, level=st.level, error=why)


class _Served:
    """What a server serves: the environment's code, resolved once, and the shared sandbox."""

    def __init__(self, source: str | Path, env_id: str | None, *, level: int, seed: int,
                 max_turns: int | None, allow_rejected: bool) -> None:
        found = resolve(source, env_id, allow_rejected=allow_rejected)
        self.source = found.env
        self.level, self.seed = level, seed
        self.max_turns = max_turns or found.max_turns or DEFAULT_MAX_TURNS
        self.sandbox = start_sandbox(None, found.imports)
        try:  # the first load says at once whether the code loads and the level exists
            self.host(level).close()
        except BaseException:
            self.sandbox.close()
            raise

    def host(self, level: int) -> HostedEnv:
        return HostedEnv(self.source, level=level, max_turns=self.max_turns, sandbox=self.sandbox)

    def close(self) -> None:
        self.sandbox.close()


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    """The info dict's JSON-safe entries (an environment may put anything in it)."""
    import json

    out = {}
    for k, v in info.items():
        try:
            json.dumps(v)
        except (TypeError, ValueError):
            v = repr(v)
        out[str(k)] = v
    return out


def build_app(source: str | Path, env_id: str | None = None, *, level: int = 1, seed: int = 0,
              max_turns: int | None = None, max_sessions: int = 8,
              allow_rejected: bool = False) -> tuple[Any, _Served]:
    """OpenEnv's FastAPI app serving the environment, and what it serves (close that when the
    app stops: it holds the fork server)."""
    if isinstance(level, bool) or not isinstance(level, int) or level < 1:
        raise ConfigError(f"level must be an integer >= 1, got {level!r}")
    served = _Served(source, env_id, level=level, seed=seed, max_turns=max_turns,
                     allow_rejected=allow_rejected)
    app = create_fastapi_app(lambda: SpadeworkEnvironment(served), SpadeworkAction,
                             SpadeworkObservation, max_concurrent_envs=max_sessions)
    return app, served


def serve(source: str | Path, env_id: str | None = None, *, host: str = "127.0.0.1",
          port: int = 8000, level: int = 1, seed: int = 0, max_turns: int | None = None,
          max_sessions: int = 8, allow_rejected: bool = False,
          ready: Callable[[str], None] | None = None) -> None:
    """Serve the environment until interrupted (what ``spadework openenv serve`` runs);
    ``ready(url)`` is called once the environment has loaded, before the server listens."""
    import uvicorn

    app, served = build_app(source, env_id, level=level, seed=seed, max_turns=max_turns,
                            max_sessions=max_sessions, allow_rejected=allow_rejected)
    if ready is not None:
        ready(f"http://{host}:{port}")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        served.close()

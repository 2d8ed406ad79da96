"""Archived environments as a verifiers environment (the ``verifiers`` extra: ``pip install
'spadework[verifiers]'``; verifiers 0.4, its ``verifiers.v1`` stack).

:func:`load_environment` returns a multi-turn ``vf.Env`` over chosen environments of a run's
archive (by status, skill, the unhinted win-rate band of their latest plays, or ids), one task per
environment and seed, played at the level the archive says each plays next (or a level given).
The first user message is what the self-play loop's unhinted arm shows (the observation of
``reset(seed)`` with the move format); each reply is stepped in spadework's sandbox (the
archive's code never runs in the caller's process) and the observation goes back as the next user
message until the episode ends; the rubric is the environment's own reward, summed over the
episode (``env_reward``), with ``won`` as a metric.

verifiers finds the taskset by id: ``spadework-verifiers`` (the top-level package ``spadework_verifiers``
re-exports this module), so its own command runs it too::

    vf-eval spadework-verifiers --env.taskset.archive runs/main/archive.sqlite -m MODEL \\
        --client.base-url http://127.0.0.1:8000/v1 -n 8 -r 2 --no-push

The taskset's settings are :class:`SpadeworkTasksetConfig`'s fields. Replies are sampled with
:class:`ChatHarness`, one chat completion per turn through the rollout's endpoint, executing no
code and needing no container.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spadework.archive import Archive, archive_path
from spadework.errors import ConfigError, ContractError, EnvError
from spadework.integrations.hosted import HostedEnv
from spadework.integrations.source import play_settings
from spadework.play_messages import first_message
from spadework.sandbox import Limits, Sandbox

try:
    import httpx
    import verifiers.v1 as vf
    from verifiers.v1.dialects.chat import message_to_wire
    from verifiers.v1.types import SystemMessage, UserMessage
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ConfigError("spadework.integrations.verifiers needs verifiers: pip install "
                      "'spadework[verifiers]'") from e

#: The taskset id verifiers imports (as the module ``spadework_verifiers``).
TASKSET_ID = "spadework-verifiers"
_SANDBOX: Any = None
_SANDBOX_LOCK = threading.Lock()


def _sandbox() -> Any:
    """One fork server per process, started on first use, shared by every rollout (the sandbox
    is thread-safe; each episode still gets its own child)."""
    global _SANDBOX
    with _SANDBOX_LOCK:
        if _SANDBOX is None:
            _SANDBOX = Sandbox(Limits(math_verify=True))
            _SANDBOX.start()
        return _SANDBOX


class SpadeworkData(vf.TaskData):
    """One task: an archived environment, the instance and level it plays."""

    archive: str
    env_id: str
    class_name: str
    setting: str
    seed: int
    level: int
    max_turns: int


class SpadeworkTask(vf.Task[SpadeworkData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def env_reward(self, trace) -> float:
        """The environment's own reward, summed over the episode."""
        return float(sum(trace.info.get("step_rewards", [])))

    @vf.metric
    async def won(self, trace) -> float:
        return float(bool(trace.info.get("won")))


class SpadeworkTasksetConfig(vf.TasksetConfig):
    """Which archived environments, instances and levels become tasks."""

    archive: str = ""  # an archive file or a run directory
    status: str = "accepted"
    skill: str | None = None
    band: tuple[float, float] | None = None  # unhinted win rate of the latest plays, inclusive
    env_ids: list[str] = []  # ids or 4+ hex prefixes (overrides status, skill, band)
    seeds: list[int] = [0]
    level: int | None = None  # default: the level each plays next in the run
    max_turns: int | None = None  # default: the limit each was checked under


def choose(cfg: SpadeworkTasksetConfig) -> list[SpadeworkData]:
    """The tasks ``cfg`` names, in archive order; ConfigError when there are none."""
    if not cfg.archive:
        raise ConfigError("name the run's archive: load_environment(archive=...) or "
                          "--env.taskset.archive PATH")
    path = Path(cfg.archive)
    path = archive_path(path) if path.is_dir() else path
    with Archive.open_read_only(path) as a:
        recs = ([a.find_env(e) for e in cfg.env_ids] if cfg.env_ids
                else a.list_envs(status=cfg.status, skill=cfg.skill))
        if cfg.band is not None and not cfg.env_ids:
            lo, hi = cfg.band
            stats = {r.env_id: a.env_stats(r.env_id) for r in recs}
            recs = [r for r in recs if stats[r.env_id] is not None
                    and lo <= stats[r.env_id].win_rate <= hi]
        levels = a.current_levels()
    rows = []
    for r in recs:
        turns, _, level = play_settings(r, levels, cfg.level, cfg.max_turns)
        rows += [SpadeworkData(id=f"{r.env_id[:12]}-l{level}-s{seed}", prompt=None,
                               archive=str(path), env_id=r.env_id, class_name=r.class_name or "",
                               setting=r.setting, seed=seed, level=level, max_turns=turns)
                 for seed in cfg.seeds]
    if not rows:
        raise ConfigError(f"no environments in {path} match status={cfg.status}, "
                          f"skill={cfg.skill}, band={cfg.band}, env_ids={cfg.env_ids}")
    return rows


class SpadeworkTaskset(vf.Taskset[SpadeworkTask, SpadeworkTasksetConfig]):
    def load(self) -> Iterator[SpadeworkTask]:
        for data in choose(self.config):
            yield SpadeworkTask(data, self.config.task)


class ChatHarnessConfig(vf.HarnessConfig):
    pass


class ChatHarness(vf.Harness[ChatHarnessConfig]):
    """One chat completion per turn through the rollout's endpoint (which records it on the
    trace): no tools, no code executed, no container."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_):
        system, prompt = self.resolve_prompt(data)
        msgs = [UserMessage(content=prompt)] if isinstance(prompt, str) else list(prompt or [])
        if system:
            msgs = [SystemMessage(content=system), *[m for m in msgs if m.role != "system"]]
        async with httpx.AsyncClient(timeout=None) as client:
            r = await client.post(f"{endpoint}/chat/completions",
                                  json={"model": ctx.model,
                                        "messages": [message_to_wire(m) for m in msgs]},
                                  headers={"Authorization": f"Bearer {secret}"})
        return vf.ProgramResult(exit_code=0 if r.is_success else 1, stdout="", stderr=r.text)


class SpadeworkEnvConfig(vf.EnvConfig):
    # the episode's own turn limit ends it first; this is verifiers' backstop
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig(), max_turns=256)


class SpadeworkEnv(vf.Env[SpadeworkEnvConfig]):
    """Plays a task's environment in spadework's sandbox, a reply a step."""

    async def run(self, task, agents):
        d = task.data
        hosted = await asyncio.to_thread(HostedEnv, d.archive, d.env_id, level=d.level,
                                         max_turns=d.max_turns, sandbox=_sandbox())
        rewards: list[float] = []
        try:
            obs, _ = await asyncio.to_thread(hosted.reset, d.seed)
            async with agents.player.interaction(task) as chat:
                info = chat.trace.info
                info["step_rewards"] = rewards
                segment = await chat.turn(first_message(d.setting, obs, None))
                while not segment.terminated:
                    try:
                        turn = await asyncio.to_thread(hosted.step, segment.last_reply or "")
                    except (EnvError, ContractError) as e:
                        info["error"] = e.reason
                        break
                    rewards.append(turn.reward)
                    if turn.done:
                        info["won"] = turn.terminated and turn.reward >= 1.0
                        info["turn_limit"] = turn.turn_limit
                        break
                    segment = await chat.turn(turn.obs)
        finally:
            await asyncio.to_thread(hosted.close)


__all__ = ["ChatHarness", "SpadeworkEnv", "SpadeworkTaskset"]


def load_environment(archive: str | Path, filter: dict[str, Any] | None = None, *,
                     seeds: tuple[int, ...] = (0,), level: int | None = None,
                     max_turns: int | None = None) -> Any:
    """A ``vf.Env`` over the archive's environments chosen by ``filter`` (keys ``status``,
    ``skill``, ``band`` as ``(lo, hi)``, ``env_ids``; default: every accepted one), one task per
    environment and seed (see the module docstring)."""
    allowed = {"status", "skill", "band", "env_ids"}
    bad = set(filter or {}) - allowed
    if bad:
        raise ConfigError(f"filter keys are {', '.join(sorted(allowed))}; not {sorted(bad)}")
    import spadework_verifiers  # noqa: F401 - verifiers imports the taskset by this name

    taskset = {"id": TASKSET_ID, "archive": str(archive), "seeds": list(seeds), "level": level,
               "max_turns": max_turns, **(filter or {})}
    return vf.load_environment(vf.resolve_env_config({"taskset": taskset}))

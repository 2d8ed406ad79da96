"""Joining or starting a Ray cluster, and placing a run's processes on it.

:func:`connect` joins ``[ray] address`` or starts a local cluster on 127.0.0.1 (its logical
CPUs sized to the plan, so that actors which mostly wait on each other are not refused for lack
of cores), quietly: Ray's own log lines stay in its session folder, not the user's terminal.
:class:`PlacementGroup` reserves the plan's bundles in one placement group and hands out each
process's actor options; :func:`placed` reads back which node each bundle landed on.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import spadework
from spadework.distributed.plan import Placement, placement_plan
from spadework.errors import ConfigError
from spadework.settings.ray import RayConfig


def require_ray() -> Any:
    """The ``ray`` module, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ConfigError("--ray needs Ray: pip install 'spadework[cluster]' (or ray>=2.40)") from e
    return ray


def connect(rc: RayConfig, *, runtime_env: Mapping[str, Any] | None = None) -> bool:
    """Join ``rc.address`` or start a local cluster; True when this call started Ray (and its
    caller should shut it down). A running ``ray.init`` in this process is reused as is."""
    if rc.address is None:
        # A local cluster stays on the loopback interface: Ray would otherwise advertise this
        # machine's outward address. Its switch is named for macOS and Windows and read when
        # ray is imported; where ray was imported already, its constant is set the same way.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = require_ray()
    if ray.is_initialized():
        return False
    if rc.address is None:
        constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
        if constants is not None and hasattr(constants, "ENABLE_RAY_CLUSTER"):
            constants.ENABLE_RAY_CLUSTER = os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] not in ("0", "false", "False")
    env = dict(runtime_env or {})
    env_vars = {"RAY_DEDUP_LOGS": "0", **dict(env.pop("env_vars", {}))}
    if rc.address is None:
        env_vars["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"]
    # Ray's worker processes import spadework from wherever this process does.

    root = os.path.dirname(os.path.dirname(os.path.abspath(spadework.__file__)))
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env_vars["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *filter(None, env_vars.get(
        "PYTHONPATH", "").split(os.pathsep))]))
    kwargs: dict[str, Any] = {"runtime_env": {**env, "env_vars": env_vars},
                              "logging_level": logging.ERROR, "log_to_driver": False,
                              "configure_logging": True}
    if rc.address is None:
        need = sum(p.cpus for p in placement_plan(_local(rc)))
        kwargs.update(address="local", num_cpus=max(int(need) + 1, os.cpu_count() or 1),
                      num_gpus=rc.gpus_per_node or None, include_dashboard=False)
    else:
        kwargs["address"] = rc.address
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ConfigError(f"cannot start or join the Ray cluster ({rc.address or 'local'}): {e}") from e
    return True


def _local(rc: RayConfig) -> RayConfig:
    """``rc`` on one local node, the machine's GPUs as given."""
    import dataclasses

    return dataclasses.replace(rc, nodes=1, cpus_per_node=None)


class PlacementGroup:
    """The plan's bundles reserved in one Ray placement group (PACK: nodes filled in turn)."""

    def __init__(self, rc: RayConfig, *, learner: bool = True, engines: bool = True,
                 timeout_s: float = 120.0) -> None:
        ray = require_ray()
        from ray.util.placement_group import placement_group

        local = rc.address is None
        self.plan = [p for p in placement_plan(_local(rc) if local else rc, learner=learner, engines=engines)
                     if p.role != "driver"]
        self.group = placement_group([p.bundle for p in self.plan], strategy="PACK")
        ready, _ = ray.wait([self.group.ready()], timeout=timeout_s)
        if not ready:
            ray.util.remove_placement_group(self.group)
            raise ConfigError(f"Ray could not reserve the plan's {len(self.plan)} bundles within "
                              f"{timeout_s:g} s (cluster resources: {ray.cluster_resources()}); "
                              "check the [ray] shape against the cluster (spadework run --dry-run)")

    def options(self, role: str, index: int) -> dict[str, Any]:
        """Actor options for process ``index`` of ``role`` (its bundle's resources)."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        k = next(k for k, p in enumerate(self.plan) if p.role == role and p.index == index)
        p = self.plan[k]
        return {"num_cpus": p.cpus, "num_gpus": len(p.gpus),
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    placement_group=self.group, placement_group_bundle_index=k)}

    def placed(self) -> list[tuple[Placement, str]]:
        """Each planned process with the node (address) its bundle was reserved on."""
        ray = require_ray()
        from ray.util import placement_group_table

        nodes = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
        table = placement_group_table(self.group)
        where = table.get("bundles_to_node_id", {})
        return [(p, nodes.get(where.get(k, ""), "?")) for k, p in enumerate(self.plan)]

    def remove(self) -> None:
        ray = require_ray()
        ray.util.remove_placement_group(self.group)


def stop_actors(actors: list[Any], *, timeout_s: float = 60.0) -> None:
    """Ask each actor to ``close()`` (its sandbox, process group or server), then kill it; an
    actor already dead has nothing to close."""
    ray = require_ray()
    for actor in actors:
        try:
            ray.get(actor.close.remote(), timeout=timeout_s)
        except Exception:  # noqa: BLE001 (dead, or its close failed: it is killed either way)
            pass
        ray.kill(actor, no_restart=True)

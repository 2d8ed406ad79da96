"""The placement plan: which process runs on which node with which GPUs (``--dry-run``).

A pure function of ``[ray]`` and the cluster's shape; nothing is started. Generation servers
are placed first (a tensor-parallel server's GPUs on one node), then the learner's replicas,
each node filled before the next (first fit); rollout workers, CPU only, go round-robin over
the nodes with CPUs to spare. The driver (the loop, the archive, the checker's sandbox) runs
where ``spadework run`` runs, on node 0. A real run asks Ray for the same bundles in one
placement group and prints where Ray put them (:func:`spadework.distributed.cluster.placed`).
"""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError
from spadework.settings.ray import RayConfig

#: Parameter counts of the paper presets' models (for the learner's memory estimate).
KNOWN_PARAMS = {"Qwen/Qwen3-4B": 4.0e9, "Qwen/Qwen3-30B": 30.5e9}
#: Bytes per parameter a full fine-tune keeps on each replica: bf16 weights and gradients, and
#: AdamW's two moments in the parameters' dtype (torch keeps them in it).
BYTES_PER_PARAM = 8


@dataclass(frozen=True)
class Placement:
    """One process of the plan: its role and index, the node, its GPUs there, its CPUs."""

    role: str  # "driver", "generation", "learner", "rollout"
    index: int
    node: int
    gpus: tuple[int, ...]
    cpus: float

    @property
    def bundle(self) -> dict[str, float]:
        """The Ray resource bundle this process asks for."""
        return {"CPU": self.cpus, **({"GPU": float(len(self.gpus))} if self.gpus else {})}


def placement_plan(rc: RayConfig, *, learner: bool = True, engines: bool = True) -> list[Placement]:
    """Every process of a run on the cluster ``rc`` describes; ConfigError when it does not fit.
    ``learner`` / ``engines`` false: a run without training / without generation servers (a
    scripted policy) has none of them.

    >>> rc = RayConfig(engine="vllm", generation_servers=2, gpus_per_server=2, learner_workers=4,
    ...                gpus_per_learner=1, rollout_workers=3, nodes=1, gpus_per_node=8)
    >>> [(p.role, p.node, p.gpus) for p in placement_plan(rc)][:4]
    [('driver', 0, ()), ('generation', 0, (0, 1)), ('generation', 0, (2, 3)), ('learner', 0, (4,))]
    """
    free = [list(range(rc.gpus_per_node)) for _ in range(rc.nodes)]
    cpus = [float(rc.cpus_per_node) if rc.cpus_per_node else float("inf") for _ in range(rc.nodes)]
    out = [Placement("driver", 0, 0, (), 1.0)]
    cpus[0] -= 1.0

    def take(role: str, index: int, n_gpus: int, n_cpus: float, node_hint: int = 0) -> None:
        order = [(node_hint + k) % rc.nodes for k in range(rc.nodes)] if not n_gpus else range(rc.nodes)
        for node in order:
            if len(free[node]) >= n_gpus and cpus[node] >= n_cpus:
                gpus, free[node] = tuple(free[node][:n_gpus]), free[node][n_gpus:]
                cpus[node] -= n_cpus
                out.append(Placement(role, index, node, gpus, n_cpus))
                return
        have = ", ".join(f"node {n}: {len(free[n])} GPUs, {cpus[n]:g} CPUs free" for n in range(rc.nodes))
        raise ConfigError(f"the cluster has no room for {role} {index} ({n_gpus} GPUs, {n_cpus:g} CPUs; "
                          f"{have}): add nodes (nodes, gpus_per_node, cpus_per_node in [ray]) or ask "
                          "for fewer processes")

    for k in range(rc.generation_servers if engines else 0):
        take("generation", k, rc.gpus_per_server, 1.0)
    for k in range(rc.learner_workers if learner else 0):
        take("learner", k, rc.gpus_per_learner, 1.0)
    for k in range(rc.rollout_workers):
        take("rollout", k, 0, rc.cpus_per_rollout_worker, node_hint=k)
    return out


def format_plan(rc: RayConfig, plan: list[Placement], *, model: str | None, preset: str,
                full_fine_tune: bool) -> str:
    """The plan as the lines ``--dry-run`` prints, with the learner's memory estimate."""
    where = rc.address or ("a local Ray cluster on 127.0.0.1" if rc.nodes == 1 else
                           "a cluster (join it with --ray ADDRESS)")
    lines = [f"placement plan for preset {preset} ({model or 'the default model'}) on {where}: "
             f"{rc.nodes} node(s) x {rc.gpus_per_node} GPUs"
             + (f", {rc.cpus_per_node} CPUs" if rc.cpus_per_node else "")]
    what = {"driver": "the loop, the archive and the checker's sandbox",
            "generation": ("transformers generation server (spadework serve)" if rc.engine == "serve"
                           else f"{rc.engine} generation server (OpenAI-compatible)"),
            "learner": f"learner replica ({'NCCL' if rc.gpus_per_learner else 'gloo'} "
                       f"{'FSDP, 1/' + str(rc.learner_workers) + ' of the weights' if rc.fsdp else 'data parallel'})",
            "rollout": "rollout worker (its own sandbox fork server)"}
    for node in sorted({p.node for p in plan}):
        lines.append(f"  node {node}:")
        here = [p for p in plan if p.node == node]
        for p in (p for p in here if p.role != "rollout"):
            gpus = f"GPU {','.join(map(str, p.gpus))}" if p.gpus else "no GPU"
            lines.append(f"    {p.role} {p.index}: {gpus}, {p.cpus:g} CPU  ({what[p.role]})")
        workers = [p for p in here if p.role == "rollout"]
        if workers:
            lines.append(f"    rollout {', '.join(str(p.index) for p in workers)}: no GPU, "
                         f"{workers[0].cpus:g} CPU each  ({len(workers)} x {what['rollout']})")
    used = sum(len(p.gpus) for p in plan)
    lines.append(f"  GPUs used: {used} of {rc.nodes * rc.gpus_per_node}")
    params = KNOWN_PARAMS.get(model or "")
    if params and full_fine_tune:
        need = params * BYTES_PER_PARAM / 2**30 / (rc.learner_workers if rc.fsdp else 1)
        lines.append(f"  learner memory: a full fine-tune of {params / 1e9:.1f}B parameters keeps about "
                     f"{need:.0f} GiB per replica (bf16 weights and gradients, AdamW moments"
                     + (f", sharded {rc.learner_workers} ways" if rc.fsdp else "") + "), activations not counted"
                     + ("; more than one 80 GiB GPU holds: set [ray] fsdp = true (sharded replicas)"
                        if need > 80 else ""))
    return "\n".join(lines)

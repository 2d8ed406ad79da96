"""Data-parallel learner replicas: which micro-batches each runs, how their gradients and
figures meet, and the sharded (FSDP) variant. Used by ``spadework.train.Learner`` when it is
given a :class:`DataParallel`; the process group itself is the caller's
(``spadework.distributed.learner`` starts one per group of Ray actors).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spadework.errors import ConfigError
from spadework.train.batch import Sample  # noqa: F401 (the doctest's)
from spadework.train.forward import Row
from spadework.types import Sampling  # noqa: F401 (the doctest's)


@dataclass(frozen=True)
class DataParallel:
    """This learner's place among ``world`` data-parallel replicas of one model, joined by a
    ``torch.distributed`` process group (gloo on CPU, NCCL on GPUs) that the caller initialised
    (``spadework.distributed.learner`` does, on Ray actors).

    Every replica gets the whole batch and runs its share of the micro-batches
    (:func:`shard_micro_batches`), each with the loss weights of the whole batch; the gradients
    are summed across replicas (one all-reduce) before clipping, so every replica takes the same
    step as one process running every micro-batch (up to the order of float additions), and
    the step's figures are the whole batch's. With ``shard`` the replicas also split the
    weights (FSDP) instead of each holding them all."""

    rank: int
    world: int
    group: Any = None
    shard: bool = False
    """FSDP: each replica keeps 1/world of every weight, gradient and AdamW moment (torch's
    ``fully_shard`` on each decoder layer and the root); a layer's weights are gathered for its
    forward and backward and its gradients reduce-scattered, so every replica runs the same
    number of passes (a replica with fewer micro-batches repeats one at zero weight). Weights
    come back whole (gathered by every replica, written by rank 0) for checkpoints and exports."""

    def __post_init__(self) -> None:
        if not (isinstance(self.world, int) and self.world >= 1 and 0 <= self.rank < self.world):
            raise ConfigError(f"DataParallel needs 0 <= rank < world, got rank {self.rank} of {self.world}")


def shard_micro_batches(micros: Sequence[Sequence[Row]], rank: int, world: int) -> list[Sequence[Row]]:
    """The micro-batches replica ``rank`` of ``world`` runs: largest first, each to the replica
    with the fewest padded tokens so far (ties to the lowest rank), the same on every replica.

    >>> s = lambda n: Row((Sample("agent", (1,) * n, (2,), (-0.1,), 0.0, Sampling(1.0)),))
    >>> micros = [[s(9)], [s(2), s(3)], [s(5)]]
    >>> [[len(m) for m in shard_micro_batches(micros, r, 2)] for r in range(2)]
    [[1], [2, 1]]
    """
    load = [0] * world
    owner: dict[int, int] = {}
    for k in sorted(range(len(micros)), key=lambda k: -len(micros[k]) * max(x.width for x in micros[k])):
        r = min(range(world), key=lambda r: (load[r], r))
        owner[k] = r
        load[r] += len(micros[k]) * max(x.width for x in micros[k])
    return [m for k, m in enumerate(micros) if owner[k] == rank]


def sum_gradients(params: Sequence[Any], dp: DataParallel) -> None:
    """Sum the replicas' gradients of ``params`` (one flat all-reduce): each then holds the
    whole batch's."""
    import torch
    import torch.distributed as dist

    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                      for p in params])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=dp.group)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).clone()
        offset += n


def merge_figures(dp: DataParallel, sums: Counter[str], by_role: dict[str, Counter[str]],
                  maxima: dict[str, float], ratio_sums: dict[str, Counter[str]],
                  ratio_max: dict[str, float]) -> None:
    """Merge the replicas' step figures in place (in rank order, the same on every replica),
    so that every replica reports the whole batch's."""
    import torch.distributed as dist

    mine = (dict(sums), {r: dict(c) for r, c in by_role.items()}, dict(maxima),
            {k: dict(c) for k, c in ratio_sums.items()}, dict(ratio_max))
    parts: list[Any] = [None] * dp.world
    dist.all_gather_object(parts, mine, group=dp.group)
    sums.clear()
    for c in (*by_role.values(), *ratio_sums.values()):
        c.clear()
    ratio_max.clear()
    for p_sums, p_roles, p_max, p_rsums, p_rmax in parts:
        sums.update(p_sums)
        for role, c in p_roles.items():
            by_role[role].update(c)
        for key, value in p_max.items():
            maxima[key] = max(maxima[key], value)
        for key, c in p_rsums.items():
            ratio_sums[key].update(c)
        for key, value in p_rmax.items():
            ratio_max[key] = max(ratio_max.get(key, value), value)


def fully_shard_model(model: Any, dp: DataParallel, logprobs: Callable[..., Any]) -> Any:
    """FSDP over ``dp``'s replicas: each decoder layer its own unit, and a root module whose
    forward is ``logprobs(model, ids, attn, select, targets, temps, chunk, entropy, compute,
    positions)``
    (``forward.selected_logprobs``: the learner runs the decoder and the LM head separately, so the
    model's own forward, where a root's hooks would sit, is never called).
    FSDP averages the replicas' gradients; the learner scales each replica's loss by the number
    of replicas before its backward pass, so that the result is their sum, as the loss weights
    (the whole batch's normalisation) want. Returns the root."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    class SelectedLogprobs(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return logprobs(self.inner, *args)

    device = next(model.parameters()).device.type
    mesh = init_device_mesh(device, (dp.world,))
    layers = [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]
    if not layers:
        raise ConfigError(f"fsdp found no decoder layers in {type(model).__name__} to shard")
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    return fully_shard(SelectedLogprobs(model), mesh=mesh)


def whole(t: Any) -> Any:
    """A sharded tensor (DTensor) gathered whole; any other tensor as it is."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t



def sharded_optimizer_state(root: Any, optimizer: Any) -> dict[str, Any]:
    """A sharded optimizer's whole state, by parameter name (every replica must call it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(root, optimizer, options=StateDictOptions(full_state_dict=True,
                                                                             cpu_offload=True))


def load_sharded_optimizer_state(root: Any, optimizer: Any, state: dict[str, Any]) -> None:
    """Inverse of :func:`sharded_optimizer_state`: each replica keeps its shard of ``state``."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(root, optimizer, optim_state_dict=state,
                             options=StateDictOptions(full_state_dict=True))

"""Rollout workers: Ray actors that play an iteration's episodes, and the dispatcher that feeds them.

Each :class:`RolloutWorker` owns a sandbox (its own fork server, hardened children) and a policy
built in the actor from a picklable zero-argument ``build`` (an OpenAI-compatible client of a
generation server in a real run; the tests' scripted policy). :class:`RayPlayer` is a drop-in for
``rollout.play``: it cuts the jobs into contiguous chunks, keeps every worker busy with one
chunk at a time, and puts the episodes back in job order. Because ``play`` seeds each episode's
turns from the job itself (``rollout.turn_seed``), the episodes do not depend on how the jobs
were cut: the same as one process playing them all (identical with a deterministic policy).

Exactly once: a chunk's episodes are taken from one completed ``play`` call, and only the driver
writes to the archive, after every chunk is in. A worker that dies mid-chunk (its process
killed, its node lost) is replaced by a fresh actor with the same resources and the chunk is
played again from the start by the next free worker; what the dead worker had played is never
seen. An exception raised inside ``play`` (a bug, not a lost worker) is raised here.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from spadework.distributed.cluster import stop_actors
from spadework.errors import PolicyError
from spadework.rollout import PlayConfig, PlayJob, play
from spadework.sandbox import Limits, Sandbox
from spadework.types import Episode


class RolloutWorker:
    """One rollout actor (wrapped with ``ray.remote`` by :class:`RayPlayer`)."""

    def __init__(self, build: Callable[[], Any], limits: dict[str, Any]) -> None:
        self.policy = build()
        self.sandbox = Sandbox(Limits(**limits))
        self.sandbox.start()
        self.played = 0

    def play(self, jobs: Sequence[PlayJob], cfg: PlayConfig, seed: int) -> list[Episode]:
        out = play(self.policy, self.sandbox, jobs, cfg, seed=seed)
        self.played += len(out)
        return out

    def info(self) -> dict[str, Any]:
        """Where this worker runs and what it played (for placement reports and tests)."""
        import socket

        return {"pid": os.getpid(), "host": socket.gethostname(), "played": self.played}

    def close(self) -> None:
        self.sandbox.close()


def chunks_of(n_jobs: int, workers: int, per_worker: int) -> list[range]:
    """Contiguous index ranges covering ``n_jobs`` jobs, about ``per_worker`` per worker.

    >>> [list(r) for r in chunks_of(5, 2, 1)]
    [[0, 1, 2], [3, 4]]
    >>> chunks_of(0, 2, 4)
    []
    """
    if n_jobs == 0:
        return []
    size = max(1, math.ceil(n_jobs / (workers * per_worker)))
    return [range(a, min(a + size, n_jobs)) for a in range(0, n_jobs, size)]


class RayPlayer:
    """Plays jobs on ``workers`` :class:`RolloutWorker` actors; see the module docstring.

    Worker ``k`` builds its policy with ``builds[k % len(builds)]`` (one builder per engine).
    ``options(k)`` gives the ``.options(...)`` of worker ``k``'s actor (its resources and
    placement-group bundle), used again for a replacement. ``per_worker`` chunks per worker per
    call balance the load (a worker that finishes early takes the next chunk). ``replaced``
    counts workers replaced over the player's life.
    """

    def __init__(self, builds: Sequence[Callable[[], Any]], limits: dict[str, Any], workers: int, *,
                 options: Callable[[int], dict[str, Any]] = lambda k: {"num_cpus": 1},
                 per_worker: int = 4, heartbeat_s: float = 2.0) -> None:
        import ray

        self._cls = ray.remote(RolloutWorker)
        if not builds:
            raise PolicyError("RayPlayer needs at least one policy builder")
        self.builds, self.limits, self.options = list(builds), dict(limits), options
        self.per_worker, self.heartbeat_s = per_worker, heartbeat_s
        self.workers = [self._start(k) for k in range(workers)]
        self.replaced = 0
        self.last: dict[str, Any] = {}
        ray.get([w.info.remote() for w in self.workers])  # each built its policy and sandbox

    def _start(self, k: int) -> Any:
        return self._cls.options(**self.options(k)).remote(self.builds[k % len(self.builds)], self.limits)

    def __call__(self, jobs: Sequence[PlayJob], cfg: PlayConfig, *, seed: int,
                 progress: Callable[[int, int], None] | None = None) -> list[Episode]:
        """Every job played once, episodes in job order (``rollout.play``'s contract)."""
        import ray
        from ray.exceptions import RayActorError

        chunks = chunks_of(len(jobs), len(self.workers), self.per_worker)
        todo = deque(range(len(chunks)))
        idle = deque(range(len(self.workers)))
        running: dict[Any, tuple[int, int]] = {}  # object ref -> (worker, chunk)
        results: dict[int, list[Episode]] = {}
        replaced, start, beat = 0, time.monotonic(), 0.0
        total = len(jobs) * cfg.max_turns
        while todo or running:
            while todo and idle:
                w, c = idle.popleft(), todo.popleft()
                ref = self.workers[w].play.remote([jobs[i] for i in chunks[c]], cfg, seed)
                running[ref] = (w, c)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=self.heartbeat_s)
            for ref in ready:
                w, c = running.pop(ref)
                try:
                    results[c] = ray.get(ref)
                except RayActorError:  # the worker died (killed, OOM, node lost): replace, replay
                    ray.kill(self.workers[w], no_restart=True)
                    self.workers[w] = self._start(w)
                    replaced += 1
                    todo.appendleft(c)
                except ray.exceptions.RayTaskError as e:
                    raise e.as_instanceof_cause() from None
                idle.append(w)
            now = time.monotonic()
            if progress is not None and (ready or now - beat >= self.heartbeat_s):
                beat = now
                progress(sum(len(chunks[c]) for c in results) * cfg.max_turns, total)
        self.replaced += replaced
        self.last = {"workers": len(self.workers), "chunks": len(chunks), "replaced": replaced,
                     "seconds": round(time.monotonic() - start, 3)}
        out = [ep for c in range(len(chunks)) for ep in results[c]]
        if len(out) != len(jobs):  # the contract the archive's natural keys rely on
            raise PolicyError(f"rollout workers returned {len(out)} episodes for {len(jobs)} jobs")
        return out

    def close(self) -> None:
        stop_actors(self.workers)
        self.workers = []

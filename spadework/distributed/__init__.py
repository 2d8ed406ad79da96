"""Scale-out on Ray (``spadework run --ray``; the ``cluster`` extra): the loop's parts as actors.

- :mod:`~spadework.settings.ray`: the ``[ray]`` section (no Ray needed to import it);
- :mod:`~spadework.distributed.plan`: which process on which node and GPU (``--dry-run``);
- :mod:`~spadework.distributed.cluster`: joining or starting a cluster, the placement group;
- :mod:`~spadework.distributed.rollout`: rollout workers and the dispatcher the play stage uses;
- :mod:`~spadework.distributed.learner`: data-parallel learner replicas;
- :mod:`~spadework.distributed.engines`: generation servers (``serve``, vLLM, SGLang) and the
  weight sync into them;
- :mod:`~spadework.distributed.run`: all of it built for ``loop.run`` and torn down after.

The loop itself is the same code path as the single-process run.
"""

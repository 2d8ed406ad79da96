"""What the command line runs that needs a model: load it, open the run's archive and sandbox,
call one library function. Kept beside ``cli.py`` so that the library below never loads a model
on its own initiative, and every check that needs no model runs before one is loaded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from spadework.designer.run import DesignConfig, DesignSummary


def design_into_run_dir(run_dir: str | Path, *, n: int, cfg: DesignConfig, max_turns: int,
                        model: str | None = None, seed: int = 0, device: str = "cpu",
                        progress: Callable[[str], None] | None = None) -> DesignSummary:
    """``spadework design``: load the model, the default corpus and a sandbox, design ``n``
    slots into ``run_dir/archive.sqlite`` as the iteration after the last one designed there,
    checked under the turn limit ``max_turns`` they are meant to be played with, and summarise."""
    from spadework.archive import Archive, archive_path
    from spadework.default_corpus import load_default_corpus
    from spadework.designer.run import design_environments, summarize
    from spadework.env.checker import CheckConfig
    from spadework.policy.hf import load_hf_policy
    from spadework.sandbox import Limits, Sandbox
    from spadework.skills import skills_for

    corpus = load_default_corpus()
    policy = load_hf_policy(model, device=device)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    with Archive.open(archive_path(run_dir)) as archive, Sandbox(Limits()) as sandbox:
        last = archive.query("SELECT MAX(iteration) AS m FROM attempts")[0]["m"]
        iteration = 0 if last is None else int(last) + 1
        start = time.monotonic()
        results = design_environments(policy, sandbox, archive, corpus, n=n, iteration=iteration,
                                      run_seed=seed, skills=skills_for(cfg.setting), cfg=cfg,
                                      check_config=CheckConfig(max_turns=max_turns),
                                      progress=progress)
        return summarize(results, time.monotonic() - start, iteration)

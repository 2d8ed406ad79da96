"""What packing an episode's turns saves the learner, on a real run's episodes.

Reads the episodes of ``RUN_DIR`` (a finished ``spadework run``), assembles the agent's samples
the way the train stage does, once unpacked (one sequence per turn) and once packed
(``spadework.train.batch.agent_assembly(..., pack=True)``: an episode's turns in one sequence
wherever each prompt continues the previous prompt and reply token for token), and prints JSON:
the turns, the share of turn boundaries that continue (packable), the sequences and the tokens
the learner runs in each case, and their ratio (the baseline is the unpacked assembly of the
same episodes). Every trained (sampled) token is in both, so the update is the same under the
``token`` aggregation (tests/train/test_learner.py checks that); what changes is how many
prompt tokens are run again, and a step's cost goes with the tokens run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/packing.py RUN_DIR [--arms no_hint]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spadework.archive import Archive, archive_path  # noqa: E402
from spadework.train.batch import ARMS, agent_assembly  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--arms", default="no_hint", help="comma-separated arms to assemble "
                    "(the train stage uses no_hint; 'hint,no_hint' counts both)")
    args = ap.parse_args()
    arms = tuple(args.arms.split(","))
    if set(arms) - set(ARMS):
        sys.exit(f"--arms: choose from {', '.join(ARMS)}")
    with Archive.open(archive_path(args.run_dir), create=False) as a:
        episodes = a.episodes()
    plain = agent_assembly(episodes, arms=arms)
    packed = agent_assembly(episodes, arms=arms, pack=True)
    boundaries = sum(max(len(e.turns) - 1, 0) for e in episodes if e.arm in arms)
    run_plain = sum(s.length for s in plain.samples)
    run_packed = sum(s.length for s in packed.samples)
    print(json.dumps({
        "benchmark": "packing", "run_dir": str(args.run_dir), "arms": list(arms),
        "episodes": sum(e.arm in arms for e in episodes), "turns": len(plain.samples),
        "turn_boundaries": boundaries, "packed_boundaries": packed.packed_turns,
        "packable_share": round(packed.packed_turns / boundaries, 4) if boundaries else None,
        "sequences": {"unpacked": len(plain.samples), "packed": len(packed.samples)},
        "trained_tokens": {"unpacked": sum(s.n_tokens for s in plain.samples),
                           "packed": sum(s.n_tokens for s in packed.samples)},
        "tokens_run": {"unpacked": run_plain, "packed": run_packed},
        "tokens_run_ratio": round(run_plain / run_packed, 3) if run_packed else None,
    }, indent=1))


if __name__ == "__main__":
    main()

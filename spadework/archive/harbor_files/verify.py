"""The task's verifier: replays the agent's logged replies against the verifier's own copy of the
environment (this folder), in a child process with CPU, memory and wall-clock limits, and writes
the episode's total reward to reward.txt (Harbor's reward file) and the details to rewards.json.
A log the environment cannot replay, or an environment that fails, scores 0 with the reason."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = Path(os.environ.get("SPADEWORK_APP", "/app"))
LOGS = Path(os.environ.get("SPADEWORK_VERIFIER_LOGS", "/logs/verifier"))
CPU_SECONDS = int(os.environ.get("SPADEWORK_VERIFY_CPU_SECONDS", "60"))
MEMORY_BYTES = 2 << 30


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def replies() -> list[str]:
    log = APP / "episode.jsonl"
    if not log.exists():
        return []
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.strip():
            reply = json.loads(line).get("reply")
            if not isinstance(reply, str):
                raise ValueError("a line of episode.jsonl has no reply text")
            out.append(reply)
    return out


def verify() -> dict:
    try:
        played = replies()
    except (ValueError, AttributeError) as e:
        return {"reward": 0.0, "won": False, "turns": 0, "error": f"unreadable log: {e}"}
    try:
        child = subprocess.run([sys.executable, str(HERE / "runner.py"), str(HERE)],
                               input=json.dumps(played), capture_output=True, text=True,
                               timeout=CPU_SECONDS * 2, preexec_fn=_limit, check=False)
        result = json.loads(child.stdout)
    except subprocess.TimeoutExpired:
        result = {"rewards": [], "played": 0, "error": "the replay timed out"}
    except json.JSONDecodeError:
        why = (f"killed by signal {-child.returncode} (past its {CPU_SECONDS} s of CPU or its "
               "memory?)" if child.returncode < 0 else f"exit {child.returncode}")
        result = {"rewards": [], "played": 0,
                  "error": f"the replay failed ({why}): {child.stderr[-500:]}"}
    rewards = result.get("rewards") or []
    total = float(sum(rewards)) if not result.get("error") else 0.0
    return {"reward": total, "won": bool(rewards) and rewards[-1] >= 1.0 and not result.get("error"),
            "turns": result.get("played", 0), "error": result.get("error")}


if __name__ == "__main__":
    outcome = verify()
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / "reward.txt").write_text(f"{outcome['reward']:g}\n")
    (LOGS / "rewards.json").write_text(json.dumps(outcome))
    print(json.dumps(outcome))

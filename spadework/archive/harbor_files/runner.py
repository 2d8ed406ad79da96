"""Play one episode of an exported spadework environment: reset(seed) at the task's level, then
the replies in order. Standard library only: this file is copied into every Harbor task twice,
for the agent's ``play.py`` (in ``/app``) and for the verifier (in ``/tests``), each beside its
own copy of the environment's code, so the verifier never trusts files the agent could change.

As a script it is the verifier's child: it reads the task folder from argv and a JSON list of
replies from stdin, and prints one JSON object: the rewards, whether the episode ended, the
number of replies played, and the error if the environment failed.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def load_spec(folder: Path) -> dict:
    return json.loads((folder / "episode.json").read_text(encoding="utf-8"))


def make_env(folder: Path, spec: dict):
    """The environment's class from ``folder/env.py``, built for the task's turns and level."""
    sys.path.insert(0, str(folder))  # the kit packages (gameenv, toolenv) sit beside env.py
    loader = importlib.util.spec_from_file_location("spadework_task_env", folder / "env.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    kwargs = {"max_turns": spec["max_turns"]}
    if spec["level"] != 1:
        kwargs["level"] = spec["level"]
    return getattr(module, spec["class_name"])(**kwargs)


def play(folder: Path, replies: list[str]) -> dict:
    """Replay ``replies`` from the start of the task's episode; stops where the episode ends or
    at the turn limit. Returns the first and last observation, the rewards and the flags."""
    spec = load_spec(folder)
    env = make_env(folder, spec)
    first, _ = env.reset(seed=spec["seed"])
    out = {"first": str(first), "obs": str(first), "rewards": [], "done": False,
           "played": 0}
    for reply in replies[: spec["max_turns"]]:
        obs, reward, terminated, truncated, _ = env.step(str(reply))
        out["obs"] = str(obs)
        out["rewards"].append(float(reward))
        out["played"] += 1
        if terminated or truncated or out["played"] >= spec["max_turns"]:
            out["done"] = True
            break
    return out


if __name__ == "__main__":
    try:
        replies = json.loads(sys.stdin.read() or "[]")
        if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
            raise ValueError("the episode log is not a list of replies")
        result = play(Path(sys.argv[1]), replies)
        result.pop("first")
        result.pop("obs")
    except Exception as e:  # noqa: BLE001 - the environment's own failure: the episode scores 0
        result = {"rewards": [], "done": True, "played": 0, "error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(json.dumps(result))

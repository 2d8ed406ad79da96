"""Your move in this task's episode: ``python3 /app/play.py 'YOUR REPLY'`` (or the reply on
stdin). With no reply it shows the episode so far. Every reply is logged to episode.jsonl beside
this file; the verifier replays that log against its own copy of the environment."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from runner import load_spec, play

HERE = Path(os.environ.get("SPADEWORK_APP", Path(__file__).resolve().parent))
LOG = HERE / "episode.jsonl"


def logged() -> list[str]:
    if not LOG.exists():
        return []
    return [json.loads(line)["reply"] for line in LOG.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def main() -> int:
    spec = load_spec(HERE)
    args = sys.argv[1:]
    if args == ["--show"] or (not args and sys.stdin.isatty()):
        replies = logged()
        state = play(HERE, replies)
        print(state["obs"] if replies else state["first"])
        print(f"\n[{state['played']} of {spec['max_turns']} replies used"
              + ("; the episode is over]" if state["done"] else "]"))
        return 0
    reply = " ".join(args) if args else sys.stdin.read()
    replies = logged()
    state = play(HERE, [*replies, reply])  # stops where the episode ends
    if state["played"] <= len(replies):
        print("The episode is over; nothing more is played.")
        return 1
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"reply": reply}) + "\n")
    print(state["obs"])
    print(f"\n[reward {state['rewards'][-1]:g}; {state['played']} of {spec['max_turns']} "
          "replies used" + ("; the episode is over]" if state["done"] else "]"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Can the agent win a well-posed game at a preset's play settings? Unhinted plays of chosen
environments, with wins, the share of well-formed replies and the share cut at the reply token
limit. Prints one JSON object.

The default environments are the designer's example module (``CompoundInterestEnv``: every
number of the task is in the observation, higher/lower feedback after a wrong answer), which
says whether the agent could win the kind of environment the designer is shown, and, with
``--run-dir``, the accepted designs of that run. ``--module FILE`` adds any environment module.

Measured (2-core machine, beside other jobs; the base Qwen2.5-Coder-0.5B, cpu-qwen's 4 turns):
the example 0/16 at 128 reply tokens (30% well-formed, 48% cut) and 0/16 at 512 (91%
well-formed, none cut); the blend run's accepted ``MathSeriesEnv`` 0/16 at 128; the
designer benchmark's well-posed ``UluruEnv`` (a box's volume, its sides shown) 0/16 at 128.

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/agent_probe.py [--preset cpu-qwen]
       [--plays 16] [--max-tokens N] [--run-dir runs/qwen-blend] [--module FILE --class NAME]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def environments(args: argparse.Namespace) -> dict[str, object]:
    """Name -> EnvSource of every environment to play."""
    from spadework.archive import Archive, archive_path
    from spadework.designer.examples import GAMES_EXAMPLE
    from spadework.types import EnvSource

    envs: dict[str, object] = {"example CompoundInterestEnv": EnvSource(GAMES_EXAMPLE, "CompoundInterestEnv")}
    if args.run_dir:
        with Archive.open_read_only(archive_path(Path(args.run_dir))) as a:
            for r in a.query("SELECT env_id, code, class_name FROM envs WHERE origin = 'designed' "
                             "AND status = 'accepted' ORDER BY iteration, env_id"):
                envs[f"design {r['class_name']} {r['env_id'][:8]}"] = EnvSource(r["code"], r["class_name"])
    if args.module:
        if not args.class_name:
            sys.exit("error: --module needs --class NAME (the environment class in it)")
        envs[f"module {args.class_name}"] = EnvSource(Path(args.module).read_text(), args.class_name)
    return envs


def measure(policy, sandbox, env, *, plays: int, play_cfg, seed: int, level: int = 1) -> dict:
    """``plays`` unhinted episodes of ``env`` at ``level``: wins (and ``won``, play by play), the
    share of well-formed replies, the share cut at the token limit, the mean reply length,
    statuses and seconds."""
    from spadework.rollout import PlayJob, play
    from spadework.seeding import episode_seed

    t = time.time()
    jobs = [PlayJob(env, episode_seed(seed, env.env_id, k), "no_hint", k, level=level)
            for k in range(plays)]
    return cell(play(policy, sandbox, jobs, play_cfg, seed=seed), time.time() - t)


def measure_regret(policy, sandbox, env, *, plays: int, play_cfg, seed: int,
                   level: int = 1) -> dict:
    """Both regret arms of ``env`` at ``level`` on the same ``plays`` instances, in one batch, the
    hinted arm shown the environment's own ``hint()`` as a run shows it
    (``spadework.rollout.regret_jobs``): a :func:`cell` per arm (``hint``, ``no_hint``) and
    ``pairs``, the instances by which arm won them."""
    from agent_replies import PAIRS

    from spadework.rollout import play, regret_jobs

    t = time.time()
    eps = play(policy, sandbox, regret_jobs(env, run_seed=seed, plays=plays, level=level),
               play_cfg, seed=seed)
    seconds = time.time() - t
    out = {arm: cell([e for e in eps if e.arm == arm], seconds) for arm in ("hint", "no_hint")}
    pairs = [PAIRS[h, u] for h, u in zip(out["hint"]["won"], out["no_hint"]["won"])]
    out["pairs"] = {k: pairs.count(k) for k in PAIRS.values()}
    return out


def cell(eps: list, seconds: float) -> dict:
    """The figures of a list of episodes (in play order): wins, ``won`` per play, the share of
    well-formed replies, the share cut at the token limit, the mean reply length, statuses and
    the seconds given."""
    from spadework.reward import episode_return

    ordered = sorted(eps, key=lambda e: e.play_index)
    won = [episode_return(e.rewards, e.terminated) > 0 for e in ordered]
    turns = [t for e in eps for t in e.turns]
    return {
        "wins": sum(won), "plays": len(eps), "won": won,
        "well_formed": round(sum(t.parsed for t in turns) / max(len(turns), 1), 4),
        "cut": round(sum(t.finish_reason == "length" for t in turns) / max(len(turns), 1), 4),
        "mean_reply_chars": round(sum(len(t.text) for t in turns) / max(len(turns), 1), 1),
        "statuses": {s: sum(e.status == s for e in eps) for s in sorted({e.status for e in eps})},
        "seconds": round(seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="cpu-qwen", help="the run preset whose agent and play settings are used")
    ap.add_argument("--plays", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=None, help="reply token limit (default: the preset's)")
    ap.add_argument("--run-dir", default=None, help="also play this run's accepted designs")
    ap.add_argument("--module", default=None)
    ap.add_argument("--class", dest="class_name", default=None)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    from spadework.config import preset
    from spadework.policy.load import load_policy
    from spadework.sandbox import Limits, Sandbox

    cfg = preset(args.preset)
    play_cfg = cfg.play if args.max_tokens is None else dataclasses.replace(cfg.play, max_tokens=args.max_tokens)
    envs = environments(args)
    t0 = time.time()
    policy = load_policy("llamacpp", cfg.role_model("agent"), max_batch_size=cfg.policy_batch)
    out = {"benchmark": "agent_probe", "preset": args.preset, "agent_model": cfg.role_model("agent"),
           "plays": args.plays, "max_turns": play_cfg.max_turns,
           "max_tokens": play_cfg.max_tokens, "load_seconds": round(time.time() - t0, 1), "envs": {}}
    with Sandbox(Limits()) as sb:
        for name, env in envs.items():
            out["envs"][name] = measure(policy, sb, env, plays=args.plays, play_cfg=play_cfg,
                                        seed=args.seed)
            print(f"[agent_probe] {name}: {out['envs'][name]}", file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

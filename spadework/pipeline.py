"""The main job until the self-play loop lands: every stage that exists, end to end, for real.

``run_pipeline`` does, with the real default model and the real sandbox:

1. start the sandbox and report its isolation layers;
2. validate the starter library through the staged checker;
3. play the accepted starter environments in both regret arms on identical seeds (the hint is the
   environment's own ``hint()`` for each instance), and score them with the pure reward functions (win rate,
   regret, blend);
4. let the model design environments from corpus documents and validate each attempt;
5. write ``summary.json``, ``episodes.jsonl`` and ``designs.jsonl`` into the run directory.

What it does not do yet, and says so: train (GRPO), keep an archive across runs, or resume. Those
arrive with ``loop.py``. Composition lives here only; each stage is a library call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spadework import reward
from spadework.errors import ConfigError, SpadeworkError
from spadework.rollout import PlayConfig, play, regret_jobs
from spadework.seeding import derive_seed
from spadework.types import Episode, EnvSource

NOT_YET = "no training, archive or resume yet: this run plays and designs with fixed weights"


@dataclass(frozen=True)
class PipelineConfig:
    """What the interim main job does; defaults fit a few minutes on a 2-core CPU."""

    run_dir: Path = Path("runs/latest")
    model: str | None = None  # None: the registry's default model
    run_seed: int = 0
    plays: int = 2  # per arm, per environment
    max_envs: int = 4  # starter games played (fewest first by name)
    designs: int = 2  # designer attempts
    design_max_tokens: int = 768
    play: PlayConfig = field(default_factory=lambda: PlayConfig(max_turns=4, max_tokens=96))

    def __post_init__(self) -> None:
        for name in ("plays", "max_envs", "design_max_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"PipelineConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.designs < 0:
            raise ConfigError(f"PipelineConfig.designs must be >= 0, got {self.designs}")


def _episode_row(ep: Episode) -> dict:
    row = asdict(ep)
    row["turns"] = [
        {"action": t.action, "reward": t.reward, "finish_reason": t.finish_reason,
         "output_tokens": len(t.output_ids)}
        for t in ep.turns
    ]
    row["return"] = reward.episode_return(ep.rewards, ep.terminated)
    return row


def score_env(episodes: list[Episode]) -> dict:
    """Win rate (unhinted arm), regret (hinted minus unhinted mean return) and the blend score."""
    returns = {arm: [reward.episode_return(e.rewards, e.terminated) for e in episodes if e.arm == arm]
               for arm in ("hint", "no_hint")}
    wr = reward.win_rate(returns["no_hint"])
    rg = reward.regret(returns["hint"], returns["no_hint"])
    return {"win_rate": wr, "regret": rg, "blend": reward.blend(wr, rg),
            "statuses": sorted({e.status for e in episodes})}


def _check_library(sandbox, echo) -> list[EnvSource]:
    from spadework.env.checker import check
    from spadework.library import starter_envs

    accepted = []
    for env in starter_envs():
        report = check(env.code, sandbox=sandbox, seeds=3, module=True)
        mark = "ok " if report.ok else f"FAIL at {report.failed_stage}: {report.reason}"
        echo(f"  check {env.name:<24} {mark}")
        if report.ok:
            accepted.append(env)
    return accepted


def _play_stage(policy, sandbox, envs, cfg: PipelineConfig, out: Path, echo) -> dict[str, dict]:
    jobs = [job for env in envs for job in regret_jobs(env, run_seed=cfg.run_seed, plays=cfg.plays)]
    echo(f"  playing {len(jobs)} episodes ({len(envs)} envs x 2 arms x {cfg.plays} seeds)")
    episodes = play(policy, sandbox, jobs, cfg.play, seed=derive_seed(cfg.run_seed, "play"))
    with (out / "episodes.jsonl").open("w") as f:
        for ep in episodes:
            f.write(json.dumps(_episode_row(ep)) + "\n")
    scores = {}
    for env in envs:
        eps = [e for e in episodes if e.env_id == env.env_id]
        scores[env.name] = score_env(eps)
        s = scores[env.name]
        echo(f"  {env.name:<24} win rate {s['win_rate']:.2f}  regret {s['regret']:+.2f}  "
             f"blend {s['blend']:.2f}")
    return scores


def _design_stage(policy, sandbox, cfg: PipelineConfig, out: Path, echo) -> dict:
    from spadework.default_corpus import load_default_corpus
    from spadework.design import build_design_prompt
    from spadework.env.checker import check
    from spadework.policy.base import Conversation, SamplingParams
    from spadework.skills import skills_for

    corpus = load_default_corpus()
    skills = skills_for("games")
    prompts, docs = [], []
    for slot in range(cfg.designs):
        doc = corpus.sample(cfg.run_seed, 0, slot, 0)
        skill = skills[slot % len(skills)]
        docs.append((doc.doc_id, skill.name))
        prompts.append(Conversation(messages=tuple(build_design_prompt(doc.text, skill))))
    params = SamplingParams(temperature=0.6, top_p=0.95, top_k=20,
                            max_tokens=cfg.design_max_tokens, seed=derive_seed(cfg.run_seed, "design"))
    completions = policy.chat(prompts, params)
    funnel: dict[str, int] = {}
    with (out / "designs.jsonl").open("w") as f:
        for (doc_id, skill), c in zip(docs, completions):
            report = check(c.text, sandbox=sandbox, seeds=3, module=False)
            stage = "accepted" if report.ok else report.failed_stage or "none"
            funnel[stage] = funnel.get(stage, 0) + 1
            echo(f"  design [{skill}] from {doc_id!r}: {stage} {report.reason[:100]}")
            f.write(json.dumps({"doc_id": doc_id, "skill": skill, "reply": c.text,
                                "output_tokens": len(c.output_ids), "outcome": stage,
                                "reason": report.reason}) + "\n")
    return funnel


def run_pipeline(cfg: PipelineConfig, echo: Callable[[str], None] = print) -> dict:
    """Run every available stage once and return the summary also written to ``summary.json``."""
    from spadework.policy.hf import load_hf_policy
    from spadework.sandbox import Limits, Sandbox

    out = Path(cfg.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    echo(f"spadework run: the most complete pipeline available ({NOT_YET}).")
    started = time.monotonic()
    summary: dict = {"note": NOT_YET, "run_seed": cfg.run_seed, "timings_s": {}}
    with Sandbox(Limits()) as sb:
        echo(f"[1/4] sandbox: {sb.isolation}")
        summary["isolation"] = str(sb.isolation)
        t = time.monotonic()
        echo("[2/4] checking the starter library in the sandbox")
        accepted = _check_library(sb, echo)
        summary["starter_accepted"] = [e.name for e in accepted]
        summary["timings_s"]["check"] = time.monotonic() - t
        t = time.monotonic()
        policy = load_hf_policy(cfg.model)
        summary["timings_s"]["load_model"] = time.monotonic() - t
        games = [e for e in accepted if e.setting == "games"][: cfg.max_envs]
        t = time.monotonic()
        echo("[3/4] agent plays both regret arms on identical seeds")
        summary["scores"] = _play_stage(policy, sb, games, cfg, out, echo)
        summary["timings_s"]["play"] = time.monotonic() - t
        t = time.monotonic()
        echo(f"[4/4] designer writes {cfg.designs} environments from corpus documents")
        try:
            summary["design_funnel"] = _design_stage(policy, sb, cfg, out, echo) if cfg.designs else {}
        except SpadeworkError as e:
            summary["design_funnel"] = {"error": e.reason}
            echo(f"  design stage skipped: {e.reason}")
        summary["timings_s"]["design"] = time.monotonic() - t
    summary["timings_s"]["total"] = time.monotonic() - started
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    echo(f"done in {summary['timings_s']['total']:.0f} s; results in {out}/")
    return summary

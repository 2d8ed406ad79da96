"""Staged validation of environment code: ``check()`` -> :class:`CheckReport`.

Stages run in order and stop at the first failure; each is a named :class:`CheckResult` with a
reason a designer can act on, and each stage is a public function testable on its own:

1. ``extract``      the module out of a raw designer reply (omitted when given a module);
2. ``static``       parse, import allowlist, no escapes, no import-time side effects, contract
                    class (:mod:`spadework.env.static`: defence in depth, not the boundary);
3. ``load``         instantiate inside the sandbox within its limits;
4. ``contract``     reset/step return types on probe actions, a finite reward in [-1, 1],
                    boolean flags, a dict info, an observation size cap, max_turns honoured;
5. ``determinism``  the same seed gives the same observation, tools, solution() and step
                    results, on the same instance reset again and on a second instance;
6. ``solvable``     replaying solution() from a fresh reset wins (terminated, positive reward)
                    on every seed;
7. ``not_trivial``  random, empty and repeated actions win at most ``trivial_rate`` of episodes,
                    and the answer is not printed in the first observation;
8. ``novelty``      not a near-duplicate of existing code (:mod:`spadework.env.novelty`; omitted
                    when nothing is given to compare against).

Generated code runs only inside the sandbox the caller passes in, which is the security
boundary; the checker never starts a sandbox per candidate. Departures from the reference, which
checks only that three steps return the right types with a reward in [-10, 10] and strict
``bool`` flags: we bound rewards to [-1, 1] (the agent's reward is clamped there anyway), accept
numpy booleans (the sandbox converts them), and prove determinism and solvability, which the
reference never checks.
"""

from __future__ import annotations

import ast
import random
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from spadework.env.novelty import NoveltyIndex
from spadework.env.probe import (
    FORMATTED,
    REPEATED,
    EnvHandle,
    Opener,
    answer_of,
    call_env,
    do_reset,
    do_step,
    find_leak,
    play,
    probe_actions,
    random_action,
    short,
    solution_actions,
    tool_names,
    where_in_env,
)
from spadework.env.static import check_static
from spadework.errors import ConfigError, ContractError, EnvError, EnvLoadError, EnvRaised, ExtractError
from spadework.types import CheckReport, CheckResult, env_id_of

STAGES = ("extract", "static", "load", "contract", "determinism", "solvable", "not_trivial", "novelty")


@dataclass(frozen=True)
class CheckConfig:
    """Thresholds of the runtime stages. Seeds are derived from ``seed`` (solvable: seed+i,
    determinism: seed+100+i, not_trivial: seed+1000+i), so a report is reproducible."""

    max_turns: int = 20  # pass the play max_turns; the instance is built with it and must end by it
    determinism_seeds: int = 3
    trivial_episodes: int = 20  # random-action episodes; empty and repeated get a quarter each
    trivial_rate: float = 0.1  # a strategy winning a larger share of episodes fails
    max_obs_chars: int = 32_768
    novelty_threshold: float = 0.9  # Jaccard similarity at or above which a candidate is a copy
    shingle_size: int = 5
    allow_numpy: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("max_turns", "determinism_seeds", "trivial_episodes", "max_obs_chars", "shingle_size")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"CheckConfig.{name} must be a positive integer, got {value!r}")
        for name in ("trivial_rate", "novelty_threshold"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"CheckConfig.{name} must be a number in [0, 1], got {value!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"CheckConfig.seed must be an integer, got {self.seed!r}")


def contract_stage(open_env: Opener, cfg: CheckConfig) -> str:
    """hint(), when defined, gives a str; probe replies give well-formed results; an episode of
    empty replies ends within ``max_turns`` steps. Returns a summary; raises ContractError with
    the first violation."""
    with open_env() as env:
        do_reset(env, cfg.seed, cfg.max_obs_chars)
        hint = call_env("hint()", env.hint)  # None when the class defines no hint()
        if hint is not None and not isinstance(hint, str):
            raise ContractError(f"hint() returned {short(hint)} ({type(hint).__name__}); return a str")
        probes = probe_actions(tool_names(env))
        for action in probes:
            if do_step(env, action, cfg.max_obs_chars).done:
                do_reset(env, cfg.seed, cfg.max_obs_chars)
        do_reset(env, cfg.seed + 1, cfg.max_obs_chars)
        for turn in range(1, cfg.max_turns + 1):
            if do_step(env, "", cfg.max_obs_chars).done:
                break
        else:
            raise ContractError(
                f"the episode was still running after max_turns={cfg.max_turns} empty replies; "
                "set truncated=True once max_turns replies have been used"
            )
    return f"{len(probes)} probe replies well-formed; an idle episode ended at step {turn} of {cfg.max_turns}"


def _trace(env: EnvHandle, seed: int, actions: list[str], cfg: CheckConfig) -> list[tuple[str, object]]:
    trace: list[tuple[str, object]] = [(f"reset(seed={seed})", do_reset(env, seed, cfg.max_obs_chars))]
    trace.append(("tools()", call_env("tools()", env.tools)))
    try:
        trace.append(("solution()", call_env("solution()", env.solution)))
    except ContractError as e:  # solvable reports a raising solution(); here sameness counts
        if not isinstance(e.__cause__, EnvRaised):
            raise
        trace.append(("solution()", f"<{e.reason}>"))
    for action in actions:
        step = do_step(env, action, cfg.max_obs_chars)
        trace.append((f"step({short(action, 30)})", (step.obs, step.reward, step.terminated, step.truncated, step.info)))
        if step.done:
            break
    return trace


def _first_difference(a: list, b: list) -> tuple[str, object, object] | None:
    for (what, x), (_, y) in zip(a, b):
        if x != y:
            return what, x, y
    if len(a) != len(b):
        return "the number of steps until the episode ended", len(a), len(b)
    return None


def determinism_stage(open_env: Opener, cfg: CheckConfig) -> str:
    """Trace reset(seed), tools(), solution() and a fixed reply sequence on one instance, twice
    per seed, then on a second instance that visits the seeds in reverse order; all traces of a
    seed must agree. Two instances with different histories catch both global randomness and
    state carried across episodes, at the cost of two loads rather than two per seed."""
    seeds = [cfg.seed + 100 + i for i in range(cfg.determinism_seeds)]
    traces: dict[int, list] = {}
    with open_env() as env:
        do_reset(env, seeds[0], cfg.max_obs_chars)  # tools may depend on the reset state
        actions = probe_actions(tool_names(env))[: cfg.max_turns]
        for seed in seeds:
            traces[seed] = _trace(env, seed, actions, cfg)
            _compare(traces[seed], _trace(env, seed, actions, cfg), seed, "the same instance reset again")
    with open_env() as env:
        for seed in reversed(seeds):
            _compare(traces[seed], _trace(env, seed, actions, cfg), seed, "a second instance")
    return f"seeds {seeds[0]}..{seeds[-1]} reproduce observations, tools, solution() and step results"


def _compare(first: list, other: list, seed: int, label: str) -> None:
    diff = _first_difference(first, other)
    if diff:
        what, x, y = diff
        raise ContractError(
            f"not deterministic: {what} differs on {label} with seed {seed}: "
            f"{short(x)} vs {short(y)}; draw every random choice from "
            "random.Random(seed) created in reset(), never from the global random"
        )


def _replay(env: EnvHandle, seed: int, cfg: CheckConfig) -> str | None:
    """Replay solution() from reset(seed); None when it wins, else why not."""
    do_reset(env, seed, cfg.max_obs_chars)
    actions = solution_actions(call_env("solution()", env.solution))
    step = None
    for i, action in enumerate(actions, 1):
        step = do_step(env, action, cfg.max_obs_chars)
        if step.done:
            break
    if step is not None and step.won:
        return None
    where = f"seed {seed}: replaying solution() ({len(actions)} action(s), ending {short(actions[-1], 40)})"
    if step.truncated:
        why = f"was truncated at step {i} (max_turns={cfg.max_turns})"
    elif step.terminated:
        why = f"ended at step {i} with reward {step.reward} (a win needs a positive reward)"
    else:
        why = f"left the episode running after {i} step(s) (a win must set terminated=True)"
    tip = ""
    if len(actions) == 1 and not FORMATTED.search(actions[0]):
        tip = "; solution() returns actions as the agent writes them, e.g. '\\\\boxed{...}'"
    return f"{where} {why}: last observation {short(step.obs, 80)}{tip}"


def solvable_stage(open_env: Opener, cfg: CheckConfig, seeds: int) -> str:
    """Replaying solution() from a fresh reset wins on each of ``seeds`` seeds."""
    chosen = [cfg.seed + i for i in range(seeds)]
    with open_env() as env:
        for seed in chosen:
            failure = _replay(env, seed, cfg)
            if failure:
                raise ContractError(f"not solvable: {failure}")
    return f"solution() wins on seeds {chosen[0]}..{chosen[-1]}"


_LEAK_SEEDS = 3


def _strategies(cfg: CheckConfig, tools: list[str]) -> dict[str, list[tuple[int, Callable[[int], str]]]]:
    base, n_fixed = cfg.seed + 1000, max(1, cfg.trivial_episodes // 4)

    def rand(seed: int) -> Callable[[int], str]:
        rng = random.Random(f"{cfg.seed}:{seed}")
        return lambda _turn: random_action(rng, tools)

    return {
        "random": [(base + e, rand(base + e)) for e in range(cfg.trivial_episodes)],
        "empty": [(base + e, lambda _turn: "") for e in range(n_fixed)],
        "repeated": [
            (base + e, lambda _turn, a=REPEATED[e % len(REPEATED)]: a) for e in range(n_fixed)
        ],
    }


def not_trivial_stage(open_env: Opener, cfg: CheckConfig) -> str:
    """The answer is not printed in the first observation, and no trivial strategy (random,
    empty, the same reply repeated) wins more than ``trivial_rate`` of its episodes."""
    base = cfg.seed + 1000
    with open_env() as env:
        firsts = {}
        for seed in range(base, base + _LEAK_SEEDS):
            obs = do_reset(env, seed, cfg.max_obs_chars)
            firsts[seed] = (obs, answer_of(call_env("solution()", env.solution)))
        leak = find_leak(firsts)
        if leak:
            raise ContractError(f"answer leaked: {leak}; state the task, never its answer")
        rates = []
        for name, episodes in _strategies(cfg, tool_names(env)).items():
            wins = sum(play(env, seed, policy, cfg.max_turns, cfg.max_obs_chars) for seed, policy in episodes)
            rate = wins / len(episodes)
            if rate > cfg.trivial_rate:
                raise ContractError(
                    f"trivial: {name} replies won {wins} of {len(episodes)} episodes "
                    f"({rate:.0%} > {cfg.trivial_rate:.0%}); a win must need the right answer"
                )
            rates.append(f"{name} {wins}/{len(episodes)}")
    return "wins by " + ", ".join(rates) + "; answer not in the first observation"


def load_stage(sandbox: Any, code: str, class_name: str, cfg: CheckConfig) -> str:
    """Instantiate the class inside the sandbox (its limits apply) and close it again."""
    try:
        with sandbox.load(code, max_turns=cfg.max_turns, class_name=class_name):
            pass
    except EnvLoadError as e:
        lines = [line.strip() for line in e.reason.splitlines() if line.strip()]
        raise EnvLoadError(f"import or {class_name}(max_turns={cfg.max_turns}) raised "
                           f"{lines[-1] if lines else e.reason}{where_in_env(e.reason)}") from e
    return f"{class_name}(max_turns={cfg.max_turns}) instantiated in the sandbox"


def novelty_stage(code: str, index: NoveltyIndex, cfg: CheckConfig) -> str:
    """Not a near-duplicate (Jaccard of normalised shingles below the threshold) of any indexed
    environment."""
    match = index.most_similar(code)
    if match is None:
        return "nothing to compare against"
    if match.similarity >= cfg.novelty_threshold:
        raise ContractError(
            f"near-duplicate of environment {match.env_id[:12]} (similarity {match.similarity:.2f} "
            f">= {cfg.novelty_threshold:.2f}); design a different mechanic, not a renamed copy"
        )
    return f"most similar: {match.env_id[:12]} at {match.similarity:.2f} of {len(index)} compared"


def looks_like_module(text: str) -> bool:
    """A text that parses as Python is a module; anything else is a reply to extract from.

    >>> looks_like_module("x = 1"), looks_like_module("Here is the game:\\n```python\\nx = 1\\n```")
    (True, False)
    """
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


class _Stages:
    """Runs stages in order, timing each and recording the first failure, after which it runs
    nothing more. Failures crossing here are typed (ContractError, ExtractError, EnvError)."""

    def __init__(self) -> None:
        self.results: list[CheckResult] = []

    @property
    def failed(self) -> bool:
        return any(not r.passed for r in self.results)

    def run(self, stage: str, fn: Callable[[], tuple[Any, str]]) -> Any:
        if self.failed:
            return None
        start = time.perf_counter()
        try:
            value, reason = fn()
        except (ContractError, ExtractError, EnvError) as e:
            self.results.append(CheckResult(stage, False, e.reason, time.perf_counter() - start))
            return None
        self.results.append(CheckResult(stage, True, reason, time.perf_counter() - start))
        return value


def _extract(reply: str) -> tuple[str, str]:
    from spadework.env.extract import extract_env_module

    module = extract_env_module(reply)
    repairs = f"; repairs: {', '.join(module.repairs)}" if module.repairs else ""
    return module.code, f"a module of {len(module.code.splitlines())} lines{repairs}"


def check(
    source: str,
    *,
    sandbox: Any,
    seeds: int = 5,
    config: CheckConfig | None = None,
    existing: Iterable[str] | NoveltyIndex = (),
    module: bool | None = None,
) -> CheckReport:
    """Validate one candidate environment, stage by stage (see the module docstring).

    ``source`` is module code or a raw designer reply (``module=None`` decides by whether it
    parses as Python; pass ``module=True`` for a ``.py`` file, so a syntax error is reported by
    the static stage rather than by extraction). ``sandbox`` is a started
    :class:`spadework.sandbox.Sandbox` owned by the caller. ``seeds`` is how many seeds solution()
    must win on. ``existing`` is the code of environments to compare against for novelty, or a
    prebuilt :class:`NoveltyIndex` (reuse one across candidates).
    """
    cfg = config or CheckConfig()
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"seeds must be a positive integer, got {seeds!r}")
    stages = _Stages()
    code: str | None = source
    if not (looks_like_module(source) if module is None else module):
        code = stages.run("extract", lambda: _extract(source))
    if code is None:
        return CheckReport(env_id=None, class_name=None, results=tuple(stages.results),
                           max_turns=cfg.max_turns)
    info = stages.run("static", lambda: _static(code, cfg))
    name = info.class_name if info else None

    def opener() -> AbstractContextManager[EnvHandle]:
        return sandbox.load(code, max_turns=cfg.max_turns, class_name=name)

    stages.run("load", lambda: (None, load_stage(sandbox, code, name, cfg)))
    stages.run("contract", lambda: (None, contract_stage(opener, cfg)))
    stages.run("determinism", lambda: (None, determinism_stage(opener, cfg)))
    stages.run("solvable", lambda: (None, solvable_stage(opener, cfg, seeds)))
    stages.run("not_trivial", lambda: (None, not_trivial_stage(opener, cfg)))
    index = existing if isinstance(existing, NoveltyIndex) else NoveltyIndex(existing, k=cfg.shingle_size)
    if len(index):
        stages.run("novelty", lambda: (None, novelty_stage(code, index, cfg)))
    return CheckReport(env_id=env_id_of(code), class_name=name, results=tuple(stages.results),
                       max_turns=cfg.max_turns)


def _static(code: str, cfg: CheckConfig) -> tuple[Any, str]:
    info = check_static(code, allow_numpy=cfg.allow_numpy)
    return info, f"class {info.class_name} ({info.setting}); imports allowed; only definitions at import"


def report_dict(report: CheckReport) -> dict:
    """The report as plain JSON-ready data (``spadework check --json``)."""
    return {
        "ok": report.ok,
        "env_id": report.env_id,
        "class_name": report.class_name,
        "failed_stage": report.failed_stage,
        "reason": report.reason,
        "max_turns": report.max_turns,
        "results": [
            {"stage": r.stage, "passed": r.passed, "reason": r.reason, "seconds": round(r.seconds, 6)}
            for r in report.results
        ],
    }


def format_report(report: CheckReport) -> str:
    """The report for people: one line per stage (✓/✗, time, reason), then the verdict.

    >>> r = CheckReport("ab" * 32, "GuessEnv", (CheckResult("static", True, "ok", 0.0012),
    ...                                          CheckResult("load", False, "boom", 0.25)))
    >>> print(format_report(r))
    ✓ static            1.2 ms  ok
    ✗ load            250.0 ms  boom
    invalid: GuessEnv fails at load
    """
    lines = []
    for r in report.results:
        reason = r.reason.replace("\n", "\n" + " " * 28)
        lines.append(f"{'✓' if r.passed else '✗'} {r.stage:<12} {r.seconds * 1000:8.1f} ms  {reason}")
    name = report.class_name or "the candidate"
    if report.ok:
        lines.append(f"valid: {name} (env {report.env_id[:12]})")
    else:
        lines.append(f"invalid: {name} fails at {report.failed_stage or 'no stage (nothing ran)'}")
    return "\n".join(lines)

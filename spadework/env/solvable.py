"""Does the environment's own solution() win its instances? The solvable stage, and the replay
the loop runs on the exact instances it is about to play.

Instances are named by seeds drawn the way play draws them (:func:`solvable_seeds`:
:func:`spadework.seeding.episode_seed`, up to 2**31, different for every environment), not
0..N-1: a generator can be right for small seeds and wrong for the seeds play uses, and a
solution() that loses on one instance in six (a one-character slip in a cipher's alphabet
arithmetic) passes three small seeds about half the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spadework.env.budget import Budget
from spadework.env.probe import (
    FORMATTED,
    EnvHandle,
    Opener,
    call_env,
    do_reset,
    do_step,
    short,
    solution_actions,
)
from spadework.errors import CheckBudgetExceeded, ContractError, EnvError
from spadework.seeding import derive_seed, episode_seed
from spadework.settings.check import CheckConfig


def solvable_seeds(seed: int, env_id: str, n: int) -> list[int]:
    """``n`` instance seeds for replaying solution(), drawn as play draws its episode seeds
    (:func:`episode_seed` under a run seed derived from ``seed`` and "check"), so they are as
    large and as varied as play's, fixed per environment and check seed, and not the plays' own.

    >>> s = solvable_seeds(0, "ab" * 32, 3)
    >>> s == solvable_seeds(0, "ab" * 32, 3), len(set(s)), all(0 <= x < 2**31 for x in s)
    (True, 3, True)
    >>> s != solvable_seeds(0, "cd" * 32, 3)
    True
    """
    base = derive_seed(seed, "check")
    return [episode_seed(base, env_id, i) for i in range(n)]


@dataclass(frozen=True)
class SolutionLoss:
    """An instance whose solution() replay did not win, and why (a sentence for people)."""

    seed: int
    reason: str


def replay(env: EnvHandle, seed: int, cfg: CheckConfig) -> str | None:
    """Replay solution() from reset(seed): None when it wins, else why not. Raises ContractError
    when a call on the way breaks the contract (solution() raises or returns no actions, a step
    is malformed, a call times out)."""
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


def solvable_stage(open_env: Opener, cfg: CheckConfig, seeds: Sequence[int],
                   budget: Budget | None = None) -> str:
    """Replaying solution() from a fresh reset wins on every seed of ``seeds`` (one instance,
    reset for each); raises ContractError at the first that it does not win."""
    budget = budget or Budget.unlimited()
    seeds = list(seeds)
    budget.plan(len(seeds), "seeds")
    with open_env() as env:
        for seed in seeds:
            failure = replay(env, seed, cfg)
            if failure:
                raise ContractError(f"not solvable: {failure}")
            budget.advance()
    shown = ", ".join(str(s) for s in seeds[:2]) + (", ..." if len(seeds) > 2 else "")
    return f"solution() wins on all {len(seeds)} seeds ({shown})"


def solution_losses(open_env: Opener, seeds: Sequence[int], cfg: CheckConfig,
                    budget: Budget | None = None) -> list[SolutionLoss]:
    """The seeds of ``seeds`` on which solution(), replayed from reset(seed), does not win, in
    order, each with why; an empty list when it wins them all. For the loop: call it on the
    exact instances an iteration is about to play and drop those it returns.

    A seed is lost when its replay is truncated, ends with a reward <= 0, leaves the episode
    running, or breaks the contract on the way (solution() raises or returns no actions, a step
    is malformed, a call times out, the child dies). One instance serves every seed; after a
    timeout or a crash the rest go on in a fresh one; when no instance can be built, every seed
    left is lost with that reason. Once per call, a seed whose instance died and an instance that
    could not be built get a second try (a sandbox child killed from outside, as the soak does,
    would otherwise drop a healthy design's instances; a fault of the design recurs). Nothing
    the environment does raises here; only CheckBudgetExceeded, when ``budget`` runs out.

    Cost: one instance build (a fork and ``__init__``, ~5-30 ms) plus, per seed, one reset(),
    one solution() and one step() per action (at most ``cfg.max_turns``), each a sandbox round
    trip of ~30 µs plus the environment's own time: about 1.5 ms per seed averaged over the
    starter library on two cores, 10x that for the slowest (``benchmarks/checker.py``,
    ``replay_ms_per_seed``), against seconds of generation for one played episode. A seed whose
    replay hangs costs up to ``Limits.step_seconds`` and a fresh instance.
    """
    losses: list[SolutionLoss] = []
    pending = list(seeds)
    second_try = True  # once per call: a child killed from outside is not the design's fault
    while pending:
        try:
            with open_env() as env:
                while pending:
                    seed = pending.pop(0)
                    try:
                        why = replay(env, seed, cfg)
                    except CheckBudgetExceeded:
                        raise
                    except ContractError as e:
                        why = f"seed {seed}: {e.reason}"
                    if budget is not None:
                        budget.advance()
                    if why is None:
                        continue
                    if not getattr(env, "alive", True):  # a timeout or crash killed the instance
                        if second_try:  # the seed again in a fresh one (a real fault recurs)
                            second_try = False
                            pending.insert(0, seed)
                        else:
                            losses.append(SolutionLoss(seed, why))
                        break  # a fresh instance for the rest
                    losses.append(SolutionLoss(seed, why))
        except CheckBudgetExceeded:
            raise
        except (EnvError, ContractError) as e:
            if second_try:
                second_try = False
                continue
            losses += [SolutionLoss(s, f"seed {s}: no instance could be built: {e.reason}") for s in pending]
            pending = []
    return losses

"""The runtime stages that play the candidate: contract, determinism and not_trivial (the
solvable stage is :mod:`spadework.env.solvable`, load and novelty are in
:mod:`spadework.env.checker`, which runs them all in order).

Each stage opens the instances it needs through an :data:`~spadework.env.probe.Opener`, returns
a one-line summary and raises ContractError with the first violation. Each reports its units of
work (steps, traces, episodes) to the check's :class:`~spadework.env.budget.Budget`, whose
deadline also bounds its calls when the checker's opener binds it; called on their own (tests),
they run without a budget.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from spadework.env.budget import Budget
from spadework.env.gameenv.boxes import box
from spadework.env.probe import (
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
)
from spadework.env.readable import concrete_examples
from spadework.errors import CheckBudgetExceeded, ContractError, EnvError, EnvRaised
from spadework.settings.check import CheckConfig


def contract_stage(open_env: Opener, cfg: CheckConfig, budget: Budget | None = None) -> str:
    """hint(), when defined, gives a str; probe replies give well-formed results; an episode of
    empty replies ends within ``max_turns`` steps. Returns a summary; raises ContractError with
    the first violation. Its units of work are steps (probes, then at most ``max_turns``)."""
    budget = budget or Budget.unlimited()
    with open_env() as env:
        do_reset(env, cfg.seed, cfg.max_obs_chars)
        hint = call_env("hint()", env.hint)  # None when the class defines no hint()
        if hint is not None and not isinstance(hint, str):
            raise ContractError(f"hint() returned {short(hint)} ({type(hint).__name__}); return a str")
        probes = probe_actions(tool_names(env))
        budget.plan(len(probes) + cfg.max_turns, "steps")
        for action in probes:
            if do_step(env, action, cfg.max_obs_chars).done:
                do_reset(env, cfg.seed, cfg.max_obs_chars)
            budget.advance()
        do_reset(env, cfg.seed + 1, cfg.max_obs_chars)
        for turn in range(1, cfg.max_turns + 1):
            done = do_step(env, "", cfg.max_obs_chars).done
            budget.advance()
            if done:
                budget.advance(cfg.max_turns - turn)
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


def _determinism_seeds(cfg: CheckConfig) -> list[int]:
    """The seeds the determinism stage traces, which ``same_levels`` traces at every level."""
    return [cfg.seed + 100 + i for i in range(cfg.determinism_seeds)]


def determinism_stage(open_env: Opener, cfg: CheckConfig, budget: Budget | None = None) -> str:
    """Trace reset(seed), tools(), solution() and a fixed reply sequence on one instance, twice
    per seed, then on a second instance that visits the seeds in reverse order; all traces of a
    seed must agree. Two instances with different histories catch both global randomness and
    state carried across episodes, at the cost of two loads rather than two per seed. Its units
    of work are traces (three per seed)."""
    budget = budget or Budget.unlimited()
    seeds = _determinism_seeds(cfg)
    budget.plan(3 * len(seeds), "traces")
    traces: dict[int, list] = {}
    with open_env() as env:
        do_reset(env, seeds[0], cfg.max_obs_chars)  # tools may depend on the reset state
        actions = probe_actions(tool_names(env))[: cfg.max_turns]
        for seed in seeds:
            traces[seed] = _trace(env, seed, actions, cfg)
            budget.advance()
            _compare(traces[seed], _trace(env, seed, actions, cfg), seed, "the same instance reset again")
            budget.advance()
    with open_env() as env:
        for seed in reversed(seeds):
            _compare(traces[seed], _trace(env, seed, actions, cfg), seed, "a second instance")
            budget.advance()
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


def same_levels(open_level: Callable[[int], Opener], levels: int, cfg: CheckConfig,
                budget: Budget | None = None) -> tuple[int, list[int]] | None:
    """``(lowest, seeds)`` when levels ``lowest`` to ``levels`` all give the same game on each of
    the determinism stage's ``seeds`` (the same observations, tools, solution() and step results
    for the same replies, the ``info`` dicts aside: a game's info may name its level), else
    None. Such levels are one instance under several numbers, which a level controller would
    move through to no effect: every level alike gives ``lowest`` 1, and a game that stops
    growing at some level (``min(self.level, 2)`` of 3) gives that level.

    The levels are traced from the top down and the tracing stops at the first that differs
    from the top, so a game whose top two levels differ costs two levels' traces. A call that
    fails returns None: the stages that follow report it in their own terms. Its units of work
    are traces (one per seed and level)."""
    budget = budget or Budget.unlimited()
    seeds = _determinism_seeds(cfg)
    budget.plan(levels * len(seeds), "traces")
    top: list[list] = []
    lowest = levels
    try:
        for level in range(levels, 0, -1):
            with open_level(level)() as env:
                do_reset(env, seeds[0], cfg.max_obs_chars)
                actions = probe_actions(tool_names(env))[: cfg.max_turns]
                for i, seed in enumerate(seeds):
                    trace = [(what, x[:4] if what.startswith("step(") else x)
                             for what, x in _trace(env, seed, actions, cfg)]
                    budget.advance()
                    if level == levels:
                        top.append(trace)
                    elif trace != top[i]:
                        return (lowest, seeds) if lowest < levels else None
            lowest = level
    except CheckBudgetExceeded:
        raise
    except (ContractError, EnvError):
        return None
    return lowest, seeds


#: Seeds whose first observation is checked for a printed answer, and the most seeds drawn to
#: find them. An answer of one character is not checked (:func:`spadework.env.probe.answer_of`:
#: a digit occurs in any text by chance), so where the first seeds' answers are one digit the
#: next seeds are drawn until this many have longer ones: the main job's first accepted design
#: with ``self.answer`` (runs/mechanism-s2u, ``LobachevskyEnv``) printed its answer on every
#: seed, and seeds 1000-1002 drew 8, 4 and 8.
_LEAK_SEEDS = 3
_LEAK_DRAWS = 16

#: What a rejection by each trivial strategy asks the designer to change.
_TRIVIAL_FIX = {
    "": "a win must need the right answer",
    "memorised": ("the actions solution() gives on one seed win the other seeds too: draw what "
                  "the answer depends on (hidden values, the task's numbers) from reset(seed), "
                  "so that each instance needs its own answer"),
    "example": ("playing the example moves the observations show wins: an example move shows "
                "the format only, so make it a move that is never this instance's answer (for "
                "example a fixed value outside the answers' range), never the answer itself"),
}


def copy_examples() -> Callable[[int, str], str]:
    """An episode's policy that plays the concrete boxed moves its observations show, each once,
    in the order shown, then the last again: what a small agent does that copies the example
    (run q8, 2026-12-05: a designed game whose ``example()`` returned its answer passed every
    stage, the agent winning by writing the example back)."""
    played: list[str] = []

    def policy(_turn: int, obs: str) -> str:
        for move in concrete_examples(obs):
            if move not in played:
                played.append(move)
                return box(move)
        return box(played[-1]) if played else ""
    return policy


def _strategies(cfg: CheckConfig, tools: list[str],
                memorised: list[str]) -> dict[str, list[tuple[int, Callable[[int, str], str]]]]:
    """Each trivial strategy's episodes as (seed, policy(turn, observation)). ``memorised``: the
    actions solution() gave on seed ``cfg.seed + 1000``, replayed word for word on other seeds
    (its last action repeated past its end): when they win there, the answer does not depend on
    the instance and an agent wins by remembering one reply sequence. ``example``: the boxed
    moves the observations show, copied (:func:`copy_examples`)."""
    base, n_fixed = cfg.seed + 1000, max(1, cfg.trivial_episodes // 4)

    def rand(seed: int) -> Callable[[int, str], str]:
        rng = random.Random(f"{cfg.seed}:{seed}")
        return lambda _turn, _obs: random_action(rng, tools)

    return {
        "random": [(base + e, rand(base + e)) for e in range(cfg.trivial_episodes)],
        "empty": [(base + e, lambda _turn, _obs: "") for e in range(n_fixed)],
        "repeated": [
            (base + e, lambda _turn, _obs, a=REPEATED[e % len(REPEATED)]: a) for e in range(n_fixed)
        ],
        "memorised": [
            (base + 1 + e, lambda turn, _obs: memorised[min(turn, len(memorised) - 1)])
            for e in range(cfg.trivial_episodes)
        ],
        "example": [(base + e, copy_examples()) for e in range(cfg.trivial_episodes)],
    }


def trivial_rates(open_env: Opener, cfg: CheckConfig, budget: Budget | None = None, *,
                  enforce: bool = True) -> dict[str, tuple[int, int]]:
    """Each trivial strategy's (wins, episodes), after checking that the answer is not printed
    in the first observation (ContractError when it is). ``enforce``: also raise ContractError
    at the first strategy winning more than ``trivial_rate`` of its episodes. Its units of work
    are the episodes."""
    budget = budget or Budget.unlimited()
    base = cfg.seed + 1000
    with open_env() as env:
        firsts, solutions, checked = {}, {}, 0
        for seed in range(base, base + _LEAK_DRAWS):
            if seed >= base + _LEAK_SEEDS and checked >= _LEAK_SEEDS:
                break
            obs = do_reset(env, seed, cfg.max_obs_chars)
            solutions[seed] = call_env("solution()", env.solution)
            firsts[seed] = (obs, answer_of(solutions[seed]))
            checked += firsts[seed][1] is not None
        leak = find_leak(firsts)
        if leak:
            raise ContractError(f"answer leaked: {leak}; state the task, never its answer")
        rates: dict[str, tuple[int, int]] = {}
        strategies = _strategies(cfg, tool_names(env), solution_actions(solutions[base]))
        budget.plan(sum(len(episodes) for episodes in strategies.values()), "episodes")
        for name, episodes in strategies.items():
            wins = 0
            for seed, policy in episodes:
                wins += play(env, seed, policy, cfg.max_turns, cfg.max_obs_chars)
                budget.advance()
            rates[name] = (wins, len(episodes))
            if enforce and wins / len(episodes) > cfg.trivial_rate:
                raise ContractError(
                    f"trivial: {name} replies won {wins} of {len(episodes)} episodes "
                    f"({wins / len(episodes):.0%} > {cfg.trivial_rate:.0%}); "
                    + _TRIVIAL_FIX.get(name, _TRIVIAL_FIX[""]))
    return rates


def not_trivial_stage(open_env: Opener, cfg: CheckConfig, budget: Budget | None = None) -> str:
    """The answer is not printed in the first observation, and no trivial strategy (random,
    empty, the same reply repeated, one instance's solution replayed on the others, the example
    moves shown copied) wins more than ``trivial_rate`` of its episodes (:func:`trivial_rates`)."""
    rates = trivial_rates(open_env, cfg, budget)
    return ("wins by " + ", ".join(f"{name} {w}/{n}" for name, (w, n) in rates.items())
            + "; answer not in the first observation")

"""The checker's ``visible`` stage: the answer follows from what the agent sees.

``solution()`` stands for a good agent, so it may only play what an agent could: each move a
function of the observations shown so far. Replaying it on many seeds and recording, before each
move, everything the agent has seen (the tool schemas, the first observation, its own earlier
moves and the observations they got), two seeds with the same history but a different next move
prove that the move depends on something the agent was never shown: a hidden number, a rule
that is not stated, an input left out of the task text. No agent can win such an environment
except by luck, so it is rejected, naming the two seeds and the observation they share.

Measured before this stage existed: 10 of the 11 environments the Qwen2.5-Coder-1.5B designer
got accepted hid their inputs (docs/results.md, "Designer validity"), and the 0.5B agent won none of them.
A bisection that uses higher/lower feedback passes (its moves differ only after the feedback
does); returning the hidden number at once does not.

Games only, for now: the tool-use starters' ``solution()`` (``ToolEnv.fit_turns``) packs calls
whose arguments come from an earlier call's result into one reply when the turn limit is tight,
which this stage rightly flags (4 of the 6 fail it at 4 turns); making them play call by call is
the tool-use setting's work, so tool-use environments are reported, not judged, here.

The contents of the boxes in an observation do not count as shown: an example move
(``for example \\boxed{6 8}``) illustrates the format, and the agent is never told that it
holds the task's numbers. A game whose task said "Given the first two numbers of the Fibonacci
sequence, what is the next term?" and printed the two numbers only as its example move passed
this stage before (run m, 2026-12-05: 0 of 30 plays won, with or without the hint, the agent
writing the example back or guessing Fibonacci numbers); its seeds now share one observation.
The agent's own moves still count, as the history's moves.

Moves are compared as the agent's parser reads them (the content of the last ``\\boxed{}`` for
games), so ``"I say \\boxed{5}"`` and ``"\\boxed{5}"`` are the same move. Known blind spot: an
environment that prints something different on every seed (a random name, a decoy number) makes
every history unique, and the stage cannot tell what the answer depends on; it needs histories
that repeat, which hidden-answer designs produce (one fixed task text, many answers).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from spadework.env.budget import Budget
from spadework.env.gameenv.boxes import empty_boxes, extract_boxed
from spadework.env.probe import Opener, call_env, do_reset, do_step, short, solution_actions
from spadework.errors import ContractError
from spadework.settings.check import CheckConfig

#: What a rejection asks the designer to change.
FIX = ("every move of solution() must follow from what the agent has been shown: put the numbers "
       "and rules the answer depends on into the observation, or let solution() find the answer "
       "from the feedback as an agent would (for example a bisection with higher/lower replies)")


def canonical_move(action: str) -> str:
    """A move as the agent's parser reads it: a box's content, else the stripped text.

    >>> canonical_move("I pick \\\\boxed{ 5 }"), canonical_move("<answer>3</answer>")
    ('5', '<answer>3</answer>')
    """
    boxed = extract_boxed(action)
    return boxed if boxed is not None else action.strip()


def visible_stage(open_env: Opener, cfg: CheckConfig, seeds: Sequence[int],
                  budget: Budget | None = None, setting: str = "games") -> str:
    """Replay solution() from reset(seed) on every seed of ``seeds``; raise ContractError when
    two seeds show the agent the same history but solution() plays different next moves (see
    the module docstring). Returns a summary with how many distinct first observations the
    seeds gave (a stage that saw every history once has proved little, and says so)."""
    if setting != "games":
        return "tool use: not judged yet (ToolEnv.fit_turns packs dependent calls into one reply)"
    budget = budget or Budget.unlimited()
    seeds = list(seeds)
    budget.plan(len(seeds), "seeds")
    first_move: dict[tuple, tuple[int, str, str]] = {}  # history -> (seed, move, last observation)
    openings: set[str] = set()
    with open_env() as env:
        for seed in seeds:
            obs = do_reset(env, seed, cfg.max_obs_chars)
            tools = call_env("tools()", env.tools) or []
            opening = empty_boxes(obs)  # what the agent is told (see the module docstring)
            openings.add(opening)
            history: tuple = (json.dumps(tools, sort_keys=True, default=str), opening)
            actions = solution_actions(call_env("solution()", env.solution))
            for k, action in enumerate(actions, 1):
                move = canonical_move(action)
                seen = first_move.setdefault(history, (seed, move, obs))
                if seen[1] != move:
                    boxes = ("; what is inside a box, such as the example move, does not count "
                             "as shown" if seen[2] != obs else "")
                    raise ContractError(
                        f"hidden answer: seeds {seen[0]} and {seed} show the agent the same "
                        f"{'observation' if k == 1 else f'{k - 1} move(s) and observations'} "
                        f"(last: {short(obs, 100)}{boxes}), but solution() plays "
                        f"{short(seen[1], 30)} on one and {short(move, 30)} on the other as move "
                        f"{k}; {FIX}")
                step = do_step(env, action, cfg.max_obs_chars)
                obs = step.obs
                history = (*history, move, empty_boxes(obs))
                if step.done:
                    break
            budget.advance()
    repeated = len(seeds) - len(openings)
    return (f"solution() plays from what the agent sees on {len(seeds)} seeds "
            f"({len(openings)} distinct first observations"
            + (", none repeated: nothing to compare" if repeated == 0 else "") + ")")

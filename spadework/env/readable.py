"""The checker's ``readable`` stage (games): a small agent can read what the environment says.

Measured (``../shared/reference/small-agent-probe.md``): the base Qwen2.5-Coder-0.5B wins a
one-digit sum 1 time in 10 when the task says ``Answer as \\boxed{N}`` and the feedback is one
word, and 8 in 10 when the task shows a concrete example move and the feedback restates the
format. Small models copy a placeholder (``\\boxed{N}``) as their move and answer a one-word
observation as if continuing a dialogue. So an environment must:

1. show a concrete example of a well-formed move in its first observation (``\\boxed{5}``, not
   ``\\boxed{N}``, ``\\boxed{...}`` or ``\\boxed{<answer>}``; :func:`is_placeholder`);
2. answer a reply without a box with a format reminder that shows a concrete example;
3. answer a well-formed but wrong move, when the game goes on, with feedback that restates the
   format with a concrete example.

The well-formed wrong move is the first observation's own example (replayed on a few seeds until
one does not win). Tool-use environments are ``ToolEnv`` subclasses, whose base class writes
the call format into every observation, so the stage checks games only.
"""

from __future__ import annotations

from spadework.env.budget import Budget
from spadework.env.gameenv.boxes import box, boxes, is_placeholder
from spadework.env.probe import Opener, do_reset, do_step, short
from spadework.errors import ContractError
from spadework.settings.check import CheckConfig

#: A reply with no box at all (what a small model writes when it forgets the format).
MALFORMED = "I am not sure which move to make."
_SEEDS = 4

FIX_FIRST = ("end the first observation with the answer format and one concrete example move, e.g. "
             "'Reply with your guess in a box, for example \\\\boxed{5}.' (a real move, never a "
             "placeholder such as \\\\boxed{N} or \\\\boxed{...}; subclassing GameEnv does this)")
FIX_FEEDBACK = ("restate the answer format with a concrete example in every observation while the "
                "game goes on, e.g. '12 is too high. Guesses left: 2. Reply with your next guess "
                "in a box, for example \\\\boxed{5}.' (subclassing GameEnv does this)")


def concrete_examples(observation: str) -> list[str]:
    """The boxed moves of an observation that are concrete (not placeholders), in order.

    >>> concrete_examples("Answer as \\\\boxed{N}, for example \\\\boxed{12}.")
    ['12']
    """
    return [b for b in boxes(observation) if not is_placeholder(b)]


def _placeholders(observation: str) -> str:
    found = [b for b in boxes(observation) if is_placeholder(b)]
    return f" (only the placeholder {box(found[0])})" if found else ""


def readable_stage(open_env: Opener, cfg: CheckConfig, setting: str = "games",
                   budget: Budget | None = None) -> str:
    """Check the three rules of the module docstring; raise ContractError naming the first one
    broken, with what to write instead. Its units of work are the seeds it resets."""
    budget = budget or Budget.unlimited()
    if setting != "games":
        return "tool use: the ToolEnv base class writes the call format into its observations"
    seeds = [cfg.seed + 2000 + i for i in range(_SEEDS)]
    budget.plan(len(seeds) + 1, "seeds")
    with open_env() as env:
        first = do_reset(env, seeds[0], cfg.max_obs_chars)
        examples = concrete_examples(first)
        if not examples:
            raise ContractError(f"unreadable: the first observation shows no concrete example "
                                f"move{_placeholders(first)}: {short(first, 100)}; {FIX_FIRST}")
        step = do_step(env, MALFORMED, cfg.max_obs_chars)
        budget.advance()
        if not step.done and not concrete_examples(step.obs):
            raise ContractError(f"unreadable: a reply without a box got {short(step.obs, 100)}, "
                                f"which does not show the answer format with a concrete example"
                                f"{_placeholders(step.obs)}; {FIX_FEEDBACK}")
        checked = None
        for seed in seeds:
            obs = do_reset(env, seed, cfg.max_obs_chars)
            budget.advance()
            shown = concrete_examples(obs)
            if not shown:
                raise ContractError(f"unreadable: the first observation of seed {seed} shows no "
                                    f"concrete example move{_placeholders(obs)}; {FIX_FIRST}")
            step = do_step(env, box(shown[0]), cfg.max_obs_chars)
            if step.done:
                continue  # won (the example was the answer) or lost for good: nothing to restate
            if not concrete_examples(step.obs):
                raise ContractError(f"unreadable: the well-formed move {box(shown[0])} got "
                                    f"{short(step.obs, 100)}, which does not restate the answer "
                                    f"format with a concrete example{_placeholders(step.obs)}; "
                                    f"{FIX_FEEDBACK}")
            checked = box(shown[0])
            break
    moved = f"; feedback after {checked} restates it" if checked else (
        "; every example move ended the game, so no feedback to read")
    return f"first observation shows {box(examples[0])}; a reply without a box is reminded{moved}"

"""The reasoning-gym suites: ``rg-hard`` (the reference's A.3 configs), ``rg-hard-disjoint`` and
``rg-default`` (the same tasks at reasoning-gym's default difficulty).

Protocol, as the reference plays it: each task's dataset is ``create_dataset(name, size=500,
seed=42, **config)``; episode ``k`` plays item :func:`~spadework.rg_tasks.episode_items`
``[k]``; the prompt is the item's question followed by the reference's answer instruction (the
sentence its math evaluation appends; the facts file gives no other wording for reasoning-gym);
the answer is the last ``<answer>...</answer>`` of the reply, else its last complete
``\\boxed{...}`` (thinking stripped); the reward is the task's own ``score_answer`` and an
episode is won iff the reward is at least ``1 - 1e-9``. Items are generated, and answers scored,
in the judge worker (:mod:`spadework.evaluate.worker`): a generator that hangs is killed at
``item_seconds`` and its item recorded as ``gen_timeout``, never played.

Departure: the reference drops errored episodes from the denominator; here every item counts, and
a failure is a loss with its status counted in the summary.

Known defects of the benchmark itself, kept because they are its protocol (found by the oracle
and wrong-answer tests, reasoning-gym 0.1.25): ``game_of_life_halting`` scores any non-empty
answer 1.0 (its scorer compares ``bool(answer) == bool(gold)`` and both golds, "True" and
"False", are truthy); ``graph_color``, ``propositional_logic``, ``rubiks_cube`` and ``rush_hour``
have no oracle answer; ``jugs`` item 432's own answer scores 0. Items of
``polynomial_multiplication`` depend on ``PYTHONHASHSEED``; the worker fixes it to 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from spadework.env.actions import extract_boxed, parse_answer, strip_thinking
from spadework.evaluate.items import EvalItem, Sample, Scored
from spadework.evaluate.judge import JudgeError, JudgeTimeout
from spadework.rg_tasks import BUCKETS, RGTask, disjoint_tasks, episode_items, hard_tasks
from spadework.evaluate.suite import RunContext, play_single_turn

#: The reference's answer instruction (appended to every benchmark question, after a newline).
ANSWER_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
WIN_AT = 1 - 1e-9


def extract_answer(reply: str) -> str | None:
    """The answer of a reply: the last ``<answer>`` block, else the last complete box.

    >>> extract_answer(r"so \\boxed{3}. <answer>4</answer>")
    '4'
    >>> extract_answer(r"first \\boxed{1} then \\boxed{2}")
    '2'
    >>> extract_answer("no answer") is None
    True
    """
    tagged = parse_answer(reply)
    if tagged is not None:
        return tagged
    return extract_boxed(strip_thinking(reply))


def prompt_of(question: str) -> str:
    """The user message of a benchmark question (question, newline, the answer instruction)."""
    return f"{question}\n{ANSWER_INSTRUCTION}"


@dataclass(frozen=True)
class RGSuite:
    """One reasoning-gym suite; see the module docstring. ``hard=False`` uses default configs;
    ``only`` restricts the tasks (``rg-hard-disjoint``)."""

    name: str
    hard: bool = True
    only: tuple[str, ...] | None = None
    kind: str = "rg"
    data: tuple[str, ...] = ()

    def tasks(self, per_bucket: int | None) -> list[RGTask]:
        chosen = [t for t in hard_tasks() if self.only is None or t.name in self.only]
        if per_bucket is None:
            return chosen
        return [t for b in BUCKETS for t in [t for t in chosen if t.bucket == b][:per_bucket]]

    def items(self, ctx: RunContext) -> list[EvalItem]:
        """Generate every item in the judge worker; failures become unplayable items."""
        s = ctx.settings
        tasks = self.tasks(s.tasks_per_bucket)
        indices = episode_items(s.items or 8)
        out = []
        for n, task in enumerate(tasks):
            for index in indices:
                item_id = f"{task.name}/{index}"
                base = dict(suite=self.name, task=task.name, bucket=task.bucket, item_id=item_id,
                            index=index)
                try:
                    q, gold = ctx.judge.rg_item(task.name, task.kwargs(self.hard), index,
                                                s.item_seconds)
                except JudgeTimeout:
                    out.append(EvalItem(**base, status="gen_timeout",
                                        error=f"generation passed {s.item_seconds:g} s; killed"))
                    continue
                except JudgeError as e:
                    out.append(EvalItem(**base, status="gen_error", error=e.reason))
                    continue
                msg = {"role": "user", "content": prompt_of(q)}
                out.append(EvalItem(**base, messages=(msg,), gold=gold))
            ctx.progress(n + 1, len(tasks), "generating items")
        return out

    def score(self, ctx: RunContext, item: EvalItem, reply: str) -> Scored:
        answer = extract_answer(reply)
        if answer is None:
            return Scored(None, 0.0, False)
        task = next(t for t in hard_tasks() if t.name == item.task)
        try:
            reward = ctx.judge.rg_score(item.task, task.kwargs(self.hard), item.index, answer,
                                        ctx.settings.item_seconds)
        except JudgeTimeout:
            return Scored(answer, 0.0, False, "score_timeout", "scoring passed its deadline")
        except JudgeError as e:
            return Scored(answer, 0.0, False, "score_error", e.reason)
        return Scored(answer, reward, reward >= WIN_AT)

    def run(self, ctx: RunContext) -> list[Sample]:
        items = self.items(ctx)
        return play_single_turn(ctx, items, lambda item, reply: self.score(ctx, item, reply))


def rg_suites() -> dict[str, RGSuite]:
    """The reasoning-gym suites by name."""
    return {
        "rg-hard": RGSuite("rg-hard"),
        "rg-hard-disjoint": RGSuite("rg-hard-disjoint", only=disjoint_tasks()),
        "rg-default": RGSuite("rg-default", hard=False),
    }

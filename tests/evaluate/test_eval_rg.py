"""reasoning-gym suites: the reference's table and items, extraction, the judge, oracle and wrong
policies, and the generator that never finishes."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from spadework.env.actions import format_answer, format_boxed
from spadework.evaluate.judge import Judge
from spadework.evaluate.presets import SuiteSettings, preset_settings
from spadework.evaluate.rg import RGSuite, extract_answer, prompt_of
from spadework.rg_tasks import (
    BUCKETS,
    disjoint_tasks,
    episode_items,
    hard_tasks,
    task_by_name,
)
from spadework.evaluate.suite import RunContext, play_single_turn
from eval_policies import oracle, wrong

#: Items whose gold answer the task's own scorer does not accept (the facts file: tasks with
#: answer None, and jugs item 432).
NO_ORACLE_TASKS = {"graph_color", "propositional_logic", "rubiks_cube", "rush_hour"}
NO_ORACLE_ITEMS = {"jugs/432"}
#: reasoning-gym 0.1.25's game_of_life_halting scorer gives 1.0 to any non-empty answer.
ANY_ANSWER_WINS = {"game_of_life_halting"}


@pytest.fixture(scope="module")
def judge():
    with Judge() as j:
        yield j


def test_table_is_the_references():
    tasks = hard_tasks()
    assert len(tasks) == 100 and len({t.name for t in tasks}) == 100
    assert Counter(t.bucket for t in tasks) == {"Math": 31, "Algorithmic": 36, "Cognition": 24,
                                                "Logic": 9}
    assert episode_items() == (432, 68, 489, 121, 120, 318, 406, 165)
    assert task_by_name("maze").config == {"min_dist": 10, "max_dist": 15,
                                           "min_grid_size": 25, "max_grid_size": 50}
    assert "countdown" not in disjoint_tasks() and "caesar_cipher" not in disjoint_tasks()


def test_every_config_names_real_fields():
    from reasoning_gym.factory import DATASETS

    for task in hard_tasks():
        fields = {f.name for f in dataclasses.fields(DATASETS[task.name][1])}
        assert set(task.config) <= fields, task.name


@pytest.mark.parametrize("reply, want", [
    (r"\boxed{12}", "12"),
    ("<answer> 7 </answer>", "7"),
    (r"<answer>a</answer> then \boxed{b}", "a"),          # <answer> wins over a box
    (r"\boxed{\frac{1}{2}} and \boxed{3", r"\frac{1}{2}"),  # last *complete* box
    ("<think>\\boxed{1}</think> nothing", None),
    ("", None),
])
def test_extraction(reply, want):
    assert extract_answer(reply) == want


def test_prompt_uses_the_references_instruction():
    assert prompt_of("Q?") == ("Q?\nPlease reason step by step, and put your final answer "
                               "within \\boxed{}.")


def test_the_judge_confines_itself_and_scores_hostile_answers_safely(judge, tmp_path):
    task = task_by_name("string_insertion")  # its scorer eval()s the answer
    target = tmp_path / "pwned"
    judge.rg_item(task.name, task.kwargs(), 432, 60)
    assert {n for n, active, _ in judge.layers if active} >= {"rlimits", "no_new_privs", "seccomp"}
    reward = judge.rg_score(task.name, task.kwargs(), 432,
                            f"open({str(target)!r}, 'w').write('x')", 30)
    assert reward == 0.0 and not target.exists()


def test_math_verify_cases(judge):
    assert judge.math_verify(r"\frac{1}{2}", "0.5", 30)
    assert judge.math_verify("204", "204", 30)
    assert judge.math_verify(r"2\sqrt{2}", r"\sqrt{8}", 30)
    assert not judge.math_verify("3", "4", 30)
    assert not judge.math_verify("11", "no number here", 30)


def test_the_hanging_generator_is_killed_and_recorded(judge):
    settings = SuiteSettings(items=4, item_seconds=3.0)  # episode 3 draws item 121, which hangs
    suite = RGSuite("rg-hard", only=("number_sequence",))
    restarts = judge.restarts
    items = suite.items(RunContext(None, settings, judge))
    assert judge.restarts == restarts + 1  # killed at its deadline
    assert [(it.index, it.status) for it in items] == [
        (432, "ok"), (68, "ok"), (489, "ok"), (121, "gen_timeout")]
    task = task_by_name("number_sequence")
    assert judge.rg_item(task.name, task.kwargs(), 120, 60)[0]  # a fresh worker goes on
    ctx = RunContext(wrong(), settings, judge)
    rows = play_single_turn(ctx, items, lambda it, r: suite.score(ctx, it, r))
    row = next(r for r in rows if r.item_id == "number_sequence/121")
    assert row.status == "gen_timeout" and not row.correct and row.response == ""
    assert sum(r.status == "ok" for r in rows) == 3


def _boxed_or_nothing(answer: str) -> str:
    """The gold in a box, or no answer where a box cannot carry it back (a JSON object's
    braces are what the reference's extraction strips), so such an item must be lost."""
    try:
        return format_boxed(answer)
    except ValueError:
        return ""


def _oracle_run(judge, settings):
    suite = RGSuite("rg-hard")
    ctx = RunContext(None, settings, judge)
    items = suite.items(ctx)
    golds = {it.messages[0]["content"]: it.gold for it in items if it.status == "ok"}
    score = lambda it, r: suite.score(ctx, it, r)  # noqa: E731
    right = play_single_turn(RunContext(oracle(golds, format_answer), settings, judge), items, score)
    boxed = play_single_turn(RunContext(oracle(golds, _boxed_or_nothing), settings, judge), items,
                             score)
    bad = play_single_turn(RunContext(wrong(), settings, judge), items, score)
    return right, boxed, bad


def _check_oracle(right, boxed, bad):
    for rows in (right, boxed):
        unboxable = ({r.item_id for r in rows if r.gold and not _boxed_or_nothing(r.gold)}
                     if rows is boxed else set())
        failed = {r.item_id for r in rows if not r.correct}
        expected = {r.item_id for r in rows
                    if r.task in NO_ORACLE_TASKS or r.item_id in NO_ORACLE_ITEMS} | unboxable
        assert failed == expected
        assert all(r.status == "ok" for r in rows)
    assert {r.task for r in bad if r.correct} <= ANY_ANSWER_WINS
    assert all(r.reward < 1 - 1e-9 for r in bad if r.task not in ANY_ANSWER_WINS)


def test_oracle_wins_and_wrong_loses_on_a_few_tasks_per_bucket(judge):
    settings = SuiteSettings(items=1, tasks_per_bucket=3)
    right, boxed, bad = _oracle_run(judge, settings)
    assert Counter(r.bucket for r in right) == {b: 3 for b in BUCKETS}
    _check_oracle(right, boxed, bad)


@pytest.mark.slow
def test_oracle_scores_one_on_all_of_rg_hard_as_the_paper_plays_it(judge):
    settings = preset_settings("paper", "rg")
    right, boxed, bad = _oracle_run(judge, settings)
    assert len(right) == 800
    timeouts = {r.item_id for r in right if r.status == "gen_timeout"}
    assert timeouts == {"number_sequence/121"}
    right = [r for r in right if r.item_id not in timeouts]
    boxed = [r for r in boxed if r.item_id not in timeouts]
    _check_oracle(right, boxed, [r for r in bad if r.item_id not in timeouts])


def test_an_item_built_from_unseeded_global_randomness_is_the_same_in_every_worker():
    """reasoning-gym 0.1.25's codeio item 68 draws its example from the global random: before
    the worker seeded it per item, two processes printed two questions and `eval compare`
    refused the pair. Two fresh workers, one of which built another item first."""
    kwargs = task_by_name("codeio").kwargs(hard=False)  # rg-default's
    with Judge() as a, Judge() as b:
        b.rg_item("codeio", kwargs, 67, 60)
        assert a.rg_item("codeio", kwargs, 68, 60) == b.rg_item("codeio", kwargs, 68, 60)

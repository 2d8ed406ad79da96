"""Hints: the environment's own hint() is left to the rollout, policy-written hints are checked
against solution() in the real sandbox on the seeds that will be played, leaking ones are dropped
and counted, good ones stored in the archive and reused."""

from __future__ import annotations

import pytest
from design_support import GOOD_CODE, ScriptedPolicy, sb  # noqa: F401 (sb: fixtures)
from starters import starter_records

from spadework.archive import Archive, EnvRecord
from spadework.errors import PolicyError
from spadework.hints import build_hint_prompt, parse_hint, solution_answers, write_hints
from spadework.library import starter_envs
from spadework.seeding import episode_seed
from spadework.types import EnvSource

CHAIN = EnvSource(GOOD_CODE, "ArithmeticChainEnv", "games", "mathematical reasoning")
GOOD_HINT = "Multiply first, add, then reduce modulo m; the feedback says higher or lower."

#: Options are printed in the first observation, so the answer is public (not a secret).
PUBLIC = '''
import random


class ColourEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.answer = random.Random(seed).choice(["crimson", "azure"])
        return "Pick crimson or azure, as \\\\boxed{colour}.", {}

    def step(self, action):
        won = self.answer in action
        return ("yes" if won else "no"), float(won), True, False, {}

    def solution(self):
        return "\\\\boxed{" + self.answer + "}"
'''


@pytest.fixture
def archive(tmp_path):
    with Archive.open(tmp_path / "archive.sqlite") as a:
        for env in (CHAIN, EnvSource(PUBLIC, "ColourEnv", "games", "logical deduction")):
            a.add_env(EnvRecord(env.code, env.class_name, "games", env.skill, "accepted", 0))
        yield a


def answer_for(sb, seed: int) -> str:
    with sb.load(GOOD_CODE, max_turns=20) as h:
        h.reset(seed=seed)
        return solution_answers(h.solution())[0]


def test_good_hint_is_kept_and_stored(sb, archive):
    policy = ScriptedPolicy([[f"Hint: {GOOD_HINT}"]])
    report = write_hints(policy, [CHAIN], sandbox=sb, archive=archive, run_seed=3, plays=4)
    (o,) = report.outcomes
    assert (o.hint, o.source, o.leaked) == (GOOD_HINT, "policy", False) and report.leaked == 0
    assert archive.get_env(CHAIN.env_id).hint == GOOD_HINT
    assert GOOD_CODE.strip() in policy.calls[0][0].messages[1]["content"]


def test_leaking_hint_is_dropped_and_counted(sb, archive):
    seed = episode_seed(3, CHAIN.env_id, 2)  # the third play's instance
    answer = answer_for(sb, seed)
    policy = ScriptedPolicy([[f"Just answer \\boxed{{{answer}}} and you win."]])
    report = write_hints(policy, [CHAIN], sandbox=sb, archive=archive, run_seed=3, plays=4)
    (o,) = report.outcomes
    assert o.hint is None and o.leaked and report.leaked == 1
    assert repr(answer) in o.reason and str(seed) in o.reason and "without a hint" in o.reason
    assert archive.get_env(CHAIN.env_id).hint is None


def test_leak_check_uses_the_seeds_passed_in(sb, archive):
    answer = answer_for(sb, 11)
    assert answer not in (answer_for(sb, 12), answer_for(sb, 13))  # the seeds' answers differ
    hint = f"Think of {answer}."
    kept = write_hints(ScriptedPolicy([[hint]]), [CHAIN], sandbox=sb, archive=archive, run_seed=0,
                       seeds={CHAIN.env_id: [12, 13]}).hints
    assert kept == {CHAIN.env_id: hint}
    archive.set_hint(CHAIN.env_id, "")  # forget it, so the policy is asked again
    dropped = write_hints(ScriptedPolicy([[hint]]), [CHAIN], sandbox=sb, archive=archive,
                          run_seed=0, seeds={CHAIN.env_id: [11]}).hints
    assert dropped == {CHAIN.env_id: None}


def test_answers_printed_in_the_observation_are_public(sb, archive):
    env = EnvSource(PUBLIC, "ColourEnv", "games", "logical deduction")
    hint = "Crimson and azure are equally likely; there is no clue, so just commit."
    out = write_hints(ScriptedPolicy([[hint]]), [env], sandbox=sb, archive=archive, run_seed=0).hints
    assert out == {env.env_id: hint}


def test_env_with_its_own_hint_gets_none_and_no_policy_call(sb, archive):
    nim = next(e for e in starter_envs() if e.name == "nim")
    archive.import_starter(starter_records())
    policy = ScriptedPolicy([])
    report = write_hints(policy, [nim], sandbox=sb, archive=archive, run_seed=0, plays=2)
    assert report.hints == {nim.env_id: None} and report.outcomes[0].source == "env"
    assert policy.calls == []


def test_archived_hint_is_reused_without_asking_the_policy(sb, archive):
    archive.set_hint(CHAIN.env_id, GOOD_HINT)
    policy = ScriptedPolicy([])
    report = write_hints(policy, [CHAIN], sandbox=sb, archive=archive, run_seed=3, plays=3)
    assert report.outcomes[0].source == "archive" and report.hints[CHAIN.env_id] == GOOD_HINT
    assert policy.calls == []


def test_batched_call_and_empty_reply(sb, archive):
    env2 = EnvSource(PUBLIC, "ColourEnv", "games", "logical deduction")
    policy = ScriptedPolicy([["<think>no idea</think>", GOOD_HINT]])
    report = write_hints(policy, [CHAIN, env2], sandbox=sb, archive=archive, run_seed=0, plays=2)
    assert len(policy.calls) == 1 and len(policy.calls[0]) == 2
    assert [o.source for o in report.outcomes] == ["none", "policy"]
    assert report.outcomes[0].reason == "the policy wrote no hint"


def test_prompt_names_the_tool_use_answer_format():
    assert "<answer>" in build_hint_prompt("class A: ...", "tool-use")[1]["content"]
    assert parse_hint('{"hint": "Check stock before ordering."}') == "Check stock before ordering."


def test_archived_hint_is_checked_again_on_the_seeds_played(sb, archive):
    answer = answer_for(sb, 21)
    archive.set_hint(CHAIN.env_id, f"It is {answer}.")
    report = write_hints(ScriptedPolicy([]), [CHAIN], sandbox=sb, archive=archive, run_seed=0,
                         seeds={CHAIN.env_id: [21]})
    assert report.outcomes[0].source == "archive" and report.hints == {CHAIN.env_id: None}
    assert report.leaked == 1


def test_a_failing_policy_leaves_the_env_without_a_hint_and_says_why(sb, archive):
    class Failing(ScriptedPolicy):
        def chat(self, conversations, params):
            raise PolicyError("the server went away")

    report = write_hints(Failing([]), [CHAIN], sandbox=sb, archive=archive, run_seed=0, plays=2)
    (o,) = report.outcomes
    assert (o.hint, o.source) == (None, "none") and "the server went away" in o.reason
    assert report.sources == {"none": 1}

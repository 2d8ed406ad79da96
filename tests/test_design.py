"""The designer: generation through a scripted policy and the real sandbox and archive (every
outcome recorded, retries with fresh documents, repair turns marked, novelty, memory in the
prompt), and `spadework design` end to end with the real default model (one tiny batched call)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from design_support import (  # noqa: F401 (archive and sb: fixtures)
    FIXTURES, GOOD_CODE, ScriptedPolicy, archive, bad, corpus, fenced, sb,
)
from starters import starter_records

from spadework.archive import Archive
from spadework.designer import (
    REPLY_STAGE,
    DesignConfig,
    build_design_prompt,
    design_environments,
    is_repair,
    rejection_progress,
    screen_reply,
    summarize,
)
from spadework.designer.credit import reply_structure
from spadework.env.checker import CheckConfig
from spadework.errors import ConfigError
from spadework.library import starter_envs
from spadework.skills import skill_named, skills_for
from spadework.types import env_id_of

GAMES = skills_for("games")
CHECK = CheckConfig(trivial_episodes=8, determinism_seeds=2)


def run(policy, sb, archive, n, cfg=None, iteration=0, skills=GAMES, progress=None):
    return design_environments(policy, sb, archive, corpus(), n=n, iteration=iteration, run_seed=7,
                               skills=skills, cfg=cfg or DesignConfig(attempts_per_slot=1),
                               check_config=CHECK, progress=progress)


def test_accepted_design_is_archived_with_its_sample(sb, archive):
    policy = ScriptedPolicy([[fenced(GOOD_CODE)]])
    seen = []
    (res,) = run(policy, sb, archive, 1, progress=lambda done, total: seen.append((done, total)))
    assert res.env is not None and res.env.code.strip() == GOOD_CODE.strip()
    assert res.skill == GAMES[0].name and res.env.class_name == "ArithmeticChainEnv"
    (a,) = archive.attempts(0)
    assert a.outcome == "accepted" and a.env_id == res.env.env_id and a.reason == ""
    assert a.output_ids == res.attempts[0].output_ids and len(a.logprobs) == len(a.output_ids) > 0
    assert a.messages[1]["content"] == policy.calls[0][0].messages[1]["content"]
    rec = archive.get_env(a.env_id)
    assert rec.status == "accepted" and rec.skill == GAMES[0].name and rec.doc_id
    assert [r.stage for r in rec.report.results][:2] == ["extract", "static"] and rec.report.ok
    assert seen == [(0, 1), (1, 1), (1, 1)]  # a bar from the start, one attempt judged, the end


def test_a_reply_caught_in_a_loop_is_stopped_and_rejected_at_the_reply_stage(sb, archive):
    """The designer samples with ``stop_at_repeat`` (default 4): a reply writing one line over
    and over ends at its 4th copy in a row instead of at max_tokens, and is rejected as a loop."""
    loop = "```python\nclass A:\n" + "        self.x = rng.choice([1, 2, 3])\n" * 40
    (res,) = run(ScriptedPolicy([[loop]]), sb, archive, 1, cfg=DesignConfig(attempts_per_slot=1))
    a = res.attempts[0]
    assert a.outcome == REPLY_STAGE and a.finish_reason == "repeat" and "loop" in a.reason
    assert a.reply.count("rng.choice") == 4
    (off,) = run(ScriptedPolicy([[loop]]), sb, archive, 1,
                 cfg=DesignConfig(attempts_per_slot=1, stop_at_repeat=0))
    assert off.attempts[0].finish_reason != "repeat"
    assert off.attempts[0].reply.count("rng.choice") == 40


def test_every_rejection_stage_is_recorded(sb, archive):
    archive.import_starter(starter_records())
    nim = next(e for e in starter_envs() if e.name == "nim").code
    replies = [
        ("", "stop"), (fenced(GOOD_CODE)[:300], "length"), "I cannot write code today.",
        fenced(bad("import_os")), fenced(bad("init_raises")), fenced(bad("never_truncates")),
        fenced(bad("nondeterministic_reset")), fenced(bad("solution_does_not_win")),
        fenced(bad("always_wins")), fenced(nim),
    ]
    expected = [REPLY_STAGE, REPLY_STAGE, "extract", "static", "load", "contract", "determinism",
                "solvable", "not_trivial", "novelty"]
    long_enough = DesignConfig(attempts_per_slot=1, max_tokens=4096)  # nim is ~1,500 fake tokens
    results = run(ScriptedPolicy([replies]), sb, archive, len(replies), cfg=long_enough)
    assert [r.attempts[0].outcome for r in results] == expected
    assert all(r.env is None and r.attempts[0].reason for r in results)
    assert "cut at max_tokens" in results[1].attempts[0].reason
    for r in results[3:9]:  # extracted code is archived as rejected, with its stage
        rec = archive.get_env(r.attempts[0].env_id)
        assert rec.status == "rejected" and rec.failed_stage == r.attempts[0].outcome
    assert all(r.attempts[0].env_id is None for r in results[:3])
    assert archive.get_env(env_id_of(nim)).status == "accepted"  # the archived original is untouched
    s = summarize(results, 1.0)
    assert s.accepted == 0 and s.rejected_by_stage["reply"] == 2 and sum(s.rejected_by_stage.values()) == 10
    # graded rejection (RewardConfig.rejection_progress): each stage passed is worth more, and a
    # truncated module more than an empty reply
    progress = [rejection_progress(r.attempts[0]) for r in results]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    assert progress[0] == 0.0 and 0 < progress[1] < progress[2] == pytest.approx(1 / 11)
    assert progress[-1] < 1.0


def test_retries_use_fresh_documents_and_batch_only_open_slots(sb, archive):
    # slot 0 is accepted at once; slot 1 fails twice, then succeeds
    script = [[fenced(GOOD_CODE), "junk"], ["still junk"], [fenced(GOOD_CODE.replace("(a * b + c)", "(a*b+c)"))]]
    # the third reply is a near-copy of slot 0's accepted env: novelty rejects it within the call
    policy = ScriptedPolicy(script)
    results = run(policy, sb, archive, 2, cfg=DesignConfig(attempts_per_slot=3))
    assert [len(c) for c in policy.calls] == [2, 1, 1]
    assert [a.outcome for a in results[1].attempts] == ["extract", "extract", "novelty"]
    docs = [a.doc_id for a in results[1].attempts]
    c = corpus()
    assert docs == [c.sample(7, 0, 1, r).doc_id for r in range(3)]
    prompts = [a.messages[1]["content"] for a in results[1].attempts]
    assert all(c.sample(7, 0, 1, r).text in p for r, p in zip(range(3), prompts))
    assert [a.attempt for a in results[1].attempts] == [0, 1, 2]


def test_batches_shrink_to_the_open_slots(sb, archive):
    policy = ScriptedPolicy([[fenced(GOOD_CODE), "junk", "junk"], ["junk", "junk"], ["junk", "junk"]])
    results = run(policy, sb, archive, 3, cfg=DesignConfig(attempts_per_slot=3))
    assert [len(c) for c in policy.calls] == [3, 2, 2]
    assert [len(r.attempts) for r in results] == [1, 3, 3] and results[0].env is not None


def test_repair_turn_is_archived_and_never_trained(sb, archive):
    policy = ScriptedPolicy([["no code, sorry"], [fenced(GOOD_CODE)]])
    (res,) = run(policy, sb, archive, 1, cfg=DesignConfig(attempts_per_slot=1, repair_turns=2))
    first, repair = res.attempts
    assert first.outcome == "extract" and repair.outcome == "accepted" and res.env is not None
    assert not is_repair(first) and is_repair(repair)
    assert [m["role"] for m in repair.messages] == ["system", "user", "assistant", "user"]
    assert repair.messages[2]["content"] == "no code, sorry" and "extract" in repair.messages[3]["content"]
    stored = {a.attempt: a for a in archive.attempts(0)}
    assert stored[1].trained_iteration == 0  # marked: the learner never trains on a repair
    assert stored[0].trained_iteration is None  # the first attempt waits for its rejection reward
    assert len(policy.calls) == 2  # no repair after acceptance


def test_a_fresh_repair_asks_again_without_the_rejected_reply(sb, archive):
    """``repair = "fresh"``: the attempt's own prompt plus the verdict, never the rejected reply
    (which a small designer copied back in 10 of 14 chat repairs); still a repair, never trained."""
    policy = ScriptedPolicy([["no code, sorry"], [fenced(GOOD_CODE)]])
    (res,) = run(policy, sb, archive, 1, cfg=DesignConfig(attempts_per_slot=1, repair_turns=1,
                                                          repair="fresh"))
    first, repair = res.attempts
    assert first.outcome == "extract" and repair.outcome == "accepted" and res.env is not None
    assert [m["role"] for m in repair.messages] == ["system", "user"]
    text = repair.messages[1]["content"]
    assert "no code, sorry" not in text and "rejected at the extract stage" in text
    assert text.startswith(first.messages[1]["content"].rpartition("\n\n")[0])
    assert is_repair(repair) and not is_repair(first)
    assert {a.attempt: a for a in archive.attempts(0)}[1].trained_iteration == 0
    with pytest.raises(ConfigError, match="repair must be one of"):
        DesignConfig(repair="again")


def test_rejected_first_attempts_none_gives_no_gradient(sb, archive):
    cfg = DesignConfig(attempts_per_slot=2, rejected_first_attempts="none")
    run(ScriptedPolicy([["junk"], [fenced(GOOD_CODE)]]), sb, archive, 1, cfg=cfg)
    marks = {a.attempt: a.trained_iteration for a in archive.attempts(0)}
    assert marks == {0: 0, 1: None}


def test_two_slots_cannot_accept_the_same_environment(sb, archive):
    results = run(ScriptedPolicy([[fenced(GOOD_CODE), fenced(GOOD_CODE)]]), sb, archive, 2)
    assert [r.attempts[0].outcome for r in results] == ["accepted", "novelty"]


def test_memory_examples_and_warnings_appear_in_the_prompt(sb, archive):
    archive.import_starter(starter_records())
    skill = skill_named("mathematical reasoning")
    by_name = {e.name: e for e in starter_envs()}
    good, easy = by_name["countdown"], by_name["nim"]
    archive.record_env_stats(good.env_id, 0, plays=10, wins=5, regret=0.3)
    archive.record_env_stats(easy.env_id, 0, plays=10, wins=10, regret=0.0)
    roomy = DesignConfig(attempts_per_slot=1, example_share=10.0)  # the starters are long modules
    (res,) = run(ScriptedPolicy([["junk"]]), sb, archive, 1, cfg=roomy, skills=[skill], iteration=1)
    prompt = res.attempts[0].messages[1]["content"]
    assert good.code.strip() in prompt and "win rate 0.50" in prompt
    assert "Avoid designs like NimEnv (" in prompt and "too easy for the agent" in prompt
    assert "class NimEnv" not in prompt  # named and summarized, never shown as code
    assert set(res.attempts[0].memory_ids) == {good.env_id, easy.env_id}


def test_memory_longer_than_the_reply_budget_is_not_shown(sb, archive):
    """A designer imitates its examples: a module longer than it may write is cut before its end."""
    archive.import_starter(starter_records())
    countdown = next(e for e in starter_envs() if e.name == "countdown")
    archive.record_env_stats(countdown.env_id, 0, plays=10, wins=5, regret=0.3)
    skill = skill_named("mathematical reasoning")
    cfg = DesignConfig(attempts_per_slot=1, max_tokens=1024)
    assert len(countdown.code) > cfg.example_chars
    (res,) = run(ScriptedPolicy([["junk"]]), sb, archive, 1, cfg=cfg, skills=[skill], iteration=1)
    assert countdown.code.strip() not in res.attempts[0].messages[1]["content"]
    assert countdown.env_id not in res.attempts[0].memory_ids
    wide = DesignConfig(attempts_per_slot=1, max_tokens=len(countdown.code))
    (res,) = run(ScriptedPolicy([["junk"]]), sb, archive, 1, cfg=wide, skills=[skill], iteration=1)
    assert countdown.code.strip() in res.attempts[0].messages[1]["content"]


def test_memory_is_dropped_to_fit_the_context(sb, archive):
    archive.import_starter(starter_records())
    countdown = next(e for e in starter_envs() if e.name == "countdown")
    archive.record_env_stats(countdown.env_id, 0, plays=10, wins=5, regret=0.3)
    skill = skill_named("mathematical reasoning")
    (res,) = run(ScriptedPolicy([["junk"]], context_length=2048), sb, archive, 1, skills=[skill])
    assert countdown.code.strip() not in res.attempts[0].messages[1]["content"]
    assert res.attempts[0].memory_ids == ()


def test_config_errors_name_the_setting():
    with pytest.raises(ConfigError, match="attempts_per_slot"):
        DesignConfig(attempts_per_slot=0)
    with pytest.raises(ConfigError, match="rejected_first_attempts"):
        DesignConfig(rejected_first_attempts="maybe")
    with pytest.raises(ConfigError, match="mutation_ratio"):
        DesignConfig(mutation_ratio=1.5)
    with pytest.raises(ConfigError, match="example_share"):
        DesignConfig(example_share=0)
    with pytest.raises(ConfigError, match=r"rejections must be an integer >= 0"):
        DesignConfig(rejections=-1)


def test_skills_must_match_the_setting(sb, archive):
    with pytest.raises(ConfigError, match="setting"):
        run(ScriptedPolicy([]), sb, archive, 1, skills=skills_for("tool-use"))


def test_screen_reply_refuses_huge_and_binary():
    assert "over the" in screen_reply("x" * 300_000, "stop", 10)
    assert "binary" in screen_reply("abc\x00def", "stop", 10)
    assert screen_reply(fenced(GOOD_CODE), "stop", 10) is None


def test_prompt_names_negatives_with_reason_and_summary_without_code():
    from spadework.archive import MemoryNegative

    neg = MemoryNegative("ab" * 32, "NimEnv", "x", 0.98, "too easy", "Nim with two heaps.")
    text = build_design_prompt("A doc.", GAMES[0], negatives=[neg])[1]["content"]
    assert "NimEnv (Nim with two heaps.): it was too easy for the agent (win rate 0.98)" in text
    assert "class NimEnv" not in text


@pytest.mark.slow
def test_design_command_with_the_real_model(tmp_path):
    """`spadework design` through a subprocess: the real default model, one batched call of two
    slots on a tiny token budget (8 tokens cannot hold a module: both are rejected replies)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "spadework.cli", "design", "--n", "2", "--attempts", "1",
           "--max-tokens", "8", "--run-dir", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=280)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "attempts" in out.stdout and "rejected at reply" in out.stdout
    with Archive.open(tmp_path / "archive.sqlite", create=False) as a:
        stored = a.attempts()
    assert [(x.slot, x.attempt) for x in stored] == [(0, 0), (1, 0)]
    for x in stored:
        assert x.outcome == "reply" and "max_tokens=8" in x.reason and x.finish_reason == "length"
        assert len(x.output_ids) == len(x.logprobs) == 8 and len(x.prompt_ids) > 500
        assert all(math.isfinite(v) and v <= 0 for v in x.logprobs)
    assert stored[0].doc_id != stored[1].doc_id and stored[0].skill != stored[1].skill


def test_tool_use_designs_take_the_same_path(sb, archive):
    shipping = next(e for e in starter_envs() if e.name == "tool_shipping")
    cfg = DesignConfig(setting="tool-use", attempts_per_slot=1, max_tokens=4096)
    (res,) = run(ScriptedPolicy([[fenced(shipping.code)]]), sb, archive, 1, cfg=cfg,
                 skills=skills_for("tool-use"))
    assert res.env is not None and res.env.setting == "tool-use", res.attempts[0].reason
    system = res.attempts[0].messages[0]["content"]
    assert "subclass of ToolEnv" in system and "class PantryEnv(ToolEnv)" in system  # the guide
    assert archive.get_env(res.env.env_id).setting == "tool-use"


def test_reply_structure_tells_prose_from_the_beginnings_of_a_module():
    assert reply_structure("I am ready. The environment will be about tides.") == 0.0
    partial = reply_structure(fenced(GOOD_CODE)[:200])
    assert 0 < partial < reply_structure(fenced(GOOD_CODE)) == 1.0
    assert reply_structure("class Env:\n    def reset(self):\n") == pytest.approx(2 / 7)


def test_a_design_named_after_a_benchmark_task_is_flagged(sb, archive):
    """A class named after a held-out benchmark task (reasoning-gym's basic_arithmetic) is
    archived with that match, so a run does not quietly train on its own test."""
    named = GOOD_CODE.replace("ArithmeticChainEnv", "BasicArithmeticEnv")
    (res,) = run(ScriptedPolicy([[fenced(named)]]), sb, archive, 1)
    rec = archive.get_env(res.attempts[0].env_id)
    assert rec.status == "accepted" and rec.benchmarks == ("basic_arithmetic",)
    plain = archive.get_env(run(ScriptedPolicy([[fenced(GOOD_CODE.replace("(a * b + c)", "(c + a * b)"))]]),
                                sb, archive, 1, iteration=1)[0].attempts[0].env_id)
    assert plain.benchmarks == ()


def test_a_stream_runs_each_slots_tries_as_soon_as_its_reply_is_judged(sb, archive):
    """Through a policy that streams, a slot's repair turn and its next fresh attempt are asked
    as soon as its reply is judged: the same attempts, outcomes and documents as round by round
    with chat (each try has its own seed), the repair continuing its attempt's conversation,
    each try archived as it is judged."""
    from scripted_policy import StreamingScriptedPolicy

    lock = (FIXTURES / "good" / "combination_lock.py").read_text()
    c = corpus()

    def script(conv, turn):
        text = conv.messages[1]["content"]
        slot = next(i for i in range(3) if GAMES[i].name in text)  # slot i designs for skill i
        r = next(r for r in range(2) if c.sample(7, 0, slot, r).text in text)
        if slot == 0:
            return fenced(GOOD_CODE)  # accepted at once
        if slot == 1:  # no code, nor in its repair; its second attempt is another game
            return fenced(lock) if r == 1 else "no code, sorry"
        return "still no code"  # every try fails

    cfg = DesignConfig(attempts_per_slot=2, repair_turns=1)
    by_rounds = run(ScriptedPolicy(script), sb, archive, 3, cfg=cfg)
    streaming = StreamingScriptedPolicy(script)
    with Archive.open(archive.path.with_name("streamed.sqlite")) as other:
        streamed = run(streaming, sb, other, 3, cfg=cfg)
        stored = other.attempts(0)

    def tries(results):
        return [[(a.attempt, a.outcome, a.doc_id, len(a.messages)) for a in r.attempts] for r in results]

    assert tries(streamed) == tries(by_rounds)
    assert [[a.outcome for a in r.attempts] for r in streamed] == [
        ["accepted"], ["extract", "extract", "accepted"], ["extract"] * 4]
    assert streaming.streamed == 1 + 3 + 4 and len(stored) == 8
    repair = streamed[1].attempts[1]
    assert is_repair(repair) and repair.messages[2]["content"] == "no code, sorry"


def test_a_planned_design_asks_for_its_game_first_then_its_module(sb, archive):
    """``DesignConfig.plan``: a fresh games design is a short plan turn (the document, the skill,
    three lines asked for) and then the module turn in the same conversation, without the
    document again; the module is the slot's first attempt (not a repair), its prompt carries
    the plan's reply, and chat and the stream ask the same turns with the same seeds."""
    from scripted_policy import StreamingScriptedPolicy

    from spadework.designer.plan import AFTER_PLAN, PLAN_ASK, PLAN_TOKENS

    asked = []

    def script(conv, turn):
        last = conv.messages[-1]["content"]
        if last.endswith(PLAN_ASK):
            asked.append("plan")
            return "Values: a, b, c from 1-9\nQuestion: a * b + c?\nAnswer: a * b + c"
        asked.append("module")
        return fenced(GOOD_CODE)

    cfg = DesignConfig(attempts_per_slot=1, plan=True)
    policy = ScriptedPolicy(script)
    chat = run(policy, sb, archive, 2, cfg=cfg)
    assert asked == ["plan", "plan", "module", "module"]
    plan_call, module_call = policy.calls
    assert [len(c.messages) for c in plan_call] == [2, 2]
    doc = plan_call[0].messages[1]["content"].split("<document>")[1].split("</document>")[0]
    module = module_call[0].messages
    assert [m["role"] for m in module] == ["system", "user", "assistant", "user"]
    assert module[2]["content"].startswith("Values:") and AFTER_PLAN in module[3]["content"]
    assert doc.strip() not in module[3]["content"] and "<document>" not in module[3]["content"]
    (a, *_), (b, *_) = (r.attempts for r in chat)
    assert a.outcome == "accepted" and not is_repair(a) and a.messages == tuple(module)
    assert b.outcome == "novelty"  # the same module twice: the second is a copy

    streaming = StreamingScriptedPolicy(script)
    seen = []
    original = streaming.stream

    def spy(requests, params, on_done, *, cells=0):
        def record(q, c):
            seen.append(q.max_tokens)
            return on_done(q, c)
        return original(requests, params, record, cells=cells)

    streaming.stream = spy
    with Archive.open(archive.path.with_name("planned.sqlite")) as other:
        streamed = run(streaming, sb, other, 2, cfg=cfg)
    assert seen == [PLAN_TOKENS, PLAN_TOKENS, None, None]
    assert [[(x.outcome, x.messages, x.output_ids) for x in r.attempts] for r in streamed] == \
        [[(x.outcome, x.messages, x.output_ids) for x in r.attempts] for r in chat]


def test_tool_use_designs_are_not_planned(sb, archive):
    """The plan asks for a game's values and answer: tool-use designs go straight to code."""
    from spadework.designer.plan import PLAN_ASK

    policy = ScriptedPolicy([["no code"]])
    run(policy, sb, archive, 1, cfg=DesignConfig(attempts_per_slot=1, plan=True,
                                                 setting="tool-use"),
        skills=skills_for("tool-use"))
    assert len(policy.calls) == 1 and not policy.calls[0][0].messages[-1]["content"].endswith(PLAN_ASK)


def test_a_design_can_be_shown_no_example_module(sb, archive):
    """``DesignConfig.examples = 0``: a fresh games prompt without the example module (the
    guide and the contract only), planned or not."""
    from spadework.designer.examples import GAMES_EXAMPLE
    from spadework.designer.plan import AFTER_PLAN
    from spadework.designer.prompts import EXAMPLE_INTRO

    body = "self.deposit = rng.randint(1, 9) * 100"
    assert body in GAMES_EXAMPLE
    shown = ScriptedPolicy([["no code"]])
    run(shown, sb, archive, 1, cfg=DesignConfig(attempts_per_slot=1), iteration=2)
    assert body in shown.calls[-1][0].messages[-1]["content"]
    for plan in (False, True):
        policy = ScriptedPolicy([["no code"]] * 2)
        run(policy, sb, archive, 1, cfg=DesignConfig(attempts_per_slot=1, examples=0, plan=plan),
            iteration=int(plan))
        text = policy.calls[-1][0].messages[-1]["content"]
        assert EXAMPLE_INTRO not in text and "CompoundInterestEnv" not in text
        assert body not in text and (AFTER_PLAN in text) == plan

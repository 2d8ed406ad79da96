"""What the designer is shown: the built-in example module (valid under the checker, shown only
when memory has nothing, never accepted as a design), the checklist and line budget of every
prompt, and repair turns that say what a passing module does at the failed stage."""

from __future__ import annotations

import pytest
from design_support import (  # noqa: F401 (archive and sb: fixtures)
    GOOD_CODE, PARCELS, ScriptedPolicy, archive, corpus, fenced, sb,
)
from starters import starter_records

from spadework.designer import DesignConfig, build_design_prompt, design_environments, repair_messages
from spadework.designer.examples import GAMES_EXAMPLE, prompt_examples
from spadework.designer.guides import REPAIR_ADVICE
from spadework.designer.prompts import (fresh_repair_messages, max_lines, rejection_section,
                                        reply_instruction)
from spadework.env.checker import STAGES, CheckConfig, check
from spadework.library import starter_envs
from spadework.skills import skill_named, skills_for

GAMES = skills_for("games")


@pytest.mark.parametrize("max_turns", [1, 4, 10])
def test_the_example_module_passes_the_checker(sb, max_turns):
    report = check(GAMES_EXAMPLE, sandbox=sb, config=CheckConfig(max_turns=max_turns), module=True)
    assert report.ok, report.reason
    assert len(GAMES_EXAMPLE.splitlines()) <= max_lines(1024)  # it keeps the budget it shows


def test_the_example_is_shown_when_memory_is_empty_and_never_accepted(sb, archive):
    renamed = GAMES_EXAMPLE.replace("CompoundInterestEnv", "SavingsEnv").replace("self.deposit", "self.p")
    policy = ScriptedPolicy([[fenced(renamed), fenced(GOOD_CODE)]])
    results = design_environments(policy, sb, archive, corpus(), n=2, iteration=0, run_seed=1,
                                  skills=GAMES, cfg=DesignConfig(attempts_per_slot=1),
                                  check_config=CheckConfig(max_turns=4))
    assert [r.attempts[0].outcome for r in results] == ["novelty", "accepted"]
    assert "near-duplicate" in results[0].attempts[0].reason
    system, prompt = (m["content"] for m in results[0].attempts[0].messages)
    assert "class CompoundInterestEnv" in prompt and "at most 64 lines" in prompt
    assert "level 1 is a small instance a beginner can win" in prompt
    assert prompt.endswith("never assign it. " + reply_instruction(1024))  # the level, last
    # the standing parts open every slot's prompt alike, so the engine computes them once
    assert "task() must show every number the answer is computed from" in system  # the checklist
    assert "subclass of GameEnv" in system and "LEVELS = 3, and setup(self, rng)" in system  # the guide
    assert "level: int = 1" in system and "LEVELS" in system  # the contract
    assert results[1].attempts[0].messages[0]["content"] == system
    assert results[0].attempts[0].memory_ids == ()  # the example is not an archived environment


def test_archived_positives_replace_the_example(sb, archive):
    archive.import_starter(starter_records())
    countdown = next(e for e in starter_envs() if e.name == "countdown")
    archive.record_env_stats(countdown.env_id, 0, plays=10, wins=5, regret=0.3)
    (res,) = design_environments(ScriptedPolicy([["junk"]]), sb, archive, corpus(), n=1, iteration=1,
                                 run_seed=1, skills=[skill_named("mathematical reasoning")],
                                 cfg=DesignConfig(attempts_per_slot=1, example_share=10.0), check_config=CheckConfig())
    prompt = res.attempts[0].messages[1]["content"]
    assert countdown.code.strip() in prompt and "CompoundInterestEnv" not in prompt


def test_tool_use_prompts_show_no_games_example():
    text = build_design_prompt("A doc.", skills_for("tool-use")[0], max_tokens=512)[1]["content"]
    assert "CompoundInterestEnv" not in text and "at most 32 lines" in text
    assert prompt_examples("games") == (GAMES_EXAMPLE,)


def test_a_copy_of_the_tool_guides_example_is_no_design_and_a_module_of_its_shape_is():
    from spadework.designer.guides import SUBCLASS_GUIDE, TOOL_EXAMPLE
    from spadework.env.novelty import NoveltyIndex

    (pantry,) = prompt_examples("tool-use")
    assert pantry == TOOL_EXAMPLE
    index = NoveltyIndex(prompt_examples("tool-use"))
    renamed = pantry.replace("PantryEnv", "LarderEnv").replace("pantry", "larder")
    assert pantry in SUBCLASS_GUIDE and index.most_similar(renamed).similarity >= 0.8
    assert index.most_similar(PARCELS).similarity < 0.5


def test_tool_use_repairs_get_tool_use_advice():
    msgs = [{"role": "user", "content": "design"}]
    text = repair_messages(msgs, "code", "solvable", "left the episode running",
                           setting="tool-use")[-1]["content"]
    assert "call_step" in text and "judge()" not in text
    fresh = fresh_repair_messages(msgs, "solvable", "left the episode running",
                                  setting="tool-use")[-1]["content"]
    assert "call_step" in fresh


def test_repair_turns_carry_advice_for_every_stage():
    assert set(STAGES) <= set(REPAIR_ADVICE) and "reply" in REPAIR_ADVICE
    msgs = [{"role": "user", "content": "design"}]
    contract = repair_messages(msgs, "code", "contract", "reset(seed=0) returned a dict",
                               max_tokens=1024)[-1]["content"]
    assert "reset(seed=0) returned a dict" in contract and REPAIR_ADVICE["contract"] in contract
    cut = repair_messages(msgs, "class A:", "reply", "the reply was cut at max_tokens=512 ...",
                          cut=True, max_tokens=512)[-1]["content"]
    assert "cut off" in cut and "at most 32 lines" in cut and "DesignConfig" not in cut


def test_several_examples_are_drawn_per_slot_and_every_one_is_no_design(sb, archive):
    """``DesignConfig.examples = 3``: each fresh prompt shows three distinct example modules drawn
    from the pool by its slot's seed (the same on a rerun), each passes the checker as shown, and
    a copy of any pool module, renamed, is rejected at the novelty stage."""
    from spadework.designer.examples import games_examples
    from spadework.designer.prompts import EXAMPLES_INTRO

    pool = games_examples()
    for code in pool[1:]:
        report = check(code, sandbox=sb, config=CheckConfig(max_turns=4), module=True)
        assert report.ok, report.reason
        assert len(code.splitlines()) <= max_lines(1024)
    copy = pool[-1].replace("class ", "class Copied", 1)
    cfg = DesignConfig(attempts_per_slot=1, examples=3, rejections=0)  # the second run into
    runs = []  # the same archive would be shown the first run's rejection
    for _ in range(2):
        policy = ScriptedPolicy([[fenced(copy), fenced(GOOD_CODE)]])
        runs.append(design_environments(policy, sb, archive, corpus(), n=2, iteration=0, run_seed=1,
                                        skills=GAMES, cfg=cfg, check_config=CheckConfig(max_turns=4)))
    first = runs[0]
    assert first[0].attempts[0].outcome == "novelty"
    prompts = [r.attempts[0].messages[1]["content"] for r in first]
    for text in prompts:
        assert text.startswith(EXAMPLES_INTRO.format(n=3))
        assert sum(code.strip() in text for code in pool) == 3
    assert prompts == [r.attempts[0].messages[1]["content"] for r in runs[1]]


def test_the_verdicts_shown_to_the_designer_leave_out_the_rejected_games_text():
    # runs/mechanism-s2t: 6 of the 12 designs shown this section wrote the quoted question into
    # unrelated games; the reason's own words stay, the module's quoted text goes
    easter = ("level 1: hidden answer: seeds 9 and 7 show the agent the same observation (last: "
              "'On which day of which month is Easter? Answer with a whole number.\\nYou have 4")
    rights = ('level 1: hidden answer: seeds 1 and 2 show the agent the same observation (last: '
              '"Women\'s rights are the rights and entitlements claimed for women"),')
    for reason in (easter, rights):
        text = rejection_section([("visible", reason, "stop"), ("accepted", "", "stop")])
        assert "Easter" not in text and "Women" not in text, text
        assert "show the agent the same observation (last: '...'" in text
        assert "The checker rejected 1 of your last 2 designs:" in text
    leak = "level 1: answer leaked: the first observation of seed 1000 contains the answer '55'"
    assert "the answer '55'" in rejection_section([("not_trivial", leak, "stop")])

"""The staged checker against real environments in the real sandbox: every bad fixture fails at
exactly its stage, every good fixture and starter environment passes every stage, and each
runtime stage is exercised on its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spadework.env.budget import Budget, BudgetedHandle
from spadework.env.checker import (
    MAX_SEEDS,
    MAX_TURNS,
    CheckConfig,
    CheckProgress,
    SolutionLoss,
    answer_of,
    check,
    contract_stage,
    determinism_stage,
    fisher_greater,
    format_report,
    load_stage,
    looks_like_module,
    not_trivial_stage,
    solution_losses,
    solvable_seeds,
    solvable_stage,
)
from spadework.env.probe import find_leak
from spadework.errors import (
    CheckBudgetExceeded,
    ConfigError,
    ContractError,
    EnvLoadError,
    SandboxUnavailable,
)
from spadework.library import starter_env, starter_envs
from spadework.sandbox import Limits, Sandbox
from spadework.types import env_id_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "envs"
BAD = sorted((FIXTURES / "bad").glob("*.py"))
GOOD = sorted((FIXTURES / "good").glob("*.py"))
GOOD_CODE = (FIXTURES / "good" / "arithmetic_chain.py").read_text()
RUNTIME_STAGES = ["static", "load", "contract", "determinism", "solvable", "visible", "readable",
                  "not_trivial"]

#: What the reason of each bad fixture must say, so that a designer can act on it.
REASONS = {
    "always_wins": "random replies won",
    "answer_in_observation": "contains the answer",
    "cipher_alphabet_slip": "not solvable: seed ",
    "cpu_burning_step": "budget ran out after",
    "huge_observation": "characters (cap",
    "huge_reward": "finite number in [-1, 1]",
    "import_os": "import of 'os'",
    "import_socket": "import of 'socket'",
    "import_subprocess": "import of 'subprocess'",
    "infinite_loop_step": "timed out",
    "init_raises": "ValueError: board configuration missing (line 17, in __init__)",
    "module_level_code": "when the module is imported",
    "nan_reward": "reward is nan",
    "never_truncates": "still running after max_turns",
    "no_step": "no step(action)",
    "nondeterministic_reset": "not deterministic",
    "raises_on_empty": "raised ValueError: empty action",
    "sleeping_step": "budget ran out after",
    "slow_init": "took longer than 0.5 s",
    "solution_does_not_win": "not solvable: seed ",
    "string_flags": "terminated is 'no' (str)",
    "syntax_error": "syntax error at line 24",
    "hidden_answer": "hidden answer: seeds",
    "placeholder_format": "only the placeholder \\boxed{number}",
    "terse_feedback": "does not restate the answer format",
    "levels_inverted": "levels not ordered: ",
    "level_unsolvable": "level 3: not solvable: seed ",
    "levels_not_an_int": "LEVELS is '3' (str)",
    "example_is_answer": "trivial: example replies won 20 of 20",
}


#: Fixtures that are slow on purpose: each gets a small budget (or init cap) and, for the slow
#: steps, the default per-call limit (5 s), under which their steps are legal one by one.
CONFIGS = {
    "sleeping_step": CheckConfig(budget_seconds=3.0),
    "cpu_burning_step": CheckConfig(budget_seconds=3.0),
    "slow_init": CheckConfig(init_seconds=0.5),
}
ROOMY = {"sleeping_step", "cpu_burning_step"}


def _sandbox(limits: Limits):
    try:
        box = Sandbox(limits)
        box.start()
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox here: {e.reason}")
    return box


@pytest.fixture(scope="module")
def sb():
    with _sandbox(Limits(step_seconds=1.0, load_seconds=5.0, episode_seconds=30.0)) as box:
        yield box


@pytest.fixture(scope="module")
def roomy_sb():
    """The default limits: 5 s per call, 60 s per episode, 10 s per load."""
    with _sandbox(Limits()) as box:
        yield box


CFG = CheckConfig()


def opener(sb, code, cfg=CFG, class_name=None):
    return lambda: sb.load(code, max_turns=cfg.max_turns, class_name=class_name)


def expected_stage(path: Path) -> str:
    return path.read_text().splitlines()[0].removeprefix("# expect: ").strip()


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_fixture_fails_at_its_stage(sb, roomy_sb, path):
    box = roomy_sb if path.stem in ROOMY else sb
    report = check(path.read_text(), sandbox=box, module=True, config=CONFIGS.get(path.stem))
    stage = expected_stage(path)
    assert report.failed_stage == stage, report.results
    assert [r.stage for r in report.results][-1] == stage  # nothing ran after the failure
    assert all(r.passed for r in report.results[:-1])
    assert REASONS[path.stem] in report.reason
    assert not report.ok


def test_every_bad_fixture_has_a_reason_check():
    assert sorted(REASONS) == sorted(p.stem for p in BAD)


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_good_fixture_passes_every_stage(sb, path):
    report = check(path.read_text(), sandbox=sb, module=True)
    assert report.ok, report.results
    assert [r.stage for r in report.results] == RUNTIME_STAGES
    assert all(r.reason and r.seconds >= 0 for r in report.results)
    assert report.env_id == env_id_of(path.read_text())
    assert f"class {report.class_name}:" in path.read_text()
    assert report.max_turns == CheckConfig().max_turns


def test_the_report_records_the_turn_limit_and_a_longer_solution_fails_under_it(sb):
    """The combination lock needs five moves: solvable under max_turns=5, not under 4."""
    code = (FIXTURES / "good" / "combination_lock.py").read_text()
    short = check(code, sandbox=sb, module=True, config=CheckConfig(max_turns=4))
    assert short.failed_stage == "solvable" and "max_turns=4" in short.reason
    assert short.max_turns == 4
    enough = check(code, sandbox=sb, module=True, config=CheckConfig(max_turns=5))
    assert enough.ok and enough.max_turns == 5


@pytest.mark.parametrize("env", starter_envs(), ids=lambda e: e.name)
def test_starter_environment_passes_every_stage(sb, env):
    report = check(env.code, sandbox=sb, existing=[e.code for e in starter_envs() if e.name != env.name])
    assert report.ok, report.results
    assert [r.stage for r in report.results] == RUNTIME_STAGES + ["novelty"]
    assert report.class_name == env.class_name


def test_starter_library_is_big_enough_to_mean_something():
    envs = starter_envs()
    assert len(envs) >= 8 and {e.setting for e in envs} == {"games", "tool-use"}


# -- extract --------------------------------------------------------------------------------


def test_a_raw_reply_is_extracted_first(sb):
    reply = f"<think>a draft</think>Here is the game.\n```python\n{GOOD_CODE}```\nEnjoy!"
    assert not looks_like_module(reply)
    report = check(reply, sandbox=sb)
    assert report.ok, report.results
    assert [r.stage for r in report.results] == ["extract"] + RUNTIME_STAGES
    assert report.env_id == env_id_of(GOOD_CODE)


def test_a_reply_without_code_fails_at_extract(sb):
    report = check("I am sorry, I cannot write that game.", sandbox=sb)
    assert report.failed_stage == "extract" and report.env_id is None
    assert len(report.results) == 1 and report.reason


def test_syntax_error_is_extract_unless_told_it_is_a_module(sb):
    broken = (FIXTURES / "bad" / "syntax_error.py").read_text()
    assert check(broken, sandbox=sb).failed_stage == "extract"
    assert check(broken, sandbox=sb, module=True).failed_stage == "static"


# -- load -------------------------------------------------------------------------------------


def test_load_stage_names_the_line(sb):
    code = GOOD_CODE.replace("        self.reset()\n", "        self.reset()\n        1 / 0\n")
    with pytest.raises(EnvLoadError, match=r"ZeroDivisionError.*in __init__"):
        load_stage(sb, code, "ArithmeticChainEnv", CFG)
    levels, summary = load_stage(sb, GOOD_CODE, "ArithmeticChainEnv", CFG)
    assert levels == 1 and "instantiated" in summary


# -- contract ---------------------------------------------------------------------------------


def _variant(old: str, new: str) -> str:
    assert old in GOOD_CODE
    return GOOD_CODE.replace(old, new, 1)


def test_contract_accepts_numpy_booleans_and_floats(sb):
    code = _variant("import random\n", "import random\nimport numpy as np\n")
    code = code.replace("0.0, False, truncated, {}", "np.float64(0.0), np.bool_(False), np.bool_(truncated), {}")
    code = code.replace('return "Correct!", 1.0, True, False,', 'return "Correct!", np.float32(1.0), np.bool_(True), np.False_,')
    assert code.count("np.bool_") >= 4
    cfg = CheckConfig(allow_numpy=True)
    report = check(code, sandbox=sb, config=cfg)
    assert report.ok, report.results
    assert check(code, sandbox=sb).failed_stage == "static"  # numpy only when allowed


@pytest.mark.parametrize(
    "old, new, needle",
    [
        ('return self._task("New puzzle."), {}', 'return self._task("New puzzle.")', "must return (observation: str, info: dict)"),
        ('return self._task("New puzzle."), {}', 'return self._task("New puzzle."), []', "info is list"),
        ("0.0, False, truncated, {}", "'0', False, truncated, {}", "reward is '0' (str)"),
        ("0.0, False, truncated, {}", "True, False, truncated, {}", "reward is True (bool)"),
        ("0.0, False, truncated, {}", "-1.5, False, truncated, {}", "reward is -1.5"),
        ("0.0, False, truncated, {}", "0.0, False, 1 if truncated else 0, {}", "truncated is 0 (int)"),
        ("0.0, False, truncated, {}", "0.0, False, truncated, None", "info is NoneType"),
        ("0.0, False, truncated, {}", "0.0, False, truncated, {'state': object()}", "cannot leave the sandbox"),
        ('return self._task(f"{guess} is {hint}.")', 'return [self._task(f"{guess} is {hint}.")]', "observation is list"),
        ("    def solution(self):", "    def hint(self):\n        return 3\n\n    def solution(self):", "hint() returned 3 (int)"),
    ],
)
def test_contract_stage_on_its_own(sb, old, new, needle):
    with pytest.raises(ContractError) as e:
        contract_stage(opener(sb, _variant(old, new)), CFG)
    assert needle in e.value.reason
    assert "well-formed" in contract_stage(opener(sb, GOOD_CODE), CFG)


def test_the_winning_step_is_typed_by_the_solvable_stage(sb):
    code = _variant('return "Correct!", 1.0, True, False, {"turns": self.turn}', 'return "Correct!", 1.0, True, False')
    report = check(code, sandbox=sb)
    assert report.failed_stage == "solvable"
    assert "must return (observation, reward, terminated, truncated, info)" in report.reason


def test_contract_probes_tool_calls_for_tool_envs(sb):
    ledger = next(e for e in starter_envs() if e.setting == "tool-use")
    summary = contract_stage(opener(sb, ledger.code), CFG)
    assert "7 probe replies" in summary  # five replies plus a tool call and an unknown tool


# -- determinism ------------------------------------------------------------------------------


def test_determinism_catches_state_carried_across_resets(sb):
    code = _variant("        self.turn = 0\n", "        self.episodes = getattr(self, 'episodes', 0) + 1\n        self.turn = 0\n")
    code = code.replace('self._task("New puzzle.")', 'self._task(f"Puzzle {self.episodes}.")')
    with pytest.raises(ContractError, match="the same instance reset again"):
        determinism_stage(opener(sb, code), CFG)


def test_determinism_compares_solutions_too(sb):
    code = _variant('        return f"\\\\boxed{{{self.target}}}"', '        return f"\\\\boxed{{{self.target + random.randint(0, 10**6) * 0 + random.random()}}}"')
    with pytest.raises(ContractError, match=r"solution\(\) differs"):
        determinism_stage(opener(sb, code), CFG)
    assert "reproduce" in determinism_stage(opener(sb, GOOD_CODE), CFG)


# -- solvable ---------------------------------------------------------------------------------


def test_solvable_suggests_the_action_format(sb):
    code = _variant('        return f"\\\\boxed{{{self.target}}}"', "        return str(self.target)")
    with pytest.raises(ContractError) as e:
        solvable_stage(opener(sb, code), CFG, [1, 2, 3])
    assert "left the episode running" in e.value.reason and "\\boxed{...}" in e.value.reason


@pytest.mark.parametrize(
    "solution, needle",
    [("return 42", "returned 42 (int)"), ("return []", "returned [] (list)"),
     ("return None", "returned None (NoneType)"), ("raise KeyError('target')", "solution() raised KeyError")],
)
def test_solvable_rejects_malformed_solutions(sb, solution, needle):
    code = _variant('        return f"\\\\boxed{{{self.target}}}"', f"        {solution}")
    with pytest.raises(ContractError) as e:
        solvable_stage(opener(sb, code), CFG, [7])
    assert needle in e.value.reason


def test_solvable_sees_a_losing_last_move_and_truncation(sb):
    lose = _variant('            return "Correct!", 1.0, True, False, {"turns": self.turn}',
                    '            return "Correct, but no prize.", 0.0, True, False, {}')
    with pytest.raises(ContractError, match="reward 0.0"):
        solvable_stage(opener(sb, lose), CFG, [7])
    slow = _variant('        return f"\\\\boxed{{{self.target}}}"',
                    '        return ["\\\\boxed{-1}"] * 30 + [f"\\\\boxed{{{self.target}}}"]')
    with pytest.raises(ContractError, match="truncated at step 20"):
        solvable_stage(opener(sb, slow), CFG, [7])
    assert "wins on all 5 seeds (0, 1, ...)" in solvable_stage(opener(sb, GOOD_CODE), CFG, range(5))


# -- not trivial ------------------------------------------------------------------------------


def test_empty_replies_that_win_are_trivial(sb):
    code = _variant("        match = _BOX.search(action)\n",
                    "        if not action:\n            self.done = True\n            return 'ok', 1.0, True, False, {}\n        match = _BOX.search(action)\n")
    with pytest.raises(ContractError, match="empty replies won 5 of 5"):
        not_trivial_stage(opener(sb, code), CFG)


def test_one_answer_on_every_seed_is_trivial(sb):
    """An environment that shows each seed's numbers but wants the same answer on all of them
    (one of the 1.5B designer's accepted designs did) is won by replaying one instance's
    solution(): the memorised strategy rejects it; the fixture whose answer follows from the
    seed passes it."""
    fixed = _variant("        self.target = (self.a * self.b + self.c) % self.m\n",
                     "        self.target = 7777\n")
    with pytest.raises(ContractError, match="memorised replies won 20 of 20") as e:
        not_trivial_stage(opener(sb, fixed), CFG)
    assert "draw what the answer depends on" in e.value.reason
    assert "memorised 0/20" in not_trivial_stage(opener(sb, GOOD_CODE), CFG)


def test_trivial_rate_is_a_threshold(sb):
    always = (FIXTURES / "bad" / "always_wins.py").read_text()
    assert "random 20/20" in not_trivial_stage(opener(sb, always), CheckConfig(trivial_rate=1.0))


#: Four trivial episodes a strategy (the fuzz test's setting) and four turns (cpu-qwen's).
FEW = CheckConfig(trivial_episodes=4, determinism_seeds=1, max_turns=4)


def test_a_higher_level_fails_as_easier_only_when_the_difference_is_significant(sb):
    """delivery_route's 3-stop levels 2 and 3 win 0 and 2 of 4 memorised replies: a difference of
    50 points, but Fisher p 0.21 on samples of four, so the levels are not shown out of order (the
    rule without the test rejected the starter). The inverted fixture's 0 of 4 at level 1 against
    4 of 4 at level 2 (p 0.014) still fails, with its p-value named."""
    route = check(starter_env("delivery_route").code, sandbox=sb, config=FEW)
    assert route.ok, route.results
    assert "memorised 2/4" in route.results[-1].reason  # the uneven sample is there and allowed
    inverted = (FIXTURES / "bad" / "levels_inverted.py").read_text()
    report = check(inverted, sandbox=sb, module=True, config=FEW)
    assert report.failed_stage == "not_trivial"
    assert "levels not ordered" in report.reason and "(Fisher p 0.014)" in report.reason


def test_fisher_greater_is_the_hypergeometric_tail():
    assert fisher_greater(2, 4, 0, 4) == pytest.approx(6 / 28)
    assert fisher_greater(0, 4, 2, 4) == 1.0
    assert fisher_greater(1, 4, 1, 4) == pytest.approx(55 / 70)
    assert fisher_greater(5, 20, 0, 20) < 0.05 < fisher_greater(4, 20, 0, 20)
    with pytest.raises(ValueError, match="second sample"):
        fisher_greater(1, 4, 5, 4)


def test_answer_of_and_leak_rule():
    assert answer_of(["\\boxed{up}", "\\boxed{left}"]) == "left"
    assert answer_of("<answer>done</answer>") == "done"
    assert answer_of("\\boxed{7}") is None
    # an action word every seed prints is vocabulary, not a leak
    firsts = {1: ("Moves: up, left.", "left"), 2: ("Moves: up, left.", "up")}
    assert find_leak(firsts) is None
    firsts = {1: ("Find x. (x is 4821)", "4821"), 2: ("Find x. (x is 311)", "311")}
    assert "seed 1" in find_leak(firsts)
    assert find_leak({1: ("Total 12480 coins", "248")}) is None  # whole tokens only


ONE_DIGIT_FIRST = """\
from gameenv import GameEnv


class ElevensEnv(GameEnv):
    def setup(self, rng):
        self.n = rng.randint(1, 9)
        self.answer = self.n * 11 if rng.random() < 0.3 else self.n
        self.unit = "elevens" if self.answer > 9 else "ones"

    def task(self):
        return (f"{self.n} {self.unit} make {self.answer}. How much do {self.n} {self.unit} "
                f"make? Answer with a whole number.")
"""


def test_a_leak_behind_one_digit_answers_is_found_on_later_seeds(sb):
    """Seeds 1000-1002 draw the answers 7, 1 and 9, which the leak rule does not check (a digit
    occurs in any text); the rule draws on until three seeds have longer answers (1004, 1006 and
    1009: 77, 66, 33), and every one prints its answer (runs/mechanism-s2u's LobachevskyEnv)."""
    report = check(ONE_DIGIT_FIRST, sandbox=sb, module=True, config=FEW)
    assert report.failed_stage == "not_trivial"
    assert "answer leaked: the first observation of seed 1004 contains the answer '77'" in report.reason


# -- novelty and the report -------------------------------------------------------------------


def test_renamed_copy_is_not_novel(sb):
    copy = GOOD_CODE.replace("ArithmeticChainEnv", "ModChainEnv").replace("self.target", "self.goal")
    copy = copy.replace("    def _task(self, lead):", "    # renders the task\n    def _task(self, lead):")
    report = check(copy, sandbox=sb, existing=[GOOD_CODE])
    assert report.failed_stage == "novelty"
    assert env_id_of(GOOD_CODE)[:12] in report.reason and "similarity 1.00" in report.reason
    other = next(e.code for e in starter_envs() if e.name == "nim")
    assert check(copy, sandbox=sb, existing=[other]).ok


def test_config_is_validated():
    with pytest.raises(ConfigError, match="trivial_rate"):
        CheckConfig(trivial_rate=1.5)
    with pytest.raises(ConfigError, match="level_order_alpha"):
        CheckConfig(level_order_alpha=-0.1)
    with pytest.raises(ConfigError, match="max_turns"):
        CheckConfig(max_turns=0)
    with pytest.raises(ConfigError, match="seeds"):
        check(GOOD_CODE, sandbox=None, seeds=0)


# -- the command ------------------------------------------------------------------------------

SPADEWORK = Path(sys.executable).parent / "spadework"


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    return subprocess.run([str(SPADEWORK), "check", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_good_module():
    out = _cli(str(FIXTURES / "good" / "arithmetic_chain.py"))
    assert out.returncode == 0, out.stderr
    assert "✓ not_trivial" in out.stdout and "valid: ArithmeticChainEnv" in out.stdout


def test_cli_shows_every_level(tmp_path):
    from spadework.designer.examples import GAMES_EXAMPLE

    module = tmp_path / "interest.py"
    module.write_text(GAMES_EXAMPLE)
    out = _cli("--max-turns", "4", str(module))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "levels 1-3 built" in out.stdout and "✓ solvable" in out.stdout
    assert "levels 1-3: solution() wins on all 64 seeds" in out.stdout
    assert "valid: CompoundInterestEnv" in out.stdout and "levels 1-3)" in out.stdout
    report = json.loads(_cli("--json", "--max-turns", "4", str(module)).stdout)
    assert report["levels"] == 3 and report["ok"]


def test_cli_bad_module_as_json():
    out = _cli("--json", "--seeds", "2", str(FIXTURES / "bad" / "nan_reward.py"))
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] is False and report["failed_stage"] == "contract"
    assert "reward is nan" in report["reason"]
    assert [r["stage"] for r in report["results"]] == ["static", "load", "contract"]


def test_cli_reads_a_raw_reply(tmp_path):
    reply = tmp_path / "reply.md"
    reply.write_text(f"Sure.\n```python\n{GOOD_CODE}```\n")
    out = _cli("--json", str(reply))
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["results"][0]["stage"] == "extract"
    text = tmp_path / "reply.txt"
    text.write_text("no code at all")
    out = _cli(str(text))
    assert out.returncode == 1 and "✗ extract" in out.stdout


def test_cli_usage_errors_exit_2(tmp_path):
    out = _cli(str(tmp_path / "missing.py"))
    assert out.returncode == 2 and "does not exist" in out.stderr
    binary = tmp_path / "blob.py"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    out = _cli(str(binary))
    assert out.returncode == 2 and "not UTF-8" in out.stderr
    out = _cli("--seeds", "0", str(FIXTURES / "good" / "arithmetic_chain.py"))
    assert out.returncode == 2


# -- the budget, the progress and each stage's own charges ----------------------------------


def test_the_budget_cuts_a_sleeping_step_in_flight(roomy_sb):
    """Each step sleeps 2.5 s, legal under the 5 s per-call limit; the budget's deadline travels
    with the call, so the check stops during the step that crosses it, not after."""
    code = (FIXTURES / "bad" / "sleeping_step.py").read_text()
    report = check(code, sandbox=roomy_sb, module=True, config=CheckConfig(budget_seconds=2.0))
    assert report.failed_stage == "contract"
    assert "the check's 2 s budget ran out after 0 of 25 steps (during step())" in report.reason
    assert "the slowest" in report.reason and "--budget" in report.reason


def test_the_budget_stops_a_cpu_burning_step(roomy_sb):
    code = (FIXTURES / "bad" / "cpu_burning_step.py").read_text()
    report = check(code, sandbox=roomy_sb, module=True, config=CheckConfig(budget_seconds=2.0))
    assert report.failed_stage == "contract"
    assert re.search(r"budget ran out after \d+ of 25 steps \(during step\(\)\)", report.reason)


def test_the_longest_turn_cap_allowed_still_ends_within_the_budget(roomy_sb):
    """max_turns at its bound with a step of 5 ms: a full contract stage alone would take 5 s."""
    code = _variant("    def step(self, action):\n",
                    "    def step(self, action):\n"
                    "        lock = dataclasses._thread.allocate_lock()\n"
                    "        lock.acquire()\n"
                    "        lock.acquire(timeout=0.005)\n").replace("import random\n", "import dataclasses\nimport random\n")
    cfg = CheckConfig(max_turns=MAX_TURNS, budget_seconds=1.0)
    report = check(code, sandbox=roomy_sb, module=True, config=cfg)
    assert report.failed_stage == "contract", report.results
    assert re.search(rf"budget ran out after \d+ of {MAX_TURNS + 5} steps", report.reason)


@pytest.mark.parametrize("bad", [0, MAX_TURNS + 1, 100_000, 10**20, 2.5, True, "20"])
def test_the_turn_cap_is_bounded_with_a_reason(bad):
    with pytest.raises(ConfigError, match=r"max_turns must be an integer from 1 to 1000.*no text game"):
        CheckConfig(max_turns=bad)


@pytest.mark.parametrize("field, bad", [("budget_seconds", 0), ("budget_seconds", float("inf")),
                                        ("budget_seconds", float("nan")), ("init_seconds", -1.0),
                                        ("solvable_seeds", 0), ("solvable_seeds", MAX_SEEDS + 1)])
def test_budgets_and_seeds_are_validated(field, bad):
    with pytest.raises(ConfigError, match=f"CheckConfig.{field} must be"):
        CheckConfig(**{field: bad})


def test_seeds_passed_to_check_are_bounded():
    with pytest.raises(ConfigError, match="seeds must be an integer from 1 to 1000"):
        check(GOOD_CODE, sandbox=None, seeds=MAX_SEEDS + 1)


def test_a_slow_init_is_charged_to_the_load_stage(sb):
    """__init__ waits 1 s, under the 2 s cap: it passes, and the eight instances the check
    builds are all on the load stage's row, not on the stages that asked for them. Each of
    those stages would be charged a whole second if it were; their own work takes milliseconds,
    so the bound holds on a machine slowed a hundredfold, and no other timing is asserted."""
    code = _variant("    def __init__(self, max_turns=10, **kwargs):\n",
                    "    def __init__(self, max_turns=10, **kwargs):\n"
                    "        lock = dataclasses._thread.allocate_lock()\n"
                    "        lock.acquire()\n"
                    "        lock.acquire(timeout=1.0)\n").replace("import random\n", "import dataclasses\nimport random\n")
    report = check(code, sandbox=sb, module=True)
    assert report.ok, report.results
    rows = {r.stage: r for r in report.results}
    assert rows["load"].seconds >= 8 * 1.0  # one build of its own and one per later stage's instance
    later = [rows[s] for s in ("contract", "determinism", "solvable", "visible", "readable", "not_trivial")]
    assert all(r.seconds < 1.0 for r in later), report.results


def test_progress_reports_numbers_for_every_stage(sb):
    events: list[CheckProgress] = []
    report = check(GOOD_CODE, sandbox=sb, module=True, progress=events.append)
    assert report.ok
    starts = [e.stage for e in events if e.event == "start"]
    ends = [(e.stage, e.passed) for e in events if e.event == "end"]
    assert starts == RUNTIME_STAGES and ends == [(s, True) for s in RUNTIME_STAGES]
    last = {e.stage: e for e in events if e.event == "end"}
    assert (last["solvable"].done, last["solvable"].total, last["solvable"].unit) == (64, 64, "seeds")
    # 20 random, 5 empty, 5 repeated, 20 memorised and 20 example episodes
    assert (last["not_trivial"].done, last["not_trivial"].total) == (70, 70)
    assert last["contract"].done == last["contract"].total == 25
    assert all(0 <= e.done <= max(e.total, e.done) and e.budget == 60.0 for e in events)
    assert [e.elapsed for e in events] == sorted(e.elapsed for e in events)


def test_a_failing_stage_ends_with_passed_false(sb):
    events: list[CheckProgress] = []
    check((FIXTURES / "bad" / "nan_reward.py").read_text(), sandbox=sb, module=True, progress=events.append)
    assert [(e.stage, e.passed) for e in events if e.event == "end"][-1] == ("contract", False)


# -- solvable on play-style seeds, and the replay the loop calls ------------------------------

CIPHER_SLIP = (FIXTURES / "bad" / "cipher_alphabet_slip.py").read_text()


def test_the_cipher_slip_wins_the_seeds_the_checker_used_to_try(sb):
    """The mutation loses 6, 10 and 18 of seeds 0..19 and none of 0..4 (the former default); the
    default check (64 play-style seeds) rejects it, as test_bad_fixture_fails_at_its_stage shows."""
    env_opener = opener(sb, CIPHER_SLIP, class_name="CipherMachineEnv")
    assert "wins on all 5 seeds" in solvable_stage(env_opener, CFG, range(5))
    assert [loss.seed for loss in solution_losses(env_opener, range(20), CFG)] == [6, 10, 18]


def test_solvable_seeds_are_drawn_as_play_draws_them():
    seeds = solvable_seeds(0, env_id_of(GOOD_CODE), 64)
    assert len(set(seeds)) == 64 and all(0 <= s < 2**31 - 1 for s in seeds)
    assert max(seeds) > 2**20  # not 0..N-1
    assert seeds == solvable_seeds(0, env_id_of(GOOD_CODE), 64)
    assert seeds != solvable_seeds(1, env_id_of(GOOD_CODE), 64)


def test_solution_losses_names_each_lost_seed_and_why(sb):
    assert solution_losses(opener(sb, GOOD_CODE), [5, 6, 7], CFG) == []
    losses = solution_losses(opener(sb, CIPHER_SLIP, class_name="CipherMachineEnv"), [5, 6, 7], CFG)
    assert losses == [SolutionLoss(6, losses[0].reason)]
    assert losses[0].reason.startswith("seed 6: replaying solution()") and "left the episode running" in losses[0].reason


def test_solution_losses_survives_a_hanging_solution(sb):
    """solution() hangs on odd targets: those seeds are lost (the instance dies with each) and
    the even ones are still replayed, each time in a fresh instance."""
    code = _variant('        return f"\\\\boxed{{{self.target}}}"',
                    '        while self.target % 2:\n            pass\n        return f"\\\\boxed{{{self.target}}}"')
    seeds = list(range(6))
    losses = solution_losses(opener(sb, code), seeds, CFG)
    odd = [s for s in seeds if _target(s) % 2]
    assert 0 < len(odd) < len(seeds)
    assert [loss.seed for loss in losses] == odd
    assert all("timed out" in loss.reason for loss in losses)


def _target(seed: int) -> int:
    import random as _random

    rng = _random.Random(seed)
    a, b, c, m = rng.randint(12, 99), rng.randint(12, 99), rng.randint(100, 999), rng.randint(500, 997)
    return (a * b + c) % m


def test_solution_losses_when_no_instance_can_be_built(sb):
    init_raises = (FIXTURES / "bad" / "init_raises.py").read_text()
    losses = solution_losses(opener(sb, init_raises), [1, 2], CFG)
    assert [loss.seed for loss in losses] == [1, 2]
    assert all("no instance could be built" in loss.reason for loss in losses)


def test_solution_losses_stops_when_its_budget_runs_out(sb):
    budget = Budget(0.0)
    with pytest.raises(CheckBudgetExceeded):
        solution_losses(lambda: _budgeted(sb, GOOD_CODE, budget), [1, 2], CFG, budget)


def _budgeted(sb, code, budget):
    from contextlib import contextmanager

    @contextmanager
    def cm():
        with sb.load(code, max_turns=CFG.max_turns) as env:
            yield BudgetedHandle(env, budget)

    return cm()


def test_cli_bounds_and_budget(tmp_path):
    good = str(FIXTURES / "good" / "arithmetic_chain.py")
    out = _cli("--max-turns", "100000", good)
    assert out.returncode == 2 and "--max-turns must be an integer from 1 to 1000" in out.stderr
    assert "Traceback" not in out.stderr and "OverflowError" not in out.stderr + out.stdout
    out = _cli("--seeds", "5000", good)
    assert out.returncode == 2 and "--seeds must be an integer from 1 to 1000" in out.stderr
    out = _cli("--budget", "0", good)
    assert out.returncode == 2 and "--budget must be a finite number of seconds above 0" in out.stderr
    out = _cli("--budget", "2", str(FIXTURES / "bad" / "sleeping_step.py"))
    assert out.returncode == 1 and "✗ contract" in out.stdout and "2 s budget ran out" in out.stdout


def test_cli_rejects_the_cipher_slip_by_default_and_is_quiet_off_a_terminal():
    out = _cli(str(FIXTURES / "bad" / "cipher_alphabet_slip.py"))
    assert out.returncode == 1 and "✗ solvable" in out.stdout and "not solvable: seed" in out.stdout
    assert out.stderr == ""  # no progress bar when stderr is not a terminal


def test_cli_reads_a_file_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD_CODE.encode())
    out = _cli("--seeds", "2", str(path))
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_check_display_draws_only_on_a_terminal():
    import io

    from rich.console import Console

    from spadework.progress import CheckDisplay

    events = [CheckProgress("contract", "start", 0, 0, "", 0.1, 60.0),
              CheckProgress("contract", "advance", 0, 25, "steps", 0.2, 60.0),
              CheckProgress("contract", "advance", 7, 25, "steps", 0.3, 60.0),
              CheckProgress("contract", "end", 25, 25, "steps", 0.4, 60.0, True)]
    piped = io.StringIO()
    with CheckDisplay(Console(file=piped, force_terminal=False)) as display:
        for e in events:
            display(e)
    assert piped.getvalue() == ""
    tty = io.StringIO()
    with CheckDisplay(Console(file=tty, force_terminal=True, width=100)) as display:
        for e in events[:3]:
            display(e)
        display._bars.refresh()
        drawn = tty.getvalue()
    assert "contract" in drawn and "7/25" in drawn and "steps" in drawn and "60 s budget" in drawn


def test_a_tool_env_of_call_steps_is_checked_at_every_level_with_the_failing_call_named(sb):
    from spadework.designer.guides import TOOL_EXAMPLE

    code = TOOL_EXAMPLE  # no solution(): call_step
    assert "def solution" not in code
    report = check(code, sandbox=sb)
    assert report.ok, report.reason
    bad = code.replace('"use", item=self.target, units=half)', '"use", item="flour", units=half)')
    report = check(bad, sandbox=sb)
    assert (report.failed_stage, report.reason.split(":")[0]) == ("solvable", "level 2")  # 1 passes
    assert 'call 2 of the steps, use({"item": "flour"' in report.reason
    assert "must be one of" in report.reason


def test_a_game_storing_a_value_under_its_step_method_passes_after_the_rename(sb):
    """The designer's game, under the main job's 4 turns: every move raised TypeError before."""
    from tests.env.test_extract import SHADOWING

    report = check(f"```python\n{SHADOWING}```", sandbox=sb, config=CheckConfig(max_turns=4))
    assert report.ok, report.results
    assert "renamed self.step to self.step_value" in report.results[0].reason


#: run m's one accepted design (2026-12-05): the task names "the first two numbers" and shows
#: them only as the example move; the agent won 0 of 30 plays with or without the hint.
NUMBERS_IN_THE_EXAMPLE = '''from gameenv import GameEnv


class FibonacciEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.n1, self.n2 = rng.randint(1, 9), rng.randint(1, 9)
        self.answer = self.n1 + self.n2

    def task(self):
        return ("Given the first two numbers of the Fibonacci sequence, what is the next term? "
                "Answer with a whole number.")

    def example(self):
        return str(self.n1) + " " + str(self.n2)

    def judge(self, move):
        if not move.isdigit():
            return self.INVALID, f"{move} is not a whole number."
        if int(move) == self.answer:
            return self.WIN, "That is the next term."
        if int(move) > self.answer:
            return self.CONTINUE, f"{move} is too high."
        return self.CONTINUE, f"{move} is too low."

    def solution(self):
        return self.box(self.answer)
'''


def test_numbers_shown_only_inside_the_example_box_are_not_shown(sb):
    report = check(NUMBERS_IN_THE_EXAMPLE, sandbox=sb, module=True, config=CheckConfig(max_turns=4))
    assert report.failed_stage == "visible", report.results
    assert "hidden answer" in report.reason and "the example move, does not count" in report.reason
    shown = NUMBERS_IN_THE_EXAMPLE.replace('"Given the first two numbers of the Fibonacci sequence',
                                           'f"The first two numbers are {self.n1} and {self.n2}')
    passed = check(shown, sandbox=sb, module=True, config=CheckConfig(max_turns=4)).results
    assert "visible" in [r.stage for r in passed if r.passed]


def test_levels_that_give_the_same_game_are_checked_and_played_as_one(sb):
    """s2u's accepted design declared three levels and never read self.level: a level
    controller would have moved it through one game under three numbers."""
    shown = NUMBERS_IN_THE_EXAMPLE.replace('"Given the first two numbers of the Fibonacci sequence',
                                           'f"The first two numbers are {self.n1} and {self.n2}')
    cfg = CheckConfig(max_turns=4)
    report = check(shown, sandbox=sb, module=True, config=cfg)
    assert report.ok and report.levels == 1, report.results
    load = report.results[1]
    assert load.stage == "load" and "levels 1-3 built" in load.reason
    assert "levels 1-3 give the same game on seeds 100..102" in load.reason
    assert "level 2" not in format_report(report) and "levels 1-3)" not in format_report(report)
    # a level that changes the numbers keeps its three levels, each checked
    graded = shown.replace("rng.randint(1, 9), rng.randint(1, 9)",
                           "rng.randint(1, 9 * self.level), rng.randint(1, 9 * self.level)")
    report = check(graded, sandbox=sb, module=True, config=cfg)
    assert report.ok and report.levels == 3, report.results
    assert "same game" not in report.results[1].reason
    assert "levels 1-3)" in format_report(report)


def test_levels_above_where_a_game_stops_growing_are_played_as_its_top(sb):
    """A game whose numbers stop growing at level 2 of 3: levels 2 and 3 are one instance, so
    the controller would move it from 2 to 3 to no effect; it is checked and played with two."""
    capped = NUMBERS_IN_THE_EXAMPLE.replace(
        '"Given the first two numbers of the Fibonacci sequence',
        'f"The first two numbers are {self.n1} and {self.n2}').replace(
        "rng.randint(1, 9), rng.randint(1, 9)",
        "rng.randint(1, 9 * min(self.level, 2)), rng.randint(1, 9 * min(self.level, 2))")
    report = check(capped, sandbox=sb, module=True, config=CheckConfig(max_turns=4))
    assert report.ok and report.levels == 2, report.results
    load = report.results[1].reason
    assert "levels 2-3 give the same game on seeds 100..102" in load, load
    assert "above level 2), so it is checked and played with 2 levels" in load, load
    assert "levels 1-2)" in format_report(report)

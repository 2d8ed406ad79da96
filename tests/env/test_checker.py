"""The staged checker against real environments in the real sandbox: every bad fixture fails at
exactly its stage, every good fixture and starter environment passes every stage, and each
runtime stage is exercised on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spadework.env.checker import (
    CheckConfig,
    answer_of,
    check,
    contract_stage,
    determinism_stage,
    load_stage,
    looks_like_module,
    not_trivial_stage,
    solvable_stage,
)
from spadework.env.probe import find_leak
from spadework.errors import ConfigError, ContractError, EnvLoadError, SandboxUnavailable
from spadework.library import starter_envs
from spadework.sandbox import Limits, Sandbox
from spadework.types import env_id_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "envs"
BAD = sorted((FIXTURES / "bad").glob("*.py"))
GOOD = sorted((FIXTURES / "good").glob("*.py"))
GOOD_CODE = (FIXTURES / "good" / "arithmetic_chain.py").read_text()
RUNTIME_STAGES = ["static", "load", "contract", "determinism", "solvable", "not_trivial"]

#: What the reason of each bad fixture must say, so that a designer can act on it.
REASONS = {
    "always_wins": "random replies won",
    "answer_in_observation": "contains the answer",
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
    "solution_does_not_win": "not solvable: seed 0",
    "string_flags": "terminated is 'no' (str)",
    "syntax_error": "syntax error at line 24",
}


@pytest.fixture(scope="module")
def sb():
    try:
        box = Sandbox(Limits(step_seconds=1.0, load_seconds=5.0, episode_seconds=30.0))
        box.start()
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox here: {e.reason}")
    with box:
        yield box


CFG = CheckConfig()


def opener(sb, code, cfg=CFG, class_name=None):
    return lambda: sb.load(code, max_turns=cfg.max_turns, class_name=class_name)


def expected_stage(path: Path) -> str:
    return path.read_text().splitlines()[0].removeprefix("# expect: ").strip()


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_fixture_fails_at_its_stage(sb, path):
    report = check(path.read_text(), sandbox=sb, module=True)
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
    assert "instantiated" in load_stage(sb, GOOD_CODE, "ArithmeticChainEnv", CFG)


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
        solvable_stage(opener(sb, code), CFG, seeds=3)
    assert "left the episode running" in e.value.reason and "\\boxed{...}" in e.value.reason


@pytest.mark.parametrize(
    "solution, needle",
    [("return 42", "returned 42 (int)"), ("return []", "returned [] (list)"),
     ("return None", "returned None (NoneType)"), ("raise KeyError('target')", "solution() raised KeyError")],
)
def test_solvable_rejects_malformed_solutions(sb, solution, needle):
    code = _variant('        return f"\\\\boxed{{{self.target}}}"', f"        {solution}")
    with pytest.raises(ContractError) as e:
        solvable_stage(opener(sb, code), CFG, seeds=1)
    assert needle in e.value.reason


def test_solvable_sees_a_losing_last_move_and_truncation(sb):
    lose = _variant('            return "Correct!", 1.0, True, False, {"turns": self.turn}',
                    '            return "Correct, but no prize.", 0.0, True, False, {}')
    with pytest.raises(ContractError, match="reward 0.0"):
        solvable_stage(opener(sb, lose), CFG, seeds=1)
    slow = _variant('        return f"\\\\boxed{{{self.target}}}"',
                    '        return ["\\\\boxed{-1}"] * 30 + [f"\\\\boxed{{{self.target}}}"]')
    with pytest.raises(ContractError, match="truncated at step 20"):
        solvable_stage(opener(sb, slow), CFG, seeds=1)
    assert "wins on seeds 0..4" in solvable_stage(opener(sb, GOOD_CODE), CFG, seeds=5)


# -- not trivial ------------------------------------------------------------------------------


def test_empty_replies_that_win_are_trivial(sb):
    code = _variant("        match = _BOX.search(action)\n",
                    "        if not action:\n            self.done = True\n            return 'ok', 1.0, True, False, {}\n        match = _BOX.search(action)\n")
    with pytest.raises(ContractError, match="empty replies won 5 of 5"):
        not_trivial_stage(opener(sb, code), CFG)


def test_trivial_rate_is_a_threshold(sb):
    always = (FIXTURES / "bad" / "always_wins.py").read_text()
    assert "random 20/20" in not_trivial_stage(opener(sb, always), CheckConfig(trivial_rate=1.0))


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

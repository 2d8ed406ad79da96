"""spadework.gym: sandboxed environments behind the Gymnasium API."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.error import ResetNeeded  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

import spadework.gym as sg  # noqa: E402
from spadework.archive import Archive, EnvRecord  # noqa: E402
from spadework.env.checker import CheckConfig, check  # noqa: E402
from spadework.env.probe import solution_actions  # noqa: E402
from spadework.errors import ConfigError, EnvRaised, SpaceError  # noqa: E402
from spadework.sandbox import Limits, Sandbox  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "tests" / "fixtures" / "envs" / "good"
BAD = ROOT / "tests" / "fixtures" / "envs" / "bad"

# A game printing what it is told at reset (options are not the contract's, so the word comes
# from the seed) and raising on the action "boom".
ECHO = '''
import random

WORDS = ["plain", "tab\\there", "caf\\u00e9 \\u2192 \\u2713", "bell\\x07", "\\u4e2d\\u6587"]


class EchoEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.word = WORDS[(seed or 0) % len(WORDS)]
        self.turn = 0
        return self.word, {}

    def step(self, action):
        if action == "boom":
            raise ValueError("boom")
        self.turn += 1
        if action == "\\\\boxed{" + self.word + "}":
            return "won", 1.0, True, False, {}
        return self.word, 0.0, False, False, {}

    def solution(self):
        return "\\\\boxed{" + self.word + "}"
'''


def quiet_check(env) -> None:
    """check_env with every warning an error: nothing may leak to a user's terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)


def play_solution(env, seed: int) -> tuple[float, bool, int]:
    env.reset(seed=seed)
    reward, terminated, steps = 0.0, False, 0
    for action in solution_actions(env.unwrapped.solution()):
        _, reward, terminated, truncated, _ = env.step(action)
        steps += 1
        if terminated or truncated:
            break
    return reward, terminated, steps


@pytest.mark.parametrize("name", ["maze", "countdown", "tool_calendar"])
def test_registered_starters_pass_gymnasiums_checker(name):
    assert sg.gym_id(name) in sg.register_envs()
    env = gymnasium.make(sg.gym_id(name))
    try:
        quiet_check(env.unwrapped)  # with a spec: it also makes one per render mode, and closes twice
        reward, terminated, _ = play_solution(env, seed=7)
        assert terminated and reward > 0
    finally:
        env.close()


def test_module_qualified_id_registers_on_demand_and_import_registers_nothing():
    probe = ("import gymnasium, spadework, spadework.gym; "
             "print(any(k.startswith('spadework/') for k in gymnasium.registry)); "
             "e = gymnasium.make('spadework.gym.envs:spadework/Nim-v0'); print(e.spec.id); e.close()")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "spadework/Nim-v0"]
    assert out.stderr == ""


def test_pyproject_declares_the_entry_point_and_extra():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["entry-points"]["gymnasium.envs"]["spadework"] == \
        "spadework.gym.registration:register_envs"
    assert any(r.startswith("gymnasium") for r in meta["optional-dependencies"]["gym"])


def test_module_file_plays_and_wins():
    with sg.make(GOOD / "arithmetic_chain.py", max_turns=6) as env:
        quiet_check(env)
        reward, terminated, steps = play_solution(env, seed=3)
        assert (reward, terminated, steps) == (1.0, True, 1)
        obs, info = env.reset(seed=3)
        assert info["spadework"]["seed"] == 3 and "Compute" in obs


def test_archived_environment_and_rejected_ones(tmp_path):
    code = (GOOD / "arithmetic_chain.py").read_text()
    with Sandbox(Limits()) as sb:
        good = check(code, sandbox=sb, config=CheckConfig(max_turns=5), module=True)
    bad_code = (BAD / "never_truncates.py").read_text()
    with Sandbox(Limits()) as sb:
        bad = check(bad_code, sandbox=sb, config=CheckConfig(max_turns=5), module=True)
    assert good.ok and not bad.ok
    db = tmp_path / "archive.sqlite"
    with Archive.open(db) as a:
        a.add_env(EnvRecord.from_check(code, good, iteration=0, setting="games", skill=None))
        a.add_env(EnvRecord.from_check(bad_code, bad, iteration=0, setting="games", skill=None))
    with sg.make(db, env_id=good.env_id[:8]) as env:
        assert env.max_turns == 5  # the limit its check passed under
        assert env.env_id == good.env_id
        assert play_solution(env, seed=11)[:2] == (1.0, True)
    with sg.make(tmp_path, env_id=good.env_id) as env:  # the run directory works too
        assert env.env_id == good.env_id
    with pytest.raises(ConfigError, match="rejected at its contract stage"):
        sg.make(db, env_id=bad.env_id[:8])
    with sg.make(db, env_id=bad.env_id[:8], allow_rejected=True, max_turns=3) as env:
        env.reset(seed=1)
        flags = [env.step("\\boxed{-1}")[2:4] for _ in range(3)]
        # never_truncates.py never ends an episode: the turn limit does, and says so
        assert flags == [(False, False), (False, False), (False, True)]
        with pytest.raises(ResetNeeded):
            env.step("\\boxed{-1}")


def test_turn_limit_is_reported_in_info(tmp_path):
    with sg.make(BAD / "never_truncates.py", max_turns=2) as env:
        env.reset(seed=0)
        assert "turn_limit" not in env.step("\\boxed{-1}")[4]["spadework"]
        assert env.step("\\boxed{-1}")[4]["spadework"] == {"turn": 2, "turn_limit": True}


def test_spaces_refuse_what_lies_outside_and_never_alter_it(tmp_path):
    path = tmp_path / "echo.py"
    path.write_text(ECHO)
    with sg.make(path) as env:
        assert env.reset(seed=0)[0] == "plain"
        assert env.reset(seed=1)[0] == "tab\there"
        assert env.reset(seed=2)[0] == "café → ✓"  # in the default charset, unchanged
        assert env.step("\\boxed{café → ✓}")[1:3] == (1.0, True)
        with pytest.raises(SpaceError, match=r"'\\x07' \(U\+0007\) at position 4"):
            env.reset(seed=3)
        with pytest.raises(SpaceError, match=r"U\+4E2D"):
            env.reset(seed=4)
        env.reset(seed=0)
        with pytest.raises(SpaceError, match="the action holds"):
            env.step("ok\x00")
        with pytest.raises(SpaceError, match="not str"):
            env.step(b"bytes")  # type: ignore[arg-type]
        assert env.step("\\boxed{plain}")[1] == 1.0  # the refused actions never reached it
    with sg.make(path, charset=sg.DEFAULT_CHARSET | {"\u4e2d", "\u6587"}) as env:
        assert env.reset(seed=4)[0] == "中文"
        assert env.observation_space.contains("中文")
    with sg.make(path, max_obs_chars=4) as env:
        with pytest.raises(SpaceError, match="more than the space's max_length 4"):
            env.reset(seed=0)
    with sg.make(path, max_action_chars=3) as env:
        env.reset(seed=0)
        with pytest.raises(SpaceError, match="max_length 3"):
            env.step("four")


def test_errors_raise_or_end_the_episode(tmp_path):
    path = tmp_path / "echo.py"
    path.write_text(ECHO)
    with sg.make(path) as env:
        env.reset(seed=0)
        with pytest.raises(EnvRaised, match="ValueError: boom"):
            env.step("boom")
    with sg.make(path, on_error="truncate") as env:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("boom")
        assert (obs, reward, terminated, truncated) == ("", 0.0, False, True)
        assert info["spadework"]["error_type"] == "EnvRaised" and "boom" in info["spadework"]["error"]
        with pytest.raises(ResetNeeded):
            env.step("x")
        assert env.reset(seed=0)[0] == "plain"  # a fresh child for the next episode


def test_seeding_follows_gymnasium():
    with sg.make("countdown") as a, sg.make("countdown") as b:
        first = [a.reset(seed=42)[0]] + [a.reset()[0] for _ in range(3)]
        second = [b.reset(seed=42)[0]] + [b.reset()[0] for _ in range(3)]
        assert first == second and len(set(first)) == 4
        seeds = [a.reset()[1]["spadework"]["seed"] for _ in range(2)]
        assert all(isinstance(s, int) for s in seeds) and seeds[0] != seeds[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


def test_each_instance_runs_in_the_sandbox_and_close_frees_it():
    env = sg.make("nim")
    zygote = env.unwrapped._hosted._sandbox.zygote_pid
    env.reset(seed=0)
    child = env.unwrapped._hosted._handle.pid
    assert child != os.getpid() and _alive(child) and _alive(zygote)
    assert Path(f"/proc/{child}/status").read_text().count("Seccomp:\t2") == 1  # filter mode
    env.reset(seed=1)
    assert env.unwrapped._hosted._handle.pid != child  # one fresh child per episode
    env.close()
    env.close()  # idempotent
    assert not _alive(zygote)
    with pytest.raises(ResetNeeded):
        env.reset()


def test_instances_can_share_one_fork_server():
    with Sandbox(Limits()) as sb:
        envs = [sg.make(name, sandbox=sb) for name in ("nim", "maze", "countdown")]
        vec = gymnasium.vector.SyncVectorEnv([lambda: sg.make("nim", sandbox=sb)] * 2)
        try:
            for env in envs:
                env.reset(seed=0)
            obs, _ = vec.reset(seed=0)
            assert len(obs) == 2
            for env in envs:
                env.close()
            assert sb.zygote_alive()  # a shared fork server outlives its environments
        finally:
            vec.close()
        assert sb.zygote_alive() and not sb._handles - set(sb._spares)  # only pre-forked spares left


def test_make_refuses_bad_sources(tmp_path):
    with pytest.raises(ConfigError, match="known: cipher_machine"):
        sg.make("no_such_game")
    with pytest.raises(ConfigError, match="no file"):
        sg.make(tmp_path / "missing.py")
    with pytest.raises(ConfigError, match="name the environment too"):
        sg.make(tmp_path / "archive.sqlite")
    (tmp_path / "os.py").write_text((BAD / "import_os.py").read_text())
    with pytest.raises(Exception, match="import of 'os' is not allowed"):
        sg.make(tmp_path / "os.py")
    with pytest.raises(ConfigError, match="render_mode"):
        sg.make("nim", render_mode="rgb_array")


def test_math_verify_games_get_a_sandbox_that_preloads_it(tmp_path):
    pytest.importorskip("math_verify")
    path = tmp_path / "half.py"
    path.write_text('''
import random, re
from math_verify import parse, verify


class FractionEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.n = random.Random(seed).choice([2, 4, 5, 8])
        self.turn = 0
        return f"What is 1/{self.n}? Answer in \\\\boxed{{}}.", {}

    def step(self, action):
        self.turn += 1
        m = re.search(r"\\\\boxed\\{([^{}]*)\\}", action)
        if m and verify(parse("$1/" + str(self.n) + "$"), parse("$" + m.group(1) + "$")):
            return "Correct!", 1.0, True, False, {}
        return "Wrong.", 0.0, False, self.turn >= self.max_turns, {}

    def solution(self):
        return "\\\\boxed{" + str(1 / self.n) + "}"
''')
    with sg.make(path) as env:
        assert env.unwrapped._hosted._sandbox.limits.math_verify
        assert "math_verify" in env.unwrapped._hosted._sandbox.isolation.runtime
        env.reset(seed=2)  # the decimal 1/n must verify against the fraction
        assert env.step(env.unwrapped.solution())[1:3] == (1.0, True)
        env.reset(seed=2)
        assert env.step("\\boxed{7}")[1] == 0.0


def test_a_level_is_played_as_asked_and_checked_against_the_environment(tmp_path):
    """``make(..., level=k)`` builds level k (the info says so); a level the environment does not
    declare is refused with its range, for an environment without levels too."""
    from spadework.designer.examples import GAMES_EXAMPLE

    module = tmp_path / "interest.py"
    module.write_text(GAMES_EXAMPLE)
    with sg.make(module, max_turns=4, level=3) as env:
        assert env.levels == 3
        obs, info = env.reset(seed=5)
        assert "after 3 year(s)" in obs
        assert play_solution(env, seed=5)[:2] == (1.0, True)
    with pytest.raises(ConfigError, match="declares LEVELS = 3; choose a level from 1 to 3"):
        sg.make(module, level=4)
    with pytest.raises(ConfigError, match="declares LEVELS = 1"):
        sg.make(GOOD / "arithmetic_chain.py", level=2)
    with pytest.raises(ConfigError, match="level must be an integer >= 1"):
        sg.make(module, level=0)


def test_an_archived_environment_has_the_levels_its_check_counted(tmp_path):
    """A game that stops growing at level 2 of its 3 is checked and archived with 2 levels
    (levels 2 and 3 give one game); played from the archive it has 2, as a run plays it, and
    level 3 is refused with why. Its module file still declares and plays 3."""
    from spadework.designer.examples import GAMES_EXAMPLE

    code = GAMES_EXAMPLE.replace("self.years = self.level", "self.years = min(self.level, 2)")
    assert code != GAMES_EXAMPLE
    with Sandbox(Limits()) as sb:
        report = check(code, sandbox=sb, config=CheckConfig(max_turns=4), module=True)
    assert report.ok and report.levels == 2, report.results
    db = tmp_path / "archive.sqlite"
    with Archive.open(db) as a:
        a.add_env(EnvRecord.from_check(code, report, iteration=0, setting="games", skill=None))
    with sg.make(db, env_id=report.env_id[:8], level=2) as env:
        assert env.levels == 2
        assert play_solution(env, seed=5)[:2] == (1.0, True)
    with pytest.raises(ConfigError, match="declares LEVELS = 3, but its levels above 2 gave the "
                                          "same game as level 2 when it was checked; choose a "
                                          "level from 1 to 2"):
        sg.make(db, env_id=report.env_id[:8], level=3)
    module = tmp_path / "capped.py"
    module.write_text(code)
    with sg.make(module, max_turns=4, level=3) as env:
        assert env.levels == 3

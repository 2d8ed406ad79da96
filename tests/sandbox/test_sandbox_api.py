"""The sandbox's API: values, errors by boundary, deadlines, threads, hygiene, layers."""

from __future__ import annotations

import asyncio
import gc
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from spadework.errors import (
    ConfigError,
    ContractError,
    EnvCrashed,
    EnvError,
    EnvLoadError,
    EnvRaised,
    EnvTimeout,
    SandboxUnavailable,
)
from spadework.sandbox import DEFAULT_REQUIRED, Limits, Sandbox
from spadework.sandbox.base import _alive
from tests.sandbox.conftest import settled_pool, spares

GUESS = '''
import random
class GuessEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self.kwargs = kwargs
    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.n = self.rng.randint(1, 100)
        self.t = 0
        return "Guess a number in 1..100 as \\\\boxed{n}", {"seed": seed}
    def step(self, action):
        self.t += 1
        won = action == "\\\\boxed{%d}" % self.n
        return ("right" if won else "wrong"), (1.0 if won else 0.0), won, self.t >= self.max_turns, {}
    def solution(self):
        return "\\\\boxed{%d}" % self.n
    def hint(self):
        return "it is %s" % ("even" if self.n % 2 == 0 else "odd")
'''


def test_round_trip_and_values_as_produced(sb):
    with sb.load(GUESS, max_turns=3) as env:
        obs, info = env.reset(seed=7)
        assert info == {"seed": 7} and "boxed" in obs
        answer = env.solution()
        assert env.step("\\boxed{0}") == ("wrong", 0.0, False, False, {})
        assert env.step(answer) == ("right", 1.0, True, False, {})
        assert env.hint() in ("it is even", "it is odd")
        assert env.tools() == []
        # Same seed, same instance; fresh children agree too.
        env.reset(seed=7)
        assert env.solution() == answer
    with sb.load(GUESS) as other:
        other.reset(seed=7)
        assert other.solution() == answer


def test_types_are_not_coerced(sb, make_env):
    code = make_env(
        "import numpy as np\n"
        "return ['list', 'obs'], 1, np.bool_(True), np.float64(0.5), {'k': (1, 2), 3: np.int64(4)}",
        reset_body="return 'just a string'",
    )
    with sb.load(code) as env:
        assert env.reset(seed=0) == "just a string"
        obs, reward, terminated, truncated, info = env.step("a")
        assert obs == ["list", "obs"] and type(reward) is int
        assert terminated is True and type(truncated) is float
        assert info == {"k": (1, 2), 3: 4} and type(info["k"]) is tuple


def test_missing_hint_and_kwargs(sb, make_env):
    with sb.load(make_env("return str(self.kw), 0.0, False, False, {}",
                          init_body="self.kw = kwargs"), kwargs={"level": 2}) as env:
        assert env.hint() is None
        env.reset()
        assert env.step("x")[0] == "{'level': 2}"


def test_env_exception_is_env_raised_and_child_lives(sb, make_env):
    code = make_env("if action == 'boom': raise KeyError('nope')\nreturn 'ok', 0.0, False, False, {}")
    with sb.load(code) as env:
        env.reset()
        with pytest.raises(EnvRaised) as e:
            env.step("boom")
        assert e.value.exc_type == "KeyError" and "nope" in e.value.reason
        assert "in step" in e.value.traceback
        assert env.step("fine")[0] == "ok" and env.alive


def test_unsendable_value_names_method_and_type(sb, make_env):
    with sb.load(make_env("return {1, 2}, 0.0, False, False, {}")) as env:
        env.reset()
        with pytest.raises(EnvRaised) as e:
            env.step("a")
        assert "step()" in e.value.reason and "set" in e.value.reason
        assert env.alive


def test_load_errors(sb, make_env):
    with pytest.raises(EnvLoadError) as e:
        sb.load("import does_not_exist_anywhere\n" + GUESS)
    assert "ModuleNotFoundError" in e.value.reason and "does_not_exist_anywhere" in e.value.reason
    with pytest.raises(EnvLoadError, match="ZeroDivisionError"):
        sb.load(make_env("pass", init_body="1 / 0"))
    with pytest.raises(ContractError):
        sb.load("class Helper:\n    pass\n")
    with pytest.raises(EnvLoadError, match="KeyError"):
        sb.load(GUESS, class_name="Missing")


def test_step_timeout_kills_and_handle_is_dead(quick_sb, make_env):
    with quick_sb.load(make_env("import time\ntime.sleep(30)")) as env:
        env.reset()
        with pytest.raises(EnvTimeout, match="deadline"):
            env.step("a")
        assert not env.alive
        with pytest.raises(EnvCrashed, match="dead"):
            env.step("a")


def test_episode_deadline(make_env):
    with Sandbox(Limits(step_seconds=5, episode_seconds=0.6)) as box:
        with box.load(make_env("import time\ntime.sleep(0.25)\nreturn 'o', 0.0, False, False, {}")) as env:
            env.reset()
            with pytest.raises(EnvTimeout, match="episode"):
                for _ in range(10):
                    env.step("a")


def test_episode_budget_counts_only_time_inside_the_environment(make_env):
    # A slow policy between steps (here: the host sleeping) must not use up the episode budget.
    with Sandbox(Limits(step_seconds=5, episode_seconds=0.5)) as box:
        with box.load(make_env("return 'o', 0.0, False, False, {}")) as env:
            env.reset()
            for _ in range(3):
                time.sleep(0.3)
                assert env.step("a")[0] == "o"
            assert env.alive


def test_a_callers_deadline_cuts_a_call_the_limits_would_allow(sb, make_env):
    """sb allows 3 s per call; a caller's deadline already passed stops a 30 s sleep at once,
    and the timeout names the caller's deadline, not the per-call limit."""
    with sb.load(make_env("import time\ntime.sleep(30)")) as env:
        env.reset(deadline=time.monotonic() + 60)  # later than the limit: the limit applies
        with pytest.raises(EnvTimeout, match="caller's deadline"):
            env.step("a", deadline=time.monotonic())
        assert not env.alive
    with pytest.raises(EnvTimeout, match="caller's deadline"):
        sb.load("import time\ntime.sleep(30)\n" + GUESS, deadline=time.monotonic() + 0.2)


def test_load_timeout(quick_sb):
    with pytest.raises(EnvTimeout):
        quick_sb.load("import time\ntime.sleep(30)\n" + GUESS)


def test_child_death_is_env_crashed_with_stderr(sb, make_env):
    code = make_env("sys.stderr.write('last words here\\n'); sys.stderr.flush(); os._exit(3)")
    with sb.load(code) as env:
        env.reset()
        with pytest.raises(EnvCrashed) as e:
            env.step("a")
        assert "exited with code 3" in e.value.reason
        assert "last words here" in e.value.stderr_tail


def test_oversize_request_is_refused_and_handle_lives(small_sb, make_env):
    with small_sb.load(make_env("return 'ok', 0.0, False, False, {}")) as env:
        env.reset()
        with pytest.raises(EnvError, match="cannot be sent"):
            env.step("x" * (2 << 20))
        assert env.step("small")[0] == "ok"


def test_threads_share_handles_and_sandbox(sb, make_env):
    code = make_env("self.n += 1\nreturn str(self.n), 0.0, False, False, {}",
                    reset_body="self.n = 0\nreturn 'start', {}")
    with sb.load(code) as shared:
        shared.reset()
        with ThreadPoolExecutor(8) as pool:
            counts = list(pool.map(lambda _: int(shared.step("a")[0]), range(64)))
        assert sorted(counts) == list(range(1, 65))

    def episode(seed: int) -> object:
        with sb.load(GUESS) as env:
            env.reset(seed=seed)
            return env.step(env.solution())[1]

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(episode, range(24))) == [1.0] * 24


def test_asyncio_path(sb):
    async def play() -> float:
        with sb.load(GUESS) as env:
            await env.areset(seed=1)
            assert await env.ahint() and await env.atools() == []
            return (await env.astep(await env.asolution()))[1]

    assert asyncio.run(play()) == 1.0


def open_fds() -> int:
    """This process's open descriptors, once unreachable objects have been collected: an event
    loop or sandbox left by an earlier test closes its descriptors whenever the collector gets to
    it, which moved the count by two in the middle of a loop in CI."""
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def fds_within(limit: int, timeout: float = 2.0) -> int:
    """The open-descriptor count once it is at most ``limit`` (or after ``timeout``). The
    sandbox's own threads open a descriptor for a moment (a pipe for a spare, a /proc read), so a
    single count can be one off either way in CI; a leak is one or more a load and stays."""
    deadline = time.monotonic() + timeout
    while (count := open_fds()) > limit and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def test_no_leaked_fds_or_zombies_after_200_loads(sb, zygote_children):
    settled_pool(sb)
    before = open_fds()
    for i in range(200):
        with sb.load(GUESS) as env:
            if i % 50 == 0:
                env.reset(seed=i)
    assert zygote_children(sb) == []  # waits for the pool to refill, too
    assert fds_within(before) <= before  # 200 loads: a leak would add at least 200
    # Scratch dirs and logs removed, but for the spares' own scratch dirs.
    assert sorted(os.listdir(sb._dir)) == sorted(os.path.basename(h.scratch) for h in spares(sb))


def test_prefork_pool_refills_and_spares_die_with_the_sandbox(make_env):
    with Sandbox(Limits(), prefork=3) as box:
        settled_pool(box)
        pool = spares(box)
        assert len(pool) == 3 and all(os.path.exists(f"/proc/{h.pid}") for h in pool)
        with box.load(make_env("return 'o', 0.0, False, False, {}")) as env:
            assert env.pid == pool[0].pid  # the oldest spare serves the load
            env.reset()
        settled_pool(box)
        assert len(spares(box)) == 3
        pids = [h.pid for h in spares(box)]
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]
    with pytest.raises(ConfigError):
        Sandbox(prefork=-1)


def test_toolenv_importable_and_spadework_not(sb, make_env):
    code = make_env(
        "import importlib\n"
        "try:\n    importlib.import_module('spadework')\n    found = 'yes'\n"
        "except ImportError:\n    found = 'no'\n"
        "from toolenv import ToolEnv\n"
        "return found + ' ' + ToolEnv.__name__, 0.0, False, False, {}"
    )
    with sb.load(code) as env:
        env.reset()
        assert env.step("a")[0] == "no ToolEnv"


def test_tool_env_tools(sb):
    code = Path(__file__).parents[2].joinpath("spadework/library/tool_ledger.py").read_text()
    with sb.load(code) as env:
        env.reset(seed=0)
        tools = env.tools()
        assert tools and tools[0]["type"] == "function"


def test_hash_seed_fixed_across_sandboxes(sb, make_env):
    code = make_env("return str(hash('abc')), 0.0, False, False, {}")
    with Sandbox(Limits()) as other:
        values = []
        for box in (sb, other):
            with box.load(code) as env:
                env.reset()
                values.append(env.step("a")[0])
    assert values[0] == values[1]


def test_isolation_report_and_required_layers():
    with Sandbox(Limits()) as box:
        iso = box.isolation
        assert [layer.name for layer in iso.layers] == [
            "namespaces", "uid_drop", "no_new_privs", "seccomp", "landlock", "rlimits", "network"]
        for name in DEFAULT_REQUIRED:
            assert iso.active(name), str(iso)
        assert all(layer.reason for layer in iso.layers)
    with pytest.raises(SandboxUnavailable) as e:
        Sandbox(Limits(namespaces=False, required_layers={"namespaces"})).start()
    assert "namespaces" in e.value.reason and "allow_degraded" in e.value.reason
    with Sandbox(Limits(namespaces=False, required_layers={"namespaces"}, allow_degraded=True)) as box:
        assert not box.isolation.active("namespaces")
        with box.load(GUESS) as env:
            env.reset(seed=0)


@pytest.mark.parametrize("field,value,match", [
    ("step_seconds", 0, "step_seconds"),
    ("memory_bytes", 1000, "memory_bytes"),
    ("cpu_seconds", 0.5, "cpu_seconds"),
    ("uid", 0, "uid"),
    ("max_message_bytes", 1 << 33, "max_message_bytes"),
])
def test_limits_validation(field, value, match):
    with pytest.raises(ConfigError, match=match):
        Limits(**{field: value})


def test_load_before_start_is_an_error():
    with pytest.raises(EnvError, match="not started"):
        Sandbox().load(GUESS)


def test_env_code_gets_no_future_flags_and_compile_errors_are_load_errors(sb, make_env):
    code = make_env("def f(x: int): pass\nreturn repr(f.__annotations__['x']), 0.0, False, False, {}")
    with sb.load(code) as env:
        env.reset()
        assert env.step("a")[0] == "<class 'int'>"
    with pytest.raises(EnvLoadError, match="does not compile"):
        sb.load("class A:\n  def reset(self) return 1\n", class_name="A")


def test_children_start_with_fresh_global_generators(sb, make_env):
    """Unseeded randomness must differ between children, as between fresh interpreters, so
    that the checker's determinism stage can see it (numpy does not reseed itself at fork)."""
    code = make_env("return 'o', 0.0, False, False, {}", reset_body=(
        "import numpy as np\nreturn f'{random.random()} {np.random.randint(1 << 30)}', {}"))
    draws = []
    for _ in range(3):
        with sb.load(code) as env:
            draws.append(env.reset()[0].split())
    assert len({d[0] for d in draws}) == 3  # random
    assert len({d[1] for d in draws}) == 3  # numpy.random


def test_module_over_the_message_cap_is_a_load_error(small_sb):
    code = GUESS + "\nPAD = '" + "x" * (2 << 20) + "'\n"
    with pytest.raises(EnvLoadError, match="cannot be sent"):
        small_sb.load(code)


def test_a_zygote_killed_from_outside_is_replaced_and_loads_work_again():
    """SIGKILL of the fork server (as an OOM killer or a stray ``kill`` would): the environments
    it held die with it, and the next load starts a new one and plays."""
    import signal

    with Sandbox(Limits(step_seconds=3.0, load_seconds=5.0, episode_seconds=30.0)) as box:
        with box.load(GUESS) as env:
            env.reset(seed=1)
        old = box.zygote_pid
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while box._proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        with box.load(GUESS) as env:
            env.reset(seed=2)
            assert env.step(env.solution())[1] == 1.0
        assert box.revived == 1 and box.zygote_pid != old and box.zygote_alive()


@pytest.mark.parametrize("reply_read", [False, True])
def test_a_spare_killed_while_it_waits_is_replaced_and_the_load_succeeds(reply_read):
    """A pre-forked child SIGKILLed from outside before it got a module: the load goes to a
    fresh child instead of failing the environment, whether the spare's hardening reply still
    sat in its pipe (the load's write finds the pipe closed) or had been read (the handshake
    finds it)."""
    import signal

    with Sandbox(Limits(step_seconds=3.0, load_seconds=5.0, episode_seconds=30.0)) as box:
        settled_pool(box)
        time.sleep(0.5)  # the spares have hardened and written their reply
        for handle in spares(box):
            if reply_read:
                handle.handshake(time.monotonic() + 5)
            os.kill(handle.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_alive(h.pid) for h in spares(box)) and time.monotonic() < deadline:
            time.sleep(0.01)  # dead (zombies the zygote has not reaped): died while waiting
        with box.load(GUESS) as env:
            env.reset(seed=2)
            assert env.step(env.solution())[1] == 1.0

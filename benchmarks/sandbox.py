"""What isolation costs: a hardened fork per episode against a fresh interpreter and in-process exec.

Prints one JSON object. All figures come from the same run on the same machine, so the ratios
hold even where absolute times are noisy:

- ``episode_ms``: median full episode (load, reset, 20 steps, close) in a fresh hardened child;
- ``fresh_python_episode_ms``: the same episode driven over pipes in a fresh ``python -c``
  subprocess of this interpreter (no hardening at all): the issue's baseline, "a new process
  per episode" as one would write it;
- ``fresh_isolated_python_episode_ms``: the same with ``python -I -S -c`` (no site packages), the
  cheapest possible new interpreter, reported beside it as the stricter comparison;
- ``ratio`` = episode_ms / fresh_python_episode_ms (target <= 0.25), ``ratio_isolated`` against
  the stricter baseline; on a contended machine the
  wall ratio suffers most from scheduling delays of new processes, so ``cpu_ratio`` also
  compares CPU per episode over every process involved (host, zygote, children);
- ``step_us``: median step round trip of the game on live handles (target <= 100), beside
  ``step_us_trivial_env`` (pure transport) and ``step_us_in_process`` (the game's own work);
- ``episodes_per_s``: full episodes per second with many handles in flight from a thread pool
  (target >= 100 on 2 cores);
- ``in_process_unsafe_episode_ms``: exec in the host process, the reference implementation's way,
  so the price of isolation is visible.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sandbox.py [--episodes N]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from spadework.sandbox import Limits, Sandbox

STEPS = 20
GAME = "mastermind.py"
ACTIONS = ["\\boxed{red blue green amber}", "\\boxed{1 2 3 4}", "not a move", "\\boxed{9 9}"]

TRIVIAL = ("class E:\n    def __init__(self, max_turns=10): pass\n"
           "    def reset(self, seed=None): return 'o', {}\n"
           "    def step(self, a): return 'o', 0.0, False, False, {}\n")

# A driver for the fresh-interpreter baseline: one JSON request per line, one reply per line.
# The starter games subclass the games kit (``from gameenv import GameEnv``), which the sandbox's
# zygote loads once; a fresh interpreter has to load it for every episode, as it would.
DRIVER = r"""
import json, sys
req = json.loads(sys.stdin.readline())
kit = type(sys)("gameenv")
kit.__path__, kit.__package__ = [], "gameenv"
sys.modules["gameenv"] = kit
for name, source in req["kit"]:
    module = kit if name == "gameenv" else type(sys)(name)
    module.__package__ = "gameenv"
    sys.modules[name] = module
    exec(compile(source, name, "exec"), module.__dict__)
sys.modules["env_module"] = type(sys)("env_module")
ns = sys.modules["env_module"].__dict__
exec(compile(req["code"], "<env>", "exec"), ns)
env = ns[req["cls"]](max_turns=req["max_turns"])
print(json.dumps("loaded"), flush=True)
for line in sys.stdin:
    op, arg = json.loads(line)
    out = env.reset(seed=arg) if op == "reset" else env.step(arg)
    print(json.dumps(out), flush=True)
"""


def _kit_sources() -> list[list[str]]:
    """[module name, source] of the games kit, submodules first (as the zygote loads it)."""
    from pathlib import Path

    import spadework.env.gameenv as kit

    folder = Path(kit.__file__).parent
    return [[f"gameenv.{m}", (folder / f"{m}.py").read_text()] for m in kit.MODULES] + [
        ["gameenv", (folder / "__init__.py").read_text()]]


def _actions() -> list[str]:
    return [ACTIONS[i % len(ACTIONS)] for i in range(STEPS)]


def sandbox_episode(sb: Sandbox, code: str, seed: int) -> None:
    with sb.load(code, max_turns=STEPS + 5) as env:
        env.reset(seed=seed)
        for action in _actions():
            env.step(action)


def fresh_python_episode(code: str, seed: int, flags: tuple[str, ...] = ()) -> None:
    proc = subprocess.Popen([sys.executable, *flags, "-c", DRIVER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"code": code, "cls": "MastermindEnv", "max_turns": STEPS + 5,
                                 "kit": _kit_sources()}) + "\n")
    proc.stdout.readline()
    for op, arg in [("reset", seed)] + [("step", a) for a in _actions()]:
        proc.stdin.write(json.dumps([op, arg]) + "\n")
        proc.stdout.readline()
    proc.stdin.close()
    proc.wait()


def in_process_episode(code: str, seed: int) -> None:
    import spadework.env.gameenv

    sys.modules.setdefault("gameenv", spadework.env.gameenv)
    module = types.ModuleType("env_module")
    sys.modules["env_module"] = module
    exec(compile(code, "<env>", "exec"), module.__dict__)  # noqa: S102 - the unsafe baseline
    env = module.MastermindEnv(max_turns=STEPS + 5)
    env.reset(seed=seed)
    for action in _actions():
        env.step(action)
    del sys.modules["env_module"]


def in_process_step_us(code: str) -> float:
    """Median in-process step of the game (what the game itself costs, no transport)."""
    import spadework.env.gameenv

    sys.modules.setdefault("gameenv", spadework.env.gameenv)
    module = types.ModuleType("env_module")
    sys.modules["env_module"] = module
    exec(compile(code, "<env>", "exec"), module.__dict__)  # noqa: S102 - the unsafe baseline
    times = []
    for k in range(100):
        env = module.MastermindEnv(max_turns=STEPS + 5)
        env.reset(seed=k)
        for action in _actions():
            t = time.perf_counter()
            env.step(action)
            times.append((time.perf_counter() - t) * 1e6)
    del sys.modules["env_module"]
    return statistics.median(times)


def _cpu_seconds(zygote_pid: int | None) -> float:
    """CPU used so far by this process, its reaped children, and the zygote with its reaped
    children: every process an episode involves (scheduling delays excluded)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    if zygote_pid is not None:
        fields = Path(f"/proc/{zygote_pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def cpu_ms_per_episode(fn, n: int, zygote_pid: int | None) -> float:
    before = _cpu_seconds(zygote_pid)
    for i in range(n):
        fn(i)
    time.sleep(0.2)  # let the zygote sweep (and so account for) released children
    return (_cpu_seconds(zygote_pid) - before) / n * 1000


def median_ms(fn, n: int) -> float:
    times = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    code = resources.files("spadework.library").joinpath(GAME).read_text()
    n = args.episodes
    t = time.perf_counter()
    with Sandbox(Limits()) as sb:
        start_ms = (time.perf_counter() - t) * 1000
        sandbox_episode(sb, code, 0)  # warm up
        episode = median_ms(lambda i: sandbox_episode(sb, code, i), n)
        fresh = median_ms(lambda i: fresh_python_episode(code, i), max(10, n // 3))
        isolated = median_ms(lambda i: fresh_python_episode(code, i, ("-I", "-S")), max(10, n // 3))
        cpu_sandbox = cpu_ms_per_episode(lambda i: sandbox_episode(sb, code, i), n, sb.zygote_pid)
        cpu_fresh = cpu_ms_per_episode(lambda i: fresh_python_episode(code, i), max(10, n // 3), None)
        unsafe = median_ms(lambda i: in_process_episode(code, i), n)
        in_step = in_process_step_us(code)
        steps = []
        for k in range(100):  # the game's own episodes: its observation grows with history
            with sb.load(code, max_turns=STEPS + 5) as env:
                env.reset(seed=k)
                for action in _actions():
                    t = time.perf_counter()
                    env.step(action)
                    steps.append((time.perf_counter() - t) * 1e6)
        with sb.load(TRIVIAL) as env:
            env.reset()
            transport = []
            for _ in range(2000):
                t = time.perf_counter()
                env.step("a")
                transport.append((time.perf_counter() - t) * 1e6)
        total = 10 * n
        t = time.perf_counter()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(lambda i: sandbox_episode(sb, code, i), range(total)))
        eps = total / (time.perf_counter() - t)
        layers = [layer.name for layer in sb.isolation.layers if layer.active]
    print(json.dumps({
        "game": GAME, "steps_per_episode": STEPS, "sandbox_start_ms": round(start_ms, 1),
        "episode_ms": round(episode, 3),
        "fresh_python_episode_ms": round(fresh, 3),
        "fresh_isolated_python_episode_ms": round(isolated, 3),
        "ratio": round(episode / fresh, 4), "target_ratio": 0.25,
        "ratio_isolated": round(episode / isolated, 4),
        "cpu_ms_per_episode": round(cpu_sandbox, 3),
        "fresh_python_cpu_ms_per_episode": round(cpu_fresh, 3),
        "cpu_ratio": round(cpu_sandbox / cpu_fresh, 4),
        "step_us": round(statistics.median(steps), 1), "target_step_us": 100,
        "step_us_trivial_env": round(statistics.median(transport), 1),
        "step_us_in_process": round(in_step, 1),
        "episodes_per_s": round(eps, 1), "threads": args.threads, "target_episodes_per_s": 100,
        "in_process_unsafe_episode_ms": round(unsafe, 4),
        "isolation_price_x": round(episode / unsafe, 1),
        "active_layers": layers,
    }, indent=1))


if __name__ == "__main__":
    main()

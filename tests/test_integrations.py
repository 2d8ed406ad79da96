"""spadework.integrations: archived environments served over MCP and OpenEnv, driven by those
projects' own clients (the ``mcp`` and ``openenv`` extras; ``make test-interop`` installs them)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from spadework.archive import Archive, EnvRecord
from spadework.env.checker import CheckConfig, check
from spadework.env.probe import solution_actions
from spadework.env.toolenv import parse_answer, parse_tool_calls
from spadework.errors import ConfigError
from spadework.integrations.hosted import HostedEnv
from spadework.sandbox import Limits, Sandbox

ROOT = Path(__file__).resolve().parent.parent
SPADEWORK = [sys.executable, "-m", "spadework.cli.__main__"]

# A tool-use environment whose one tool hangs or floods on arguments no check tries (so the
# checker accepts it): what an archived environment may still do to a server.
HOSTILE_TOOLS = '''
from toolenv import Instruction, ToolEnv


class HostileToolsEnv(ToolEnv):
    def declare_tools(self):
        return {"lookup": {"description": "The code word.", "parameters": {
            "type": "object", "properties": {"key": {"type": "string"}}}}}

    def tool_lookup(self, key=""):
        if key == "hang-forever-7731":
            while True:
                pass
        if key == "flood-7731":
            return "x" * 50_000_000
        return "The code word is " + self.word + "."

    def reset(self, seed=None):
        import random
        self.word = str(random.Random(seed).randrange(100_000, 1_000_000))
        return self.start("Find the code word.",
                          [Instruction("Look up the code word.", lambda: self.called("lookup"))])

    def expected_answer(self):
        return self.word

    def solution(self):
        return [self.reply_call("lookup", key="word"), self.reply_answer(self.word)]
'''


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """A fresh run's archive: ``spadework run --preset smoke --no-train`` with the scripted policy
    of the resume tests (the starters checked and imported, one designed environment accepted,
    two iterations played; about 25 s), plus the hostile tool environment, accepted by the
    checker, and a rejected module that fails at reset."""
    run_dir = tmp_path_factory.mktemp("run")
    tests = ROOT / "tests"
    done = subprocess.run(
        [*SPADEWORK, "run", "--preset", "smoke", "--no-train", "--config",
         str(tests / "fixtures" / "smoke_whole_designs.toml"), "--run-dir", str(run_dir),
         "--policy", "scripted_policy:slow_policy_factory", "--iterations", "2"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1",
             "PYTHONPATH": os.pathsep.join([str(tests), str(ROOT)])})
    assert done.returncode == 0, done.stderr[-3000:]
    db = run_dir / "archive.sqlite"
    with Sandbox(Limits()) as sb:
        hostile = check(HOSTILE_TOOLS, sandbox=sb, config=CheckConfig(max_turns=6), module=True)
    assert hostile.ok, hostile.reason
    broken = "class BrokenEnv:\n    def reset(self, seed=None):\n        return undefined_name, {}\n"
    with Sandbox(Limits()) as sb:
        bad = check(broken, sandbox=sb, config=CheckConfig(max_turns=6), module=True)
    assert not bad.ok
    with Archive.open(db) as a:
        assert any(r.iteration == 0 and r.status == "accepted" for r in a.list_envs())
        a.add_env(EnvRecord.from_check(HOSTILE_TOOLS, hostile, iteration=1, setting="tool-use",
                                       skill=None))
        a.add_env(EnvRecord.from_check(broken, bad, iteration=1, setting="games", skill=None))
    return db


def env_id(db: Path, class_name: str | None, status: str | None = None) -> str:
    """The id of the one environment of this class (or of this status)."""
    with Archive.open_read_only(db) as a:
        ids = [r.env_id for r in a.list_envs(status=status)
               if class_name is None or r.class_name == class_name]
    assert len(ids) == 1, (class_name, ids)
    return ids[0]


def replayed(db: Path, env: str, seed: int, level: int = 1,
             max_turns: int | None = None) -> tuple[list[str], float, str]:
    """The environment's solution for ``seed`` replayed straight in the sandbox: the replies,
    the total reward and the first observation (what a served episode must reproduce)."""
    with HostedEnv(db, env, level=level, max_turns=max_turns) as h:
        first, _ = h.reset(seed)
        replies = [str(r) for r in solution_actions(h.solution())]
        total = 0.0
        for r in replies:
            turn = h.step(r)
            total += turn.reward
            if turn.done:
                break
    return replies, total, first


# ---------------------------------------------------------------------------------------- MCP


def _mcp_session(args: list[str], play):
    """Run ``play(session)`` against ``spadework mcp ARGS`` with the MCP SDK's stdio client."""
    mcp = pytest.importorskip("mcp")
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "spadework.cli.__main__",
                                                                 "mcp", *args],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})

    async def main():
        async with stdio_client(params) as (read, write):
            async with mcp.ClientSession(read, write) as session:
                init = await session.initialize()
                return await play(session, init)

    return asyncio.run(asyncio.wait_for(main(), 120))


def _state(result) -> dict:
    return json.loads(result.contents[0].text)


def test_mcp_serves_a_tool_environment_and_its_reward_matches_the_archive_replay(archive):
    pytest.importorskip("mcp")
    env = env_id(archive, "CalendarEnv")
    replies, total, _ = replayed(archive, env, seed=5, level=3, max_turns=20)  # the whole task
    assert total == 1.0

    async def play(session, init):
        assert "Instruction (step 1 of" in init.instructions
        assert "<tool_call>" not in init.instructions and "submit_answer" in init.instructions
        names = [t.name for t in (await session.list_tools()).tools]
        results = []
        for reply in replies:
            answer = parse_answer(reply)
            if answer is not None and not parse_tool_calls(reply):
                results.append(await session.call_tool("submit_answer", {"answer": answer}))
            else:
                for call in parse_tool_calls(reply):
                    results.append(await session.call_tool(call.name, call.arguments))
        after = await session.call_tool("list_rooms", {"day": 1})
        state = _state(await session.read_resource("spadework://episode"))
        return names, results, after, state

    names, results, after, state = _mcp_session([str(archive), "--env", env[:10], "--seed", "5",
                                                 "--level", "3", "--max-turns", "20"], play)
    assert "submit_answer" in names and "cancel_event" in names
    assert all(not r.is_error for r in results)
    assert results[-1].structured_content["reward"] == 1.0
    assert results[-1].structured_content["terminated"] is True
    assert after.is_error and "episode is over" in after.content[0].text
    assert state["reward"] == total and state["over"] and state["seed"] == 5
    assert state["ended_by"] == "answer judged"


def test_mcp_reports_refused_calls_and_a_flooding_or_hanging_tool_ends_the_episode(archive):
    pytest.importorskip("mcp")
    args = [str(archive), "--env", env_id(archive, "HostileToolsEnv")[:10], "--max-turns", "6"]

    async def flood(session, init):
        unknown = await session.call_tool("no_such_tool", {})
        early = await session.call_tool("submit_answer", {"answer": "123456"})
        tags = await session.call_tool("submit_answer", {"answer": "</answer>x"})
        flood = await session.call_tool("lookup", {"key": "flood-7731"})
        after = await session.call_tool("lookup", {"key": "word"})
        return unknown, early, tags, flood, after, _state(await session.read_resource(
            "spadework://episode"))

    unknown, early, tags, flooded, after, state = _mcp_session(args, flood)
    assert unknown.is_error and "unknown tool" in unknown.content[0].text
    assert not early.structured_content["terminated"]  # refused: the step is not done yet
    assert tags.is_error and "tags" in tags.content[0].text
    assert flooded.is_error and "returned too much" in flooded.content[0].text
    assert after.is_error and "episode is over" in after.content[0].text
    assert state["over"] and state["reward"] <= 0 and "returned too much" in state["ended_by"]
    assert state["turns"] == 2  # the unknown tool and the early answer; the rest never stepped

    async def hang(session, init):
        hung = await session.call_tool("lookup", {"key": "hang-forever-7731"})
        return hung, _state(await session.read_resource("spadework://episode"))

    t0 = time.monotonic()
    hung, state = _mcp_session(args, hang)
    assert hung.is_error and "deadline" in hung.content[0].text
    assert time.monotonic() - t0 < 60 and state["over"] and "deadline" in state["ended_by"]


def test_mcp_refuses_a_games_environment_with_a_clear_error(archive):
    out = subprocess.run([*SPADEWORK, "mcp", str(archive), "--env",
                          env_id(archive, "MazeEnv")[:10]], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if "needs the MCP SDK" in out.stderr:
        pytest.skip("the mcp extra is not installed")
    assert out.returncode == 1 and "MCP serves the tools of tool-use environments" in out.stderr
    assert "Traceback" not in out.stderr


# ------------------------------------------------------------------------------------ OpenEnv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _serving(cmd: list[str], probe: str, env: dict, seconds: float = 180) -> Iterator[None]:
    """Run a server command until the block ends; fail when ``probe`` does not answer in time."""
    import urllib.request

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    deadline = time.monotonic() + seconds
    try:
        while True:
            try:
                with urllib.request.urlopen(probe, timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail(f"{cmd[:4]} did not start: {proc.stderr.read()[-2000:]}")
                time.sleep(0.3)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def openenv_server(archive):
    """``spadework openenv serve`` on the archive's maze, in its own process."""
    pytest.importorskip("openenv")
    port = _free_port()
    env = env_id(archive, "MazeEnv")
    url = f"http://127.0.0.1:{port}"
    with _serving([*SPADEWORK, "openenv", "serve", str(archive), "--env", env[:10], "--port",
                   str(port)], f"{url}/health", {**os.environ, "PYTHONPATH": str(ROOT)}):
        yield url, env


def test_openenv_client_plays_an_archived_game_to_a_win_with_its_solution(openenv_server, archive):
    from openenv.core.generic_client import GenericEnvClient

    url, env = openenv_server
    for level in (1, 2):
        replies, total, first = replayed(archive, env, seed=7, level=level)
        assert total == 1.0
        with GenericEnvClient(base_url=url).sync() as client:
            start = client.reset(seed=7, level=level)
            assert start.observation["text"] == first and start.observation["level"] == level
            assert not start.done
            rewards = []
            for reply in replies:
                result = client.step({"message": reply})
                rewards.append(result.reward)
                if result.done:
                    break
            assert result.done and sum(rewards) == total == 1.0
            state = client.state()
            assert state["episode_reward"] == 1.0 and state["seed"] == 7
            assert state["level"] == level and state["env_id"] == env
            after = client.step({"message": replies[0]})
            assert after.done and "no episode is running" in after.observation["error"]


def test_openenv_sessions_play_side_by_side_and_bad_requests_get_clear_errors(openenv_server,
                                                                              archive):
    from openenv.core.generic_client import GenericEnvClient

    url, env = openenv_server
    with GenericEnvClient(base_url=url).sync() as a, GenericEnvClient(base_url=url).sync() as b:
        ra, rb = a.reset(seed=1), b.reset(seed=2)
        assert ra.observation["text"] == replayed(archive, env, seed=1)[2]
        assert rb.observation["text"] == replayed(archive, env, seed=2)[2]
        with pytest.raises(Exception, match="(?i)invalid|validation|message"):
            a.step({"text": "not the action's field"})
        with pytest.raises(Exception, match="LEVELS"):
            a.reset(seed=1, level=99)
        assert a.reset(seed=1).observation["text"] == ra.observation["text"]


def test_servers_refuse_bad_sources_with_clear_errors(archive, tmp_path):
    with pytest.raises(ConfigError, match="no starter environment named"):
        HostedEnv("no_such_game")
    with pytest.raises(ConfigError, match="declares LEVELS"):
        HostedEnv(archive, env_id(archive, "MazeEnv"), level=99)
    broken = env_id(archive, None, status="rejected")
    with pytest.raises(ConfigError, match="rejected at its"):
        HostedEnv(archive, broken)
    for args in (["openenv", "serve", str(archive), "--env", "ffff"],
                 ["openenv", "serve", str(archive), "--env", broken[:10]],
                 ["mcp", str(archive), "--env", broken[:10], "--allow-rejected"]):
        out = subprocess.run([*SPADEWORK, *args], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        if "needs OpenEnv" in out.stderr or "needs the MCP SDK" in out.stderr:
            continue
        assert out.returncode == 1, (args, out.stderr)
        assert out.stderr.startswith("error:") and "Traceback" not in out.stderr, out.stderr


# ------------------------------------------------------------------------------------- Harbor


def _harbor_python() -> str | None:
    """The interpreter of .venv-harbor (Harbor needs Python 3.12; make test-interop builds it)."""
    path = os.environ.get("SPADEWORK_HARBOR_PYTHON") or str(ROOT / ".venv-harbor" / "bin" / "python")
    return path if Path(path).exists() else None


def _run_task(task: Path, tmp: Path, solve: bool = True, log: list[str] | None = None) -> dict:
    """A task as its container would run it, on this machine: the app and tests folders copied
    (as Harbor copies them), solve.sh (or ``log`` written as the agent's), then test.sh."""
    app, tests, logs = tmp / "app", tmp / "tests", tmp / "logs"
    shutil.copytree(task / "environment" / "app", app)
    shutil.copytree(task / "tests", tests)
    env = {**os.environ, "SPADEWORK_APP": str(app), "SPADEWORK_TESTS": str(tests),
           "SPADEWORK_VERIFY_CPU_SECONDS": "5",
           "SPADEWORK_SOLUTION": str(task / "solution"), "SPADEWORK_VERIFIER_LOGS": str(logs)}
    if solve:
        subprocess.run(["bash", str(task / "solution" / "solve.sh")], env=env, check=True,
                       capture_output=True, timeout=120)
    if log is not None:
        (app / "episode.jsonl").write_text("".join(json.dumps({"reply": r}) + "\n" for r in log))
    subprocess.run(["bash", str(tests / "test.sh")], env=env, check=True, capture_output=True,
                   timeout=300)
    return {"reward": float((logs / "reward.txt").read_text()),
            **json.loads((logs / "rewards.json").read_text())}


@pytest.fixture(scope="module")
def harbor_tasks(archive, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("harbor") / "tasks"
    chosen = [env_id(archive, c)[:10] for c in ("MazeEnv", "CalendarEnv", "HostileToolsEnv")]
    code = subprocess.run([*SPADEWORK, "archive", "export", "--db", str(archive), "--format",
                           "harbor", str(out), "--seed", "3", "--seed", "4",
                           *[a for e in chosen for a in ("--env", e)]],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert code.returncode == 0, code.stderr
    assert "6 Harbor task(s) written" in code.stdout, code.stdout  # 3 environments x 2 seeds
    return out


def test_harbor_tasks_win_with_their_solution_and_score_only_what_the_agent_sent(harbor_tasks,
                                                                                  tmp_path):
    tasks = sorted(p.name for p in harbor_tasks.iterdir())
    assert len(tasks) == 6 and all(re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{8}-l1-s[34]", t)
                                   for t in tasks)
    maze = next(harbor_tasks / t for t in tasks if t.startswith("mazeenv") and t.endswith("s3"))
    meta = tomllib.loads((maze / "task.toml").read_text())["metadata"]
    assert meta["seed"] == 3 and meta["level"] == 1 and meta["class_name"] == "MazeEnv"
    assert "python3 /app/play.py" in (maze / "instruction.md").read_text()
    won = _run_task(maze, tmp_path / "won")
    assert won["reward"] == 1.0 and won["won"] and not won["error"]
    # the agent's log is what counts: nothing sent scores 0, garbage scores 0
    assert _run_task(maze, tmp_path / "idle", solve=False)["reward"] == 0.0
    assert _run_task(maze, tmp_path / "junk", solve=False, log=["\\boxed{nowhere}"])["reward"] <= 0
    # the verifier replays its own copy: an agent that rewrites /app/env.py to always win gains
    # nothing
    forged = tmp_path / "forged"
    shutil.copytree(maze, forged / "task")
    (forged / "task" / "environment" / "app" / "env.py").write_text(
        "class MazeEnv:\n    def __init__(self, **k): pass\n"
        "    def reset(self, seed=None): return 'x', {}\n"
        "    def step(self, a): return 'won', 1.0, True, False, {}\n")
    assert _run_task(forged / "task", tmp_path / "forged-run", solve=False,
                     log=["anything"])["reward"] <= 0


def test_harbor_tool_use_task_and_a_hanging_replay_are_scored(harbor_tasks, tmp_path):
    calendar = next(p for p in harbor_tasks.iterdir() if p.name.startswith("calendarenv"))
    assert _run_task(calendar, tmp_path / "cal")["reward"] == 1.0
    hostile = next(p for p in harbor_tasks.iterdir() if p.name.startswith("hostiletoolsenv"))
    hang = '<tool_call>{"name": "lookup", "arguments": {"key": "hang-forever-7731"}}</tool_call>'
    t0 = time.monotonic()
    out = _run_task(hostile, tmp_path / "hang", solve=False, log=[hang])
    # its CPU limit kills it, or on a loaded machine the wall-clock limit (twice that) comes first
    assert out["reward"] == 0.0 and ("replay failed (killed by signal" in out["error"]
                                     or out["error"] == "the replay timed out"), out["error"]
    assert time.monotonic() - t0 < 60


def test_harbor_loads_the_exported_tasks(harbor_tasks):
    python = _harbor_python()
    if python is None:
        pytest.skip("no .venv-harbor (Harbor needs Python 3.12; make test-interop builds it)")
    script = ("import json, sys\nfrom pathlib import Path\n"
              "from harbor.models.task.task import Task\n"
              "out = []\n"
              "for p in sorted(Path(sys.argv[1]).iterdir()):\n"
              "    assert Task.is_valid_dir(p), p\n"
              "    t = Task(p)\n"
              "    out.append({'name': t.name, 'seed': t.config.metadata['seed'],\n"
              "                'network': t.config.environment.network_mode.value,\n"
              "                'instruction': t.instruction[:80],\n"
              "                'solve': str(t.paths.discovered_solve_path),\n"
              "                'test': str(t.paths.discovered_test_path)})\n"
              "print(json.dumps(out))\n")
    done = subprocess.run([python, "-c", script, str(harbor_tasks)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    tasks = json.loads(done.stdout)
    assert len(tasks) == 6 and {t["seed"] for t in tasks} == {3, 4}
    assert all(t["network"] == "no-network" and t["instruction"].startswith("# ") for t in tasks)
    assert all(t["solve"].endswith("solve.sh") and t["test"].endswith("test.sh") for t in tasks)


def test_harbor_import_reads_exported_and_reef_style_tasks(harbor_tasks, archive, tmp_path):
    from spadework.archive.harbor import import_harbor

    reef = tmp_path / "reef"
    (reef / "maze-task" / "environment").mkdir(parents=True)
    (reef / "maze-task" / "task.toml").write_text('schema_version = "1.4"\n[metadata]\n'
                                                  'skill = "navigation"\n')
    (reef / "maze-task" / "environment" / "game.py").write_text(
        (ROOT / "tests" / "fixtures" / "envs" / "good" / "combination_lock.py").read_text())
    (reef / "broken-task" / "environment").mkdir(parents=True)
    (reef / "broken-task" / "task.toml").write_text('schema_version = "1.4"\n')
    (reef / "broken-task" / "environment" / "Dockerfile").write_text("FROM python:3.11\n")
    (reef / "bad-toml").mkdir()
    (reef / "bad-toml" / "task.toml").write_text("this is = = not toml")
    db = tmp_path / "imported.sqlite"
    with Sandbox(Limits()) as sb, Archive.open(db) as a:
        config = CheckConfig(max_turns=20)
        exported = import_harbor(a, harbor_tasks, sandbox=sb, config=config)
        others = import_harbor(a, reef, sandbox=sb, config=config)
        again = import_harbor(a, harbor_tasks, sandbox=sb, config=config)
        with pytest.raises(ConfigError, match="no Harbor task"):
            import_harbor(a, tmp_path / "reef" / "maze-task" / "environment", sandbox=sb,
                          config=config)
    # six tasks of three environments: each environment once, its other seed already present
    assert sorted(o.status for o in exported) == ["accepted"] * 3 + ["present"] * 3
    assert {o.env_id for o in exported} == {
        env_id(archive, c) for c in ("MazeEnv", "CalendarEnv", "HostileToolsEnv")}
    by = {o.source: o for o in others}
    assert by["maze-task"].status == "accepted" and by["maze-task"].skill == "navigation"
    assert by["broken-task"].status == "rejected" and "no Python module" in by["broken-task"].reason
    assert by["bad-toml"].status == "rejected" and "task.toml" in by["bad-toml"].reason
    assert all(o.status == "present" for o in again)
    with Archive.open_read_only(db) as a:
        assert {i.format for r in a.list_envs() for i in a.imports(r.env_id)} == {"harbor"}


# ---------------------------------------------------------------------------------- verifiers


@pytest.fixture(scope="module")
def model_server():
    """``spadework serve`` with the default 135M model, run from the main venv (the model stack
    lives there; the verifiers extra is tested from .venv-interop)."""
    main = ROOT / ".venv" / "bin" / "spadework"
    if not main.exists():
        pytest.skip("no .venv with the models extra to run `spadework serve` (make setup)")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with _serving([str(main), "serve", "--model", "smollm2-135m-instruct", "--port", str(port)],
                  f"{url}/models", {**os.environ, "OMP_NUM_THREADS": "1"}):
        yield url


def test_verifiers_evaluates_archived_environments_and_rewards_match_the_archive_replay(
        archive, model_server, tmp_path):
    pytest.importorskip("verifiers.v1")
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    from spadework.integrations.verifiers import TASKSET_ID, load_environment

    maze, calendar = env_id(archive, "MazeEnv"), env_id(archive, "CalendarEnv")
    chosen = {"env_ids": [maze[:8], calendar[:8]]}
    env = load_environment(archive, chosen, seeds=(3,), max_turns=3)
    assert type(env).__name__ == "SpadeworkEnv"
    config = EvalConfig(
        env={"taskset": {"id": TASKSET_ID, "archive": str(archive), "seeds": [3],
                         "max_turns": 3, **chosen}},
        model="smollm2-135m-instruct", sampling={"max_tokens": 32, "temperature": 0.0},
        client={"type": "eval", "base_url": model_server, "api_key_var": "OPENAI_API_KEY"},
        select={"limit": 2}, num_rollouts=1, max_concurrent=2, rich=None, push=False,
        output_dir=tmp_path, run={"name": "spadework", "dir": "spadework"})
    os.environ.setdefault("OPENAI_API_KEY", "unused")
    episodes = asyncio.run(run_eval(config))
    traces = [t for e in episodes for t in e.traces]
    assert sorted(t.task.data.class_name for t in traces) == ["CalendarEnv", "MazeEnv"]
    for t in traces:
        assert t.ok and not t.errors, t.errors
        replies = [n.message.content for n in t.nodes if n.message.role == "assistant"]
        assert 1 <= len(replies) <= 3
        d = t.task.data
        with HostedEnv(archive, d.env_id, level=d.level, max_turns=3) as h:
            h.reset(d.seed)
            replay = []
            for r in replies:
                turn = h.step(r)
                replay.append(turn.reward)
                if turn.done:
                    break
        assert t.info["step_rewards"] == replay
        assert t.reward == pytest.approx(sum(replay)) == t.rewards["env_reward"].score
    saved = (tmp_path / "spadework" / "traces.jsonl").read_text().splitlines()
    assert len(saved) == 2  # verifiers' own record of the run


def test_verifiers_filters_refuse_what_matches_nothing(archive):
    pytest.importorskip("verifiers.v1")
    from spadework.integrations.verifiers import load_environment

    with pytest.raises(ConfigError, match="filter keys are"):
        load_environment(archive, {"colour": "red"})
    with Archive.open_read_only(archive) as a:
        stats = {r.env_id: a.env_stats(r.env_id) for r in a.list_envs()}
        expected = {e for e, st in stats.items() if st is not None}
    # a band inside the widest gap between the played win rates (which the scripted agent's
    # guesses set, whichever environments the pool drew): it holds none of them
    edges = sorted({0.0, 1.0} | {stats[e].win_rate for e in expected})
    lo, hi = max(zip(edges, edges[1:]), key=lambda g: g[1] - g[0])
    env = load_environment(archive, {"band": (lo + (hi - lo) / 3, hi - (hi - lo) / 3)})
    with pytest.raises(ConfigError, match="no environments in"):
        list(env.taskset.load())
    played = load_environment(archive, {"band": (0.0, 1.0)}, seeds=(1, 2))  # every one played
    tasks = list(played.taskset.load())
    assert expected and {t.data.env_id for t in tasks} == expected
    assert len(tasks) == 2 * len(expected) and {t.data.seed for t in tasks} == {1, 2}

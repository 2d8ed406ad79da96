"""Every starter tool-use environment, against the contract and the checks the validator runs.

The sandbox is not part of these tests: each module is our own, reviewed file, executed into a
fresh module object with ``toolenv`` resolved to spadework's copy of the base class, exactly the
import the sandbox provides to generated code.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import random
import re
import sys

import pytest

import spadework.env.toolenv as toolenv
from spadework.env import checker
from spadework.env.static import check_static
from spadework.env.toolenv import ToolCall, format_tool_call, parse_answer, parse_tool_calls
from spadework.library import starter_envs
from spadework.skills import skills_for
from spadework.types import EnvSource

TOOL_ENVS = starter_envs("tool-use")
SOLVE_SEEDS = [*range(12), 1234, 98765]
RANDOM_SEEDS = range(30)


def load_class(src: EnvSource) -> type:
    """Execute trusted starter source into an isolated module; return its environment class."""
    spec = importlib.util.spec_from_loader(f"starter_{src.name}", loader=None)
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get("toolenv")
    sys.modules["toolenv"] = toolenv
    try:
        exec(compile(src.code, f"<starter {src.name}>", "exec"), module.__dict__)  # trusted: ours
    finally:
        if saved is None:
            del sys.modules["toolenv"]
        else:
            sys.modules["toolenv"] = saved
    return getattr(module, src.class_name)


@pytest.fixture(params=TOOL_ENVS, ids=[e.name for e in TOOL_ENVS])
def src(request) -> EnvSource:
    return request.param


@pytest.fixture
def env_class(src) -> type:
    """The starter at its top level (the whole task): the tests below check the task as written;
    test_every_level_is_a_prefix_of_the_task checks the levels below it."""
    cls = load_class(src)
    return functools.partial(cls, level=cls.LEVELS)


def test_every_level_is_a_prefix_of_the_task(src):
    """Level k plays the first k steps, its solution wins at every seed (with no final answer
    below the top level), and the top level is the whole task."""
    cls = load_class(src)
    assert cls.LEVELS == 3
    for level in range(1, cls.LEVELS + 1):
        for seed in range(8):
            env = cls(max_turns=8, level=level)
            obs, info = env.reset(seed=seed)
            assert info["steps"] == level and f"step 1 of {level}" in obs
            replies = env.solution()
            assert ("<answer>" in replies[-1]) == (level == cls.LEVELS)
            results, won = play(env, replies)
            assert won, (level, seed, results[-1][0])
    low = cls(level=1)
    low.reset(seed=2)
    top = cls(level=cls.LEVELS)
    top.reset(seed=2)
    assert len(low.solution()) < len(top.solution())


def play(env, replies) -> tuple[list[tuple], bool]:
    """Step through replies until the episode ends; (step results, won)."""
    results = []
    for reply in replies:
        result = env.step(reply)
        results.append(result)
        _, reward, terminated, truncated, _ = result
        if terminated or truncated:
            return results, bool(terminated and reward > 0)
    return results, False


def check_result(result) -> None:
    obs, reward, terminated, truncated, info = result
    assert isinstance(obs, str) and obs
    assert type(reward) is float and math.isfinite(reward) and -1.0 <= reward <= 1.0
    assert type(terminated) is bool and type(truncated) is bool
    assert isinstance(info, dict) and isinstance(info["tool_calls"], int)


# ------------------------------------------------------------------------- random agent

_TOKEN = re.compile(r"[A-Za-z0-9_./:-]+")


def random_value(rng: random.Random, schema: dict, tokens: list[str]) -> object:
    """A value shaped by the schema, often built from words the agent has seen."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type", "string")
    numbers = [int(t) for t in tokens if t.isdigit()] or [1]
    if kind == "integer":
        return rng.choice([rng.randint(0, 50), rng.choice(numbers)])
    if kind == "number":
        return rng.choice([round(rng.uniform(0, 500), 2), float(rng.choice(numbers))])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [random_value(rng, schema.get("items", {}), tokens) for _ in range(rng.randint(1, 3))]
    if kind == "object":
        return {k: random_value(rng, s, tokens) for k, s in schema.get("properties", {}).items()}
    return rng.choice(tokens)


def random_reply(rng: random.Random, tools: list[dict], seen: str) -> str:
    tokens = _TOKEN.findall(seen) or ["x"]
    roll = rng.random()
    if roll < 0.7:
        calls = []
        for _ in range(rng.randint(1, 3)):
            fn = rng.choice(tools)["function"]
            props = fn["parameters"].get("properties", {})
            required = set(fn["parameters"].get("required", ()))
            args = {k: random_value(rng, s, tokens) for k, s in props.items()
                    if k in required or rng.random() < 0.3}
            calls.append(format_tool_call(ToolCall(fn["name"], args)))
        return "".join(calls)
    if roll < 0.9:
        return f"<answer>{rng.choice(tokens)}</answer>"
    return rng.choice(["", "I am not sure.", "<tool_call>{oops</tool_call>", "<answer></answer>"])


# ------------------------------------------------------------------------- tests


def test_metadata_static_check_and_skills(src):
    assert src.setting == "tool-use"
    assert src.skill in {s.name for s in skills_for("tool-use")}
    assert check_static(src.code).class_name == src.class_name
    assert src.code.lstrip().startswith('"""'), "module docstring describes the environment"


def test_library_covers_distinct_skills_and_domains():
    assert len(TOOL_ENVS) >= 4
    assert len({e.skill for e in TOOL_ENVS}) == len(TOOL_ENVS)


def test_tools_schema_and_first_observation(env_class):
    env = env_class()
    obs, info = env.reset(seed=5)
    assert isinstance(obs, str) and isinstance(info, dict) and info["steps"] >= 3
    tools = env.tools()
    assert 5 <= len(tools) <= 12
    for tool in tools:
        fn = tool["function"]
        assert tool["type"] == "function" and fn["description"]
        assert fn["parameters"]["type"] == "object"
        assert f"{fn['name']}(" in obs, "the first observation lists every tool"
    assert "<tool_call>" in obs and "<answer>" in obs


def test_solution_wins_from_many_seeds(env_class):
    for seed in SOLVE_SEEDS:
        env = env_class()
        env.reset(seed=seed)
        replies = env.solution()
        assert isinstance(replies, list) and len(replies) <= env.max_turns
        results, won = play(env, replies)
        for result in results:
            check_result(result)
        assert won, f"seed {seed}: {results[-1][0]}"
        assert results[-1][4]["steps_done"] == results[-1][4]["steps"]


def test_solution_fits_the_turn_budget_it_is_built_with(env_class):
    """The player's max_turns reaches the constructor (play uses 8); fit_turns packs the calls."""
    for max_turns in (3, 4, 6, 8):
        for seed in range(6):
            env = env_class(max_turns=max_turns)
            env.reset(seed=seed)
            replies = env.solution()
            assert len(replies) <= max_turns, (max_turns, seed)
            assert play(env, replies)[1], (max_turns, seed)


def test_solution_in_xml_style_wins_too(env_class):
    env = env_class()
    env.reset(seed=3)
    replies = ["".join(format_tool_call(c, "xml") for c in parse_tool_calls(r)) or r
               for r in env.solution()]
    assert play(env, replies)[1]


def test_solution_uses_several_tools_and_leaves_a_distractor(env_class):
    env = env_class()
    env.reset(seed=0)
    used = {c.name for r in env.solution() for c in parse_tool_calls(r)}
    declared = {t["function"]["name"] for t in env.tools()}
    assert len(used) >= 3 and used < declared


def test_seeded_reset_is_deterministic(env_class):
    for seed in (0, 7, 31337):
        first, second = env_class(), env_class()
        assert first.reset(seed=seed) == second.reset(seed=seed)
        assert first.solution() == second.solution()
        assert first.tools() == second.tools()
        rng = random.Random(seed)
        seen = first.reset(seed=seed)[0]
        second.reset(seed=seed)
        for _ in range(first.max_turns):
            reply = random_reply(rng, first.tools(), seen)
            a, b = first.step(reply), second.step(reply)
            assert a == b
            seen += a[0]
            if a[2] or a[3]:
                break


def test_instances_vary_with_the_seed(env_class):
    env = env_class()
    observations = {env.reset(seed=s)[0] for s in range(8)}
    answers = set()
    for s in range(8):
        env.reset(seed=s)
        answers.add(parse_answer(env.solution()[-1]))
    assert len(observations) >= 6 and len(answers) >= 6


def test_answer_not_in_first_observation(env_class):
    for seed in SOLVE_SEEDS:
        env = env_class()
        obs, _ = env.reset(seed=seed)
        answer = parse_answer(env.solution()[-1])
        assert answer
        assert not re.search(rf"(?<![\w.-]){re.escape(answer)}(?![\w-]|\.\d)", obs), (seed, answer)


def test_hint_helps_without_giving_the_answer(env_class):
    for seed in range(6):
        env = env_class()
        env.reset(seed=seed)
        hint = env.hint()
        answer = parse_answer(env.solution()[-1])
        assert isinstance(hint, str) and len(hint) > 20
        assert answer not in hint
        other = env_class()
        other.reset(seed=seed)
        assert other.hint() == hint


def test_answer_first_is_refused(env_class):
    env = env_class()
    env.reset(seed=2)
    obs, reward, terminated, truncated, _ = env.step(env.solution()[-1])
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "step 1 of" in obs


def test_random_replies_never_win(env_class):
    wins = 0
    for seed in RANDOM_SEEDS:
        env = env_class()
        seen, _ = env.reset(seed=seed)
        rng = random.Random(1000 + seed)
        for _ in range(env.max_turns):
            result = env.step(random_reply(rng, env.tools(), seen))
            check_result(result)
            seen += "\n" + result[0]
            if result[2] or result[3]:
                wins += result[2] and result[1] > 0
                break
    assert wins == 0


def test_empty_and_repeated_replies_never_win(env_class):
    env = env_class()
    env.reset(seed=4)
    candidates = ["", "done", "<answer>done</answer>", *env.solution()]
    for reply in candidates:
        env.reset(seed=4)
        results, won = play(env, [reply] * env.max_turns)
        assert not won, reply
        assert results[-1][3], "repeating one reply runs out of turns or loses"


def test_skipping_a_step_completing_reply_does_not_win(env_class):
    for seed in (0, 1, 2):
        env = env_class()
        env.reset(seed=seed)
        replies = env.solution()
        results, _ = play(env, replies)
        completing = [i for i, r in enumerate(results) if re.search(r"\[Step \d+ of \d+ complete", r[0])]
        assert len(completing) >= 3
        for skip in completing:
            env.reset(seed=seed)
            assert not play(env, replies[:skip] + replies[skip + 1:])[1], (seed, skip)


def test_passes_the_checkers_runtime_stages_in_process(env_class):
    """The validator's own stages, with instances opened in this process instead of the sandbox."""
    cfg = checker.CheckConfig(max_turns=10)

    @contextlib.contextmanager
    def opener():
        yield env_class(max_turns=cfg.max_turns)

    checker.contract_stage(opener, cfg)
    checker.determinism_stage(opener, cfg)
    checker.solvable_stage(opener, cfg, checker.solvable_seeds(cfg.seed, env_class.func.__name__, 16))
    assert "random 0/" in checker.not_trivial_stage(opener, cfg)


def test_solutions_win_inside_the_real_sandbox():
    """End to end: the sandbox registers spadework/env/toolenv/ as the package ``toolenv`` and runs
    each starter there."""
    from spadework.errors import SandboxUnavailable
    from spadework.sandbox.base import Sandbox

    try:
        sandbox = Sandbox().__enter__()
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox here: {e.reason}")
    try:
        for src in TOOL_ENVS:
            with sandbox.load(src.code, max_turns=10, class_name=src.class_name) as handle:
                handle.reset(seed=21)
                assert [t["function"]["name"] for t in handle.tools()]
                for reply in handle.solution():
                    obs, reward, terminated, truncated, _ = handle.step(reply)
                    if terminated or truncated:
                        break
                assert terminated and reward == 1.0, (src.name, obs)
    finally:
        sandbox.__exit__(None, None, None)

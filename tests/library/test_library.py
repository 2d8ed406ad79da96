"""starter_envs / starter_env: listing by source, never by import."""

from __future__ import annotations

import ast
import sys

import pytest

from spadework.env.contract import find_env_class
from spadework.errors import ConfigError, ContractError
from spadework.library import GAME_SKILLS, parse_source, starter_env, starter_envs


def test_games_cover_every_skill_with_distinct_files():
    games = starter_envs("games")
    assert len(games) >= 8
    assert {g.skill for g in games} == set(GAME_SKILLS)
    assert len({g.env_id for g in games}) == len(games)
    assert [g.name for g in games] == sorted(g.name for g in games)


def test_listing_reads_metadata_without_importing():
    before = set(sys.modules)
    envs = starter_envs()
    assert not {m for m in set(sys.modules) - before if "library." in m}
    for env in envs:
        assert env.class_name == find_env_class(env.code)
        declared = [
            stmt.value.value for stmt in ast.parse(env.code).body
            if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", "") == "ENV_CLASS"
        ]
        assert declared == [env.class_name], f"{env.name}: declare ENV_CLASS once"
        assert "spadework" not in env.code.split('"""', 2)[-1], "environments never import spadework"


def test_settings_filter_and_union():
    everything = starter_envs()
    games, tools = starter_envs("games"), starter_envs("tool-use")
    assert {e.name for e in games} | {e.name for e in tools} == {e.name for e in everything}
    assert all(e.setting == "tool-use" for e in tools)
    with pytest.raises(ConfigError, match="unknown setting"):
        starter_envs("chess")


def test_starter_env_by_name():
    first = starter_envs("games")[0]
    assert starter_env(first.name) == first
    with pytest.raises(ConfigError, match=first.name):
        starter_env("no-such-game")


def test_missing_or_bad_metadata_is_a_clear_error():
    body = "class A:\n    def reset(self, seed=None): ...\n    def step(self, action): ...\n"
    with pytest.raises(ContractError, match="lacks SETTING and SKILL"):
        parse_source(body, "bare")
    with pytest.raises(ContractError, match="lacks SKILL"):
        parse_source('SETTING = "games"\n' + body, "half")
    with pytest.raises(ContractError, match="games use one of"):
        parse_source('SETTING = "games"\nSKILL = "juggling"\n' + body, "odd")
    with pytest.raises(ContractError, match="SETTING is 'board'"):
        parse_source('SETTING = "board"\nSKILL = "optimization"\n' + body, "odd")
    with pytest.raises(ContractError, match="'helpers'.*no environment class"):
        parse_source('SETTING = "games"\nSKILL = "optimization"\nclass A: pass\n', "helpers")
    with pytest.raises(ContractError, match="syntax error"):
        parse_source("def (:", "broken")
    ok = parse_source('SETTING = "games"\nSKILL = "optimization"\n' + body, "ok")
    assert (ok.class_name, ok.skill, ok.name) == ("A", "optimization", "ok")


@pytest.fixture(scope="module")
def sandbox():
    from spadework.errors import SandboxUnavailable
    from spadework.sandbox import Limits, Sandbox

    try:
        box = Sandbox(Limits())
        box.start()
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox here: {e.reason}")
    with box:
        yield box


@pytest.mark.parametrize("max_turns", [8, 20])
def test_every_starter_game_passes_the_checker_in_the_sandbox(sandbox, max_turns):
    """The real staged checker, run the way the pipeline runs it, including novelty against the
    games already accepted (shared boilerplate must not make them near-duplicates)."""
    from spadework.env.checker import CheckConfig, check

    accepted: list[str] = []
    for env in starter_envs("games"):
        report = check(env.code, sandbox=sandbox, seeds=5, module=True,
                       config=CheckConfig(max_turns=max_turns), existing=accepted)
        assert report.ok, f"{env.name} (max_turns={max_turns}): {report.failed_stage}: {report.reason}"
        assert report.env_id == env.env_id
        accepted.append(env.code)


def test_every_tool_starter_passes_the_checker_at_each_of_its_levels(sandbox):
    """The tool-use preset's turn limit (8): every level of every tool starter is checked."""
    from spadework.config import preset
    from spadework.env.checker import check

    cfg = preset("cpu-qwen-tools")
    for env in starter_envs("tool-use"):
        report = check(env.code, sandbox=sandbox, seeds=3, module=True, config=cfg.check)
        assert report.ok, f"{env.name}: {report.failed_stage}: {report.reason}"
        assert report.levels == 3, env.name

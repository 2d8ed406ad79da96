"""The level controller through the loop: a designed game with levels starts at level 1, moves up
after an iteration the agent wins every play of, down after one it wins none of, each move
recorded in the archive, and the designer is shown how its environments played."""

from __future__ import annotations

import re

import pytest
from scripted_policy import ScriptedPolicy
from starters import starter_records

from spadework.archive import Archive, archive_path
from spadework.config import override, preset
from spadework.curriculum import CurriculumConfig
from spadework.errors import ConfigError
from spadework.levels import next_level
from spadework.loop import Models, run

REVERSE = '''\
import random
from gameenv import GameEnv


class ReverseEnv(GameEnv):
    LEVELS = 3

    def setup(self, rng):
        self.n = rng.randint(10 ** self.level, 10 ** (self.level + 1) - 1)

    def task(self):
        return f"Write the number {self.n} with its digits in reverse order."

    def example(self):
        return "0"

    def judge(self, move):
        if move == str(self.n)[::-1]:
            return self.WIN, "Right."
        return self.CONTINUE, f"{move} is not {self.n} reversed."

    def solution(self):
        return self.box(str(self.n)[::-1])
'''


def designs_reverse(conv):
    return conv.messages[0]["role"] == "system" and "design" in conv.messages[0]["content"]


def agent(wins_at: set[int]):
    """Designs ReverseEnv; as the agent, reverses the number when its digit count is in
    ``wins_at`` (level k has k + 1 digits), else answers 0."""
    def script(conv, turn):
        if designs_reverse(conv):
            return f"```python\n{REVERSE}\n```"
        m = re.search(r"Write the number (\d+) with", conv.messages[-1]["content"])
        if m and len(m.group(1)) - 1 in wins_at:
            return f"\\boxed{{{m.group(1)[::-1]}}}"
        return "\\boxed{0}"
    return script


@pytest.fixture
def cfg():
    return override(preset("smoke"), {
        "iterations": 3, "plays": 2, "design": {"max_tokens": 1024},
        "curriculum": {"designs_per_regen": 1, "regen_interval": 10, "pool_size": 1}})


def play_run(cfg, run_dir, script):
    """``run`` into an archive that already holds the starters checked at the run's turn limit
    (checked once per test session, not once per run)."""
    with Archive.open(archive_path(run_dir)) as a:
        a.import_starter(starter_records(cfg.play.max_turns))
    return run(cfg, run_dir, Models(ScriptedPolicy(script)))


def levels_played(run_dir, env_id):
    with Archive.open_read_only(archive_path(run_dir)) as a:
        return ([sorted({e.level for e in a.episodes(iteration=i, env_id=env_id)}) for i in range(3)],
                a.level_changes(env_id), a.current_levels())


def designed(run_dir):
    with Archive.open_read_only(archive_path(run_dir)) as a:
        return next(x for x in a.attempts() if x.outcome == "accepted").env_id


def test_a_level_won_every_time_moves_up_and_one_never_won_moves_down(tmp_path, cfg):
    """The agent wins levels 1 and 2 every time and never level 3: the game is played at 1,
    then 2, then 3, and would go back to 2; each move names the plays that caused it."""
    play_run(cfg, tmp_path, agent({1, 2}))
    env = designed(tmp_path)
    played, changes, current = levels_played(tmp_path, env)
    assert played == [[1], [2], [3]]
    assert [(c["iteration"], c["from_level"], c["to_level"], c["wins"], c["plays"]) for c in changes] == [
        (0, 1, 2, 2, 2), (1, 2, 3, 2, 2), (2, 3, 2, 0, 2)]
    assert current[env] == 2
    with Archive.open_read_only(archive_path(tmp_path)) as a:
        lines = [r.metrics for r in a.iterations()]
    assert [m["mean_level"] for m in lines] == [1.0, 2.0, 3.0]
    assert [m["per_env"][env[:12]]["next_level"] for m in lines] == [2, 3, 2]


def test_levels_stay_put_in_the_band_and_when_the_controller_is_off(tmp_path, cfg):
    play_run(cfg, tmp_path / "never", agent(set()))  # never won: stays at 1
    env = designed(tmp_path / "never")
    assert levels_played(tmp_path / "never", env)[:2] == ([[1], [1], [1]], [])
    off = override(cfg, {"curriculum": {"adapt_levels": False}})
    play_run(off, tmp_path / "off", agent({1, 2, 3}))
    env = designed(tmp_path / "off")
    assert levels_played(tmp_path / "off", env)[:2] == ([[1], [1], [1]], [])


def test_the_rule_and_its_settings():
    assert [next_level(2, 3, w, up_at=0.8, down_at=0.2) for w in (0.1, 0.2, 0.5, 0.8)] == [1, 1, 2, 3]
    with pytest.raises(ValueError, match="outside 1..3"):
        next_level(4, 3, 0.5)
    for bad in ({"level_up_at": 1.5}, {"level_down_at": 0.9, "level_up_at": 0.8}):
        with pytest.raises(ConfigError, match="level_"):
            CurriculumConfig(**bad)


def test_the_designer_is_shown_how_its_environments_played(tmp_path, cfg):
    """At the next design stage the prompt groups the earlier designs by how the agent did and
    gives the figures; a run without feedback does not show them."""
    two = override(cfg, {"iterations": 2, "curriculum": {"regen_interval": 1}})
    play_run(two, tmp_path / "fb", agent(set()))
    with Archive.open_read_only(archive_path(tmp_path / "fb")) as a:
        prompts = {x.iteration: x.messages[1]["content"] for x in a.attempts() if x.attempt == 0}
    assert "How your recent environments played" not in prompts[0]
    assert ("Out of reach, make games like these easier:\n- ReverseEnv: won 0 of 2 without the hint "
            "and 0 of 2 with it, at level 1 of 3. The agent replied:") in prompts[1]
    quiet = override(two, {"design": {"feedback": False}})
    play_run(quiet, tmp_path / "quiet", agent(set()))
    with Archive.open_read_only(archive_path(tmp_path / "quiet")) as a:
        assert all("How your recent environments played" not in x.messages[1]["content"]
                   for x in a.attempts())


def test_the_designer_is_shown_what_the_checker_rejected(tmp_path, cfg):
    """With every design rejected nothing is played, so only the checker's verdicts can tell the
    designer anything: the next stage's prompts count the rejections and give the latest reason
    with the fix; with feedback off, or ``rejections = 0``, they do not."""
    broken = REVERSE.replace("rng.randint(10 ** self.level", "rng.randint(SIZES[self.level]")

    def script(conv, turn):
        return f"```python\n{broken}\n```" if designs_reverse(conv) else "\\boxed{0}"

    two = override(cfg, {"iterations": 2, "curriculum": {"regen_interval": 1}})
    for name, change in (("on", {}), ("off", {"feedback": False}), ("none", {"rejections": 0})):
        play_run(override(two, {"design": change}), tmp_path / name, script)
        with Archive.open_read_only(archive_path(tmp_path / name)) as a:
            prompts = {x.iteration: x.messages[1]["content"] for x in a.attempts()
                       if x.attempt == 0}
            assert {x.outcome for x in a.attempts()} == {"load"}
        assert "The checker rejected" not in prompts[0]
        shown = re.search(r"The checker rejected (\d+) of your last \1 designs:\n"
                          r"- failed to load \(\1 of \1\): \"import or ReverseEnv\(max_turns=\d+\) "
                          r"raised NameError: name 'SIZES' is not defined[^\n]*\. The module must "
                          r"import", prompts[1])
        assert (shown is not None) == (name == "on"), (name, prompts[1][-1500:])

"""Shared parts of the designer and hint tests: replies, a corpus, a sandbox (the scripted
policy is tests/scripted_policy.py's, re-exported here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_policy import ScriptedPolicy

from spadework.corpus import Corpus, Document

__all__ = ["GOOD_CODE", "ScriptedPolicy", "archive", "bad", "corpus", "fenced", "sb", "start_sandbox"]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "envs"
GOOD_CODE = (FIXTURES / "good" / "arithmetic_chain.py").read_text()


def fenced(code: str) -> str:
    return f"Here is the environment.\n\n```python\n{code}\n```\n"


def bad(name: str) -> str:
    return (FIXTURES / "bad" / f"{name}.py").read_text()


def corpus() -> Corpus:
    docs = [Document(f"doc{i}", f"Document number {i}: the {w} changes with the seasons.")
            for i, w in enumerate(["river", "harvest", "tide", "glacier", "market", "forest",
                                   "comet", "volcano"])]
    return Corpus(documents=tuple(docs), source="test")


def start_sandbox():
    from spadework.errors import SandboxUnavailable
    from spadework.sandbox import Limits, Sandbox

    try:
        box = Sandbox(Limits(step_seconds=1.0, load_seconds=5.0, episode_seconds=30.0))
        box.start()
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox here: {e.reason}")
    return box


@pytest.fixture(scope="module")
def sb():
    """A started sandbox for a test module (skipped where none can start)."""
    box = start_sandbox()
    with box:
        yield box


@pytest.fixture
def archive(tmp_path):
    """An empty archive in the test's folder."""
    from spadework.archive import Archive

    with Archive.open(tmp_path / "archive.sqlite") as a:
        yield a

"""Shared parts of the designer and hint tests: replies, a corpus, a sandbox (the scripted
policy is tests/scripted_policy.py's, re-exported here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_policy import ScriptedPolicy

from spadework.corpus import Corpus, Document

__all__ = ["GOOD_CODE", "PARCELS", "ScriptedPolicy", "archive", "bad", "corpus", "fenced", "sb", "start_sandbox"]

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


#: A tool-use design of the guide's shape but not a copy of it (a copy is rejected as no design).
PARCELS = """\
import random
from toolenv import ToolEnv, ToolError

class ParcelDepotEnv(ToolEnv):
    LEVELS = 3

    def declare_tools(self):
        code = {"type": "string", "enum": sorted(self.parcels)}
        return {
            "locate": {"description": "Shelf and weight of a parcel.", "parameters": {
                "type": "object", "required": ["code"], "properties": {"code": code}}},
            "relabel": {"description": "Give a parcel a new destination city.", "parameters": {
                "type": "object", "required": ["code", "city"],
                "properties": {"code": code, "city": {"type": "string"}}}},
            "dispatch": {"description": "Send a parcel out; returns the van load.", "parameters": {
                "type": "object", "required": ["code"], "properties": {"code": code}}},
            "clock": {"description": "The depot's time.", "parameters": {}},
        }

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.parcels = {f"P-{100 + i}": {"shelf": rng.randint(1, 30), "kg": rng.randint(1, 20),
                                         "city": rng.choice(["Lyon", "Nice", "Metz"])}
                        for i in range(15)}
        self.van = 0
        self.code = rng.choice(sorted(self.parcels))
        self.city = rng.choice(["Brest", "Dijon", "Tours"])
        return self.start("You run a parcel depot.", self.steps_for_level([
            self.call_step(f"Find where parcel {self.code} is.", "locate", code=self.code),
            self.call_step(f"Send {self.code} to {self.city} instead.", "relabel",
                           code=self.code, city=self.city),
            self.call_step(f"Dispatch {self.code} and answer with the van's load in kg.",
                           "dispatch", code=self.code)]))

    def tool_locate(self, code):
        p = self.parcels[code]
        return f"{code}: shelf {p['shelf']}, {p['kg']} kg, to {p['city']}"

    def tool_relabel(self, code, city):
        self.parcels[code]["city"] = city
        return f"{code} now goes to {city}"

    def tool_dispatch(self, code):
        if self.parcels[code]["city"] != self.city:
            raise ToolError(f"{code} still has its old label")
        self.van += self.parcels.pop(code)["kg"]
        return f"{code} dispatched; van load {self.van} kg"

    def tool_clock(self):
        return "09:00"

    def expected_answer(self):
        return str(self.van)
"""

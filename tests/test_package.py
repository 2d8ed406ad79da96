"""The package as a user meets it: import cost, the command line, the setup files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import spadework

ROOT = Path(__file__).resolve().parents[1]
SPADEWORK = str(Path(sys.executable).with_name("spadework"))


def test_import_pulls_in_no_heavy_libraries() -> None:
    code = (
        "import sys, json, spadework, spadework.cli; "
        "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'ray', 'numpy') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_version_matches_package() -> None:
    out = subprocess.run([SPADEWORK, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"spadework {spadework.__version__}"


def test_help_lists_every_command() -> None:
    from spadework.cli import app

    names = {c.name or c.callback.__name__ for c in app.registered_commands}
    names |= {g.name for g in app.registered_groups}
    out = subprocess.run([SPADEWORK, "--help"], capture_output=True, text=True, check=True)
    assert names, "the CLI registers no command"
    for name in names:
        assert name in out.stdout, f"`spadework --help` does not list {name!r}"


def test_constraints_pin_torch_to_the_cpu_build_on_disk() -> None:
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert "torch==2.13.0" in pins
    readme = (ROOT / "README.md").read_text().splitlines()
    commands = [line for line in readme[:12] if line.strip().startswith("make ")]
    assert commands[:2] == ["make run", "make test"], "the README must open with its two commands"
    assert "make test" in (ROOT / ".ci" / "run").read_text()

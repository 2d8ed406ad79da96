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


def _import_graph() -> dict[str, set[str]]:
    """spadework's modules and the spadework modules each imports anywhere in its code (at the
    top, inside functions, under TYPE_CHECKING): an edge to a package means its ``__init__``."""
    import ast

    pkg = ROOT / "spadework"
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in pkg.rglob("*.py") if "library" not in p.relative_to(pkg).parts}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            graph[mod] |= {t for t in map(resolve, targets) if t and t.startswith("spadework") and t != mod}
    return graph


def test_no_import_circle_among_spadework_modules() -> None:
    graph = _import_graph()
    assert len(graph) > 50 and "spadework.hints" in graph["spadework.loop"]  # imported in a function
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []


def test_every_preset_is_a_shipped_toml_file() -> None:
    """The presets are data (``spadework/presets/NAME.toml``, declared as package data so a wheel
    carries them), one file per name the command line offers, each read by ``--config``'s code."""
    import tomllib

    from spadework.config import PRESETS, preset

    folder = ROOT / "spadework" / "presets"
    assert sorted(p.stem for p in folder.glob("*.toml")) == sorted(PRESETS)
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "presets/*.toml" in data["spadework"]
    for name in PRESETS:
        parent = tomllib.loads((folder / f"{name}.toml").read_text()).get("preset")
        assert parent is None or parent in PRESETS  # a variant states what it changes
        assert preset(name).preset == name


def test_a_preset_over_another_changes_only_what_it_states() -> None:
    from spadework.config import preset

    base, tools = preset("cpu-qwen"), preset("cpu-qwen-tools")
    assert (tools.setting, tools.play.max_turns, tools.curriculum.pool_size) == ("tool-use", 8, 3)
    assert (tools.model, tools.designer_model, tools.learner, tools.reward) == \
        (base.model, base.designer_model, base.learner, base.reward)
    assert tools.play.max_tokens == base.play.max_tokens and tools.design.examples == base.design.examples

"""The package's own import graph, read from the source (nothing is imported): no circle among
module-level imports, and the layers that must not reach up do not (training below evaluation,
settings and pulls below everything)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "spadework"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _targets(name: str, path: Path, node: ast.AST) -> list[str]:
    """The package's modules an import statement loads: ``from pkg import sub`` loads the
    submodule ``pkg.sub`` where there is one, else ``pkg`` itself."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for _ in range(node.level - 1):
            pkg = pkg.rsplit(".", 1)[0]
        base = f"{pkg}.{base}" if base else pkg
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def imports(name: str, *, top_level_only: bool) -> set[str]:
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {t for t in _targets(name, path, node)
                      if t.startswith("spadework") and t in MODULES and t != name}
    return found


def test_module_level_imports_form_no_circle():
    graph = {m: imports(m, top_level_only=True) for m in MODULES}
    # a package's __init__ importing its own submodules is the package's index, not a circle
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(t):] + [t]))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)


def test_training_does_not_import_evaluation():
    """The designer, the curriculum, play and the learner sit below ``evaluate/``: evaluation
    uses them, never the other way (the loop itself may run an in-run evaluation)."""
    below = ("spadework.designer", "spadework.curriculum", "spadework.rollout", "spadework.train",
             "spadework.env", "spadework.archive", "spadework.policy", "spadework.sandbox",
             "spadework.levels", "spadework.reward", "spadework.library")
    offenders = {m: sorted(t for t in imports(m, top_level_only=False)
                           if t.startswith("spadework.evaluate"))
                 for m in MODULES if m.startswith(below)}
    assert not {m: ts for m, ts in offenders.items() if ts}


def test_leaf_modules_import_nothing_of_the_package():
    for leaf in ("spadework.wheels", "spadework.errors", "spadework.seeding", "spadework.figures"):
        assert imports(leaf, top_level_only=False) == set(), leaf


def test_sql_is_written_only_inside_the_archive_package():
    """The schema does not leak: outside ``spadework/archive/`` nothing calls ``.query(`` or
    holds a SQL statement; the report, the loop and the commands read through
    :mod:`spadework.archive.views`."""
    import re

    sql = re.compile(r"\.query\(|\b(SELECT|INSERT INTO|DELETE FROM|UPDATE \w+ SET)\b")
    leaks = [f"{path.relative_to(PACKAGE.parent)}:{k}" for name, path in MODULES.items()
             if not name.startswith("spadework.archive") and not name.startswith("spadework.library")
             for k, line in enumerate(path.read_text().splitlines(), 1) if sql.search(line)]
    assert leaks == []


def test_settings_is_a_leaf_and_its_names_are_the_stages():
    """``spadework.settings`` imports only the standard library, ``spadework.errors`` and
    itself (at any depth of its code), and the names it validates against are those the stages
    implement."""
    own = set()
    for name, path in MODULES.items():
        if name.startswith("spadework.settings"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
                    own |= {t for t in _targets(name, path, node) if t.startswith("spadework")}
    assert {t for t in own if not t.startswith("spadework.settings")} <= {"spadework.errors"}

    from spadework.designer.guides import SETTING_RULES
    from spadework.evaluate.catalog import suite_names
    from spadework.policy.load import load_policy  # noqa: F401 (the backends' loader imports)
    from spadework.settings.design import SETTINGS
    from spadework.settings.eval import DATA_SUITES, SUITES

    assert tuple(SETTING_RULES) == SETTINGS
    assert sorted(suite_names()) == sorted(SUITES + DATA_SUITES)


def test_each_deferred_import_of_the_package_says_why():
    """A function-level import of the package's own modules is the exception: each says on its
    line, or above the run of imports it belongs to, why it is not at the module's top (a
    command's code kept out of ``spadework --help``, an optional or heavy dependency, an import
    circle), so a module's top says what it uses."""
    bare = []
    for name, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for block in ast.walk(fn):
                body = getattr(block, "body", None)
                if not isinstance(body, list):
                    continue
                reason = False  # a comment line above an import of the current run
                for node in body:
                    if not isinstance(node, ast.Import | ast.ImportFrom):
                        reason = False
                        continue
                    reason = reason or lines[node.lineno - 2].strip().startswith("#")
                    own = [t for t in _targets(name, path, node) if t.startswith("spadework")]
                    if own and not (reason or "#" in lines[node.lineno - 1]):
                        bare.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert sorted(set(bare)) == []

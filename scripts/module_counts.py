"""The house's figures at a git revision, as JSON: modules of the package (outside the starter
library and the shipped example games), how many run over 500 lines, the largest, and the
function-level imports (all, and of the package's own modules), the figures issue 27 is judged by.

    python3 scripts/module_counts.py [REV ...]     (default HEAD)
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

SKIP = ("spadework/library/", "/example_games/", "/harbor_files/")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def counts(rev: str) -> dict:
    files = [f for f in _git("ls-tree", "-r", "--name-only", rev, "spadework").split()
             if f.endswith(".py") and not any(s in f for s in SKIP)]
    sizes, deferred, own = {}, 0, 0
    for f in files:
        src = _git("show", f"{rev}:{f}")
        sizes[f] = len(src.splitlines())
        for node in ast.walk(ast.parse(src)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    deferred += 1
                    mod = sub.module if isinstance(sub, ast.ImportFrom) else sub.names[0].name
                    own += (mod or "").startswith("spadework") or getattr(sub, "level", 0) > 0
    largest = max(sizes, key=sizes.get)
    return {"rev": rev, "modules": len(files),
            "over_500_lines": {f: n for f, n in sorted(sizes.items()) if n > 500},
            "largest": [largest, sizes[largest]], "function_level_imports": deferred,
            "of_own_modules": own}


if __name__ == "__main__":
    print(json.dumps([counts(r) for r in sys.argv[1:] or ["HEAD"]], indent=1))

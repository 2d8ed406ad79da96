"""What the sandbox's fork server loads besides the environment's own code: the directories of
the few packages it may import, and spadework's two sandbox kits (the ``toolenv`` and ``gameenv``
packages), as (module name, source file) pairs in the order it loads them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from spadework.env import gameenv, toolenv

_ENV = Path(__file__).resolve().parent.parent / "env"
TOOLENV = _ENV / "toolenv"
GAMEENV = _ENV / "gameenv"


def site_dirs(names: tuple[str, ...]) -> list[str]:
    """Directories holding these top-level packages (so the zygote can import just them)."""
    dirs: list[str] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        top = origin.parent.parent if origin.name == "__init__.py" else origin.parent
        if str(top) not in dirs:
            dirs.append(str(top))
    return dirs


def _kit_files(name: str, folder: Path, modules: tuple[str, ...]) -> list[list[str]] | None:
    """(module name, source file) of one of spadework's sandbox kits (the ``toolenv`` or
    ``gameenv`` package), in the order the zygote loads them (its submodules, then the package
    itself); None when the folder is not that package."""
    files = [[f"{name}.{m}", str(folder / f"{m}.py")] for m in modules]
    files.append([name, str(folder / "__init__.py")])
    return files if all(Path(f).is_file() for _, f in files) else None


def toolenv_files(folder: Path) -> list[list[str]] | None:
    return _kit_files("toolenv", folder, toolenv.MODULES)


def gameenv_files() -> list[list[str]] | None:
    return _kit_files("gameenv", GAMEENV, gameenv.MODULES)

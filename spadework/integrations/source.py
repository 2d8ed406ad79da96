"""Where a hosted environment's code comes from (for spadework.gym and every integration): a
starter name, a module file, an archive.

Nothing here runs environment code: files are read as text and described from their syntax
tree (the static stage of the checker), archived code is read from the archive opened
read-only. The code runs later, and only in the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spadework.archive import Archive, archive_path
from spadework.env import pyparse
from spadework.env.static import check_static
from spadework.errors import ConfigError, ContractError
from spadework.library import starter_env
from spadework.types import EnvSource


@dataclass(frozen=True)
class Resolved:
    """An environment's code and what is known about it before it runs.

    ``max_turns`` is the turn limit its check passed under when it has one (an archived
    environment), else None; ``imports`` are the top-level modules it imports.
    """

    env: EnvSource
    origin: str  # "starter", "file" or "archive"
    max_turns: int | None = None
    imports: frozenset[str] = frozenset()


def imports_of(code: str) -> frozenset[str]:
    """The top-level modules ``code`` imports."""
    import ast

    names: set[str] = set()
    for node in ast.walk(pyparse.parse(code)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return frozenset(names)


def _from_file(path: Path) -> Resolved:
    try:
        code = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text ({e.reason})") from e
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        info = check_static(code, allow_numpy=True, allow_math_verify=True)
    except ContractError as e:
        raise ContractError(f"{path}: {e.reason} (`spadework check {path}` says more)") from e
    env = EnvSource(code=code, class_name=info.class_name, setting=info.setting, name=path.stem)
    return Resolved(env, "file", None, imports_of(code))


def _from_archive(path: Path, env_id: str, allow_rejected: bool) -> Resolved:
    if path.is_dir():
        path = archive_path(path)
    with Archive.open_read_only(path) as archive:
        rec = archive.find_env(env_id)
    if rec.status != "accepted" and not allow_rejected:
        raise ConfigError(f"environment {rec.env_id[:12]} in {path} was rejected at its "
                          f"{rec.failed_stage} stage ({rec.reason}); pass allow_rejected=True to "
                          "play it anyway")
    env = rec.source
    turns = rec.report.max_turns if rec.report is not None else None
    return Resolved(env, "archive", turns, imports_of(rec.code))


def play_settings(rec, current_levels: dict[str, int], level: int | None = None,
                  max_turns: int | None = None) -> tuple[int, int, int]:
    """(turn limit, declared levels, level played) of an archived environment ``rec``: the turn
    limit its check passed under unless ``max_turns`` is given (10 when it has no report), and
    ``level`` (default: the level it plays next, from ``current_levels``) capped at its LEVELS."""
    report = rec.report
    turns = max_turns or (report.max_turns if report is not None else None) or 10
    declared = (report.levels if report is not None else None) or 1
    played = level if level is not None else current_levels.get(rec.env_id, 1)
    return turns, declared, min(played, declared)


def resolve(source: str | Path | EnvSource, env_id: str | None = None, *,
            allow_rejected: bool = False) -> Resolved:
    """The code behind ``source``:

    - an :class:`EnvSource` (e.g. an archive's ``EnvRecord`` turned into one) as given;
    - with ``env_id``: ``source`` is an archive file (or a run directory holding one) and
      ``env_id`` an environment id or its first 4+ hex characters; a rejected environment is
      refused unless ``allow_rejected``;
    - a path to a ``.py`` module (it must pass the checker's static stage);
    - else the name of a starter environment (``"maze"``; see ``spadework.library``).

    >>> resolve("maze").env.class_name, resolve("maze").origin
    ('MazeEnv', 'starter')
    >>> resolve("no_such_game")
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: no starter environment named 'no_such_game'; known: cipher_machine, coin_balance, countdown, delivery_route, garden_trial, knapsack, light_switches, mastermind, maze, nim, sequence, sliding_puzzle, tool_calendar, tool_files, tool_inventory, tool_ledger, tool_shipping, tool_travel (or give a .py file, or an archive with env_id=)
    """
    if isinstance(source, EnvSource):
        return Resolved(source, "file", None, imports_of(source.code))
    if env_id is not None:
        return _from_archive(Path(source), env_id, allow_rejected)
    if not isinstance(source, (str, Path)):
        raise ConfigError(f"source must be a starter name, a .py file or an archive path, got "
                          f"{type(source).__name__}")
    path = Path(source)
    if path.suffix in (".sqlite", ".db") or path.is_dir():
        raise ConfigError(f"{source} is an archive; name the environment too: "
                          "make(archive, env_id=ID)")
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise ConfigError(f"no file {source}")
        return _from_file(path)

    try:
        env = starter_env(str(source))
    except ConfigError as e:
        raise ConfigError(f"{e.reason} (or give a .py file, or an archive with env_id=)") from e
    return Resolved(env, "starter", None, imports_of(env.code))

"""Configuration read at the edge: the presets (TOML files in ``spadework/presets/``), a run's
``--config`` TOML file over one, and overrides from the command line.

The settings themselves are :mod:`spadework.settings`, a leaf package (the standard library and
:mod:`spadework.errors` only): :class:`~spadework.settings.run.RunConfig` and one frozen
dataclass per section, each field documented, each ``__post_init__`` saying what to set when a
value is wrong. Only this module, ``paths.py`` and the ``spadework.cli`` package read
``os.environ``. Nothing below the CLI and the loop imports it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

from spadework.errors import ConfigError
from spadework.settings.run import RunConfig, is_endpoint

__all__ = ["PRESETS", "RunConfig", "is_endpoint", "load_config", "override", "preset"]


def preset(name: str, _seen: tuple[str, ...] = ()) -> RunConfig:
    """A named preset: ``smoke``, ``cpu`` (the default), ``cpu-qwen``, ``cpu-qwen-tools``,
    ``paper-4b``, ``paper-30b``. Each is a TOML file shipped in ``spadework/presets/`` (with why
    it is shaped so, in its comments), read as a ``--config`` file is: over the defaults of
    :class:`RunConfig`, or over another preset when the file names one (``preset = "cpu-qwen"``),
    so that a variant states only what it changes.

    >>> preset("smoke").iterations, preset("paper-4b").play.max_turns
    (2, 25)
    >>> tools = preset("cpu-qwen-tools")
    >>> tools.preset, tools.setting, tools.model == preset("cpu-qwen").model
    ('cpu-qwen-tools', 'tool-use', True)
    """
    import tomllib
    from importlib import resources

    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    where = f"preset {name} (spadework/presets/{name}.toml)"
    if name in _seen:
        raise ConfigError(f"{where}: presets name each other in a circle: {' -> '.join((*_seen, name))}")
    text = resources.files("spadework").joinpath("presets", f"{name}.toml").read_text(encoding="utf-8")
    try:
        values = tomllib.loads(text)
        parent = values.get("preset")
        if parent is not None and (not isinstance(parent, str) or parent not in PRESETS):
            raise ConfigError(f"preset must name one of {', '.join(PRESETS)}, got {parent!r}")
        base = preset(parent, (*_seen, name)) if parent else RunConfig()
        return override(dataclasses.replace(base, preset=name), values)
    except ConfigError as e:  # a broken install or an edited preset file
        raise ConfigError(e.reason if e.reason.startswith("preset ") else f"{where}: {e.reason}") from e


PRESETS = ("smoke", "cpu", "cpu-qwen", "cpu-qwen-tools", "paper-4b", "paper-30b")
_SECTIONS = ("design", "play", "reward", "curriculum", "learner", "eval", "log", "ray")


def _check_type(where: str, name: str, value: Any, kind: Any) -> Any:
    """``value`` as the field type ``kind`` wants it (a TOML array becomes a tuple), or a
    ConfigError naming the setting: a boolean is not a number, a number is not a string.

    >>> _check_type("[play]", "max_turns", 4, int), _check_type("[learner]", "lr", 1, float)
    (4, 1)
    >>> _check_type("run config", "iterations", True, int)
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: run config: iterations must be an integer, got true (a boolean)
    """
    described = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    options = [a for a in typing.get_args(kind) if a is not type(None)] if typing.get_args(kind) and \
        typing.get_origin(kind) in (types.UnionType, typing.Union) else [kind]
    if value is None and len(options) < len(typing.get_args(kind) or (kind,)):
        return value
    for option in options:
        base = typing.get_origin(option) or option
        if base is tuple and isinstance(value, list | tuple):
            return tuple(value)
        if base is bool and isinstance(value, bool):
            return value
        if base in (int, float) and isinstance(value, int | float) and not isinstance(value, bool):
            if base is float or isinstance(value, int):
                return value
        if base not in (bool, int, float) and isinstance(base, type) and isinstance(value, base):
            return value  # a string, or a section already built
    want = " or ".join(described.get(typing.get_origin(o) or o, "a list") for o in options)
    shown = {True: "true", False: "false"}.get(value, repr(value)) if isinstance(value, bool) else repr(value)
    kind_of = " (a boolean)" if isinstance(value, bool) else ""
    raise ConfigError(f"{where}: {name} must be {want}, got {shown}{kind_of}")


def _replace(obj: Any, values: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(type(obj))
    unknown = sorted(set(values) - set(hints))
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(hints))}")
    fixed = {k: _check_type(where, k, v, hints[k]) for k, v in values.items()}
    try:
        return dataclasses.replace(obj, **fixed)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from e


def override(cfg: RunConfig, values: dict[str, Any]) -> RunConfig:
    """``cfg`` with top-level settings and ``[section]`` tables replaced (validated again).

    >>> override(preset("smoke"), {"iterations": 3, "play": {"max_turns": 5}}).play.max_turns
    5
    """
    for k in _SECTIONS:
        if k in values and not isinstance(values[k], dict):
            raise ConfigError(f"{k} must be a table of settings ([{k}] in a TOML file), got {values[k]!r}")
    top = {k: v for k, v in values.items() if k not in _SECTIONS and k != "preset"}
    sections = {k: _replace(getattr(cfg, k), v, f"[{k}]") for k, v in values.items()
                if k in _SECTIONS}
    return _replace(cfg, {**top, **sections}, "run config")


def load_config(path: str | Path | None = None, *, preset_name: str | None = None) -> RunConfig:
    """The run configuration: a preset with a TOML file's settings on top.

    Precedence, one rule: a command-line flag beats the config file, which beats the preset.
    The preset is ``preset_name`` (``--preset``) when given, else the file's ``preset = "..."``,
    else ``cpu``. Errors name the file and the setting.
    """
    import tomllib

    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            reason = "it is not UTF-8 text" if isinstance(e, UnicodeDecodeError) else e
            raise ConfigError(f"cannot read config {path}: {reason}") from e
    named = values.get("preset", "cpu")
    if not isinstance(named, str) or named not in PRESETS:
        raise ConfigError(f"{path}: preset must be one of {', '.join(PRESETS)}, got {named!r}")
    base = preset(preset_name or named)
    try:
        return override(base, values) if values else base
    except ConfigError as e:
        raise ConfigError(f"{path}: {e.reason}" if path is not None else e.reason) from e

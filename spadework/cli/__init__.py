"""The `spadework` command. Each command is a thin call into one library function.

One module per command group (:mod:`~spadework.cli.data`: corpus and models;
:mod:`~spadework.cli.model`: generate and serve; :mod:`~spadework.cli.check`: check and doctor;
:mod:`~spadework.cli.archive`; :mod:`~spadework.cli.run`: run, design and report;
:mod:`~spadework.cli.evals`: eval and runs), each adding its commands to the one
:data:`~spadework.cli._app.app`. Only this package and ``config.py`` read argv or the process
environment. The commands import the library inside their bodies, so that ``spadework --help``
does not load torch, transformers or llama.cpp (it stays under a second).
"""

from __future__ import annotations

import sys

# Each module adds its commands to the app when imported.
from spadework.cli import archive, check, data, evals, interop, model, run  # noqa: F401
from spadework.cli._app import _Preset, app

__all__ = ["_Preset", "app", "main", "ray_flag_args"]


def main() -> None:
    app(args=ray_flag_args(sys.argv[1:]))


def ray_flag_args(args: list[str]) -> list[str]:
    """``--ray`` takes an optional ADDRESS: given alone (last, or before another option) it
    means a local cluster, spelled ``local`` for the parser.

    >>> ray_flag_args(["run", "--ray", "--dry-run"]), ray_flag_args(["run", "--ray", "auto"])
    (['run', '--ray', 'local', '--dry-run'], ['run', '--ray', 'auto'])
    """
    out = list(args)
    for k in range(len(out) - 1, -1, -1):
        if out[k] == "--ray" and (k + 1 == len(out) or out[k + 1].startswith("-")):
            out.insert(k + 1, "local")
    return out

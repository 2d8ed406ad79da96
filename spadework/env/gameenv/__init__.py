"""The games kit: the one parser of the ``\\boxed{...}`` answer format (:mod:`.boxes`) and the
``GameEnv`` base class (:mod:`.base`). Standard library only.

The sandbox loads this package as the top-level package ``gameenv`` (a designed game writes
``from gameenv import GameEnv``), so it imports nothing from spadework and its modules import
each other relatively; :data:`MODULES` is the order they load in. The host imports it as
``spadework.env.gameenv``: :mod:`spadework.env.actions` parses replies with its parser and the
checker's readable stage uses its placeholder rule, so each exists once.
"""

from .base import CONTINUE, INVALID, LOSE, OUTCOMES, WIN, GameEnv
from .boxes import box, boxes, extract_boxed, is_placeholder

#: The package's modules in the order they import each other (the sandbox loads them so).
MODULES = ("boxes", "base")

__all__ = ["CONTINUE", "GameEnv", "INVALID", "LOSE", "OUTCOMES", "WIN", "box", "boxes",
           "extract_boxed", "is_placeholder"]

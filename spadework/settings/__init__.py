"""Every setting of a run, as frozen dataclasses: a leaf package that imports only the standard
library and :mod:`spadework.errors`, so that anything may import it and a config can be built,
validated and printed without loading a stage.

:class:`RunConfig` (:mod:`.run`) holds one section per table of a ``--config`` TOML file:
``[design]`` :class:`DesignConfig`, ``[play]`` :class:`PlayConfig`, ``[reward]``
:class:`RewardConfig`, ``[curriculum]`` :class:`CurriculumConfig`, ``[learner]``
:class:`TrainConfig`, ``[eval]`` :class:`EvalConfig`, ``[log]`` :class:`LogConfig`, ``[ray]``
:class:`RayConfig`; and :class:`CheckConfig`, what the checker checks against (built from
``[play] max_turns``). Each module also holds the names its section is validated against
(backends, reward variants, replay scores, ...), which the stages import from here. The presets
are TOML files read by :mod:`spadework.config`.
"""

from spadework.settings.check import CheckConfig
from spadework.settings.curriculum import CurriculumConfig
from spadework.settings.design import DesignConfig
from spadework.settings.eval import EvalConfig
from spadework.settings.learner import TrainConfig
from spadework.settings.log import LogConfig
from spadework.settings.play import PlayConfig
from spadework.settings.ray import RayConfig
from spadework.settings.reward import RewardConfig
from spadework.settings.run import RunConfig

__all__ = ["CheckConfig", "CurriculumConfig", "DesignConfig", "EvalConfig", "LogConfig",
           "PlayConfig", "RayConfig", "RewardConfig", "RunConfig", "TrainConfig"]

"""Configuration: small, nested, validated once at the edge.

Only this module, ``paths.py`` and the ``spadework.cli`` package read ``os.environ``. Each section's config class
lives with its stage (``DesignConfig`` with the designer, ``PlayConfig`` with the rollout,
``RewardConfig`` with the rewards, ``CurriculumConfig``, ``TrainConfig`` with the learner) and is
a frozen dataclass whose ``__post_init__`` says what to set when a value is wrong; this module
only composes them into :class:`RunConfig`, holds the presets and reads TOML files. Nothing below
the CLI and the loop imports it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spadework.curriculum import CurriculumConfig
from spadework.designer.run import DesignConfig
from spadework.distributed.config import RayConfig
from spadework.env.checker import CheckConfig
from spadework.errors import ConfigError
from spadework.evaluate.inrun import EvalConfig
from spadework.loggers import LogConfig
from spadework.policy.gguf_copy import WEIGHTS
from spadework.policy.load import BACKENDS, split_endpoint
from spadework.reward import RewardConfig
from spadework.rollout import PlayConfig
from spadework.train.batch import ROLES
from spadework.train.grpo import TrainConfig


def is_endpoint(model: str | None) -> bool:
    """Whether a model setting names an OpenAI-compatible endpoint (``http(s)://...``).

    >>> is_endpoint("http://localhost:8000/v1#Qwen/Qwen3-4B"), is_endpoint("smollm2-135m-instruct")
    (True, False)
    """
    return isinstance(model, str) and model.startswith(("http://", "https://"))


@dataclass(frozen=True)
class RunConfig:
    """One self-play run: sections, and the few settings of the run itself.

    ``plays``: plays per arm per environment (both arms, same seeds). ``train``: run the GRPO
    learner (False: play and score with fixed weights). ``checkpoint_every``: keep a checkpoint
    every N iterations (and at the end); the latest one is always kept for resume.
    ``episode_seconds``: the sandbox's per-episode limit on time spent inside environment calls
    (the whole-episode wall budget, policy time included, is ``play.episode_seconds``).
    ``policy_batch``: rows generated together. ``backend``: the sampler, ``llamacpp`` (the fast
    CPU engine; the learner trains a transformers twin and each update is synced into it) or
    ``hf`` (transformers, sampling from the module it trains). ``threads``: the llamacpp
    engine's threads (None: half the cores this process may use, at least 1).
    ``frozen_weights``: the llamacpp weights of a role in ``frozen`` with a model of its own
    (it never trains, so nothing needs its logprobs to match a learner's): ``gguf``, the
    quantised file as pulled, or ``bf16`` / ``f16``, the 16-bit copy the trained roles sample
    from. Measured for the 1.5B designer at batch 2 on two threads: 28.5 tokens/s from the
    Q4_1 file against 20.7 from the BF16 copy, 2.1 GiB resident against 3.8, prefill 118 against
    141 tokens/s (``benchmarks/generation.py``; docs/engine.md).

    Roles. ``model`` plays both roles by default, one shared model trained on both roles'
    samples (the paper's setting). ``designer_model`` / ``agent_model`` give a role its own
    model (a registry name or folder; the designer may also be an OpenAI-compatible endpoint,
    ``http://HOST:PORT/v1#MODEL``, which is never trained here); None or the same name as the
    other role's keeps them shared. ``frozen`` lists roles whose weights never change: with a
    shared model a frozen role samples with the adapter disabled (the base weights) while the
    other role trains; with its own model it gets no learner. ``frozen = ["designer"]`` is the
    reference's fixed-designer baseline. Each trained model has its own learner, checkpoint
    (``checkpoints/``, and ``checkpoints/designer/`` for a separate designer) and weight sync.
    """

    preset: str = "cpu"
    model: str | None = None
    run_seed: int = 0
    iterations: int = 4
    plays: int = 4
    train: bool = True
    checkpoint_every: int = 2
    episode_seconds: float = 60.0
    policy_batch: int = 16
    backend: str = "llamacpp"
    threads: int | None = None
    frozen_weights: str = "gguf"
    designer_model: str | None = None
    agent_model: str | None = None
    frozen: tuple[str, ...] = ()
    design: DesignConfig = field(default_factory=DesignConfig)
    play: PlayConfig = field(default_factory=PlayConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    learner: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    def __post_init__(self) -> None:
        for name in ("iterations", "plays", "checkpoint_every", "policy_batch"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"RunConfig.{name} must be an integer >= 1, got {getattr(self, name)!r}")
        if not self.episode_seconds > 0:
            raise ConfigError("RunConfig.episode_seconds must be > 0")
        if self.backend not in BACKENDS:
            raise ConfigError(f"RunConfig.backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ConfigError(f"RunConfig.threads must be an integer >= 1 or unset, got {self.threads!r}")
        if self.frozen_weights not in WEIGHTS:
            raise ConfigError(f"RunConfig.frozen_weights must be one of {', '.join(WEIGHTS)}, got "
                              f"{self.frozen_weights!r}")
        unknown = [r for r in self.frozen if r not in ROLES]
        if unknown or len(set(self.frozen)) != len(self.frozen):
            raise ConfigError(f"RunConfig.frozen lists roles ({', '.join(ROLES)}), each once; got "
                              f"{list(self.frozen)!r}")
        if self.train and set(self.frozen) == set(ROLES):
            raise ConfigError("RunConfig.frozen freezes both roles, so nothing trains: set "
                              "train = false (--no-train) instead")
        if is_endpoint(self.role_model("designer")):
            split_endpoint(self.role_model("designer"))  # says how to name the served model
        if is_endpoint(self.role_model("designer")) and "designer" in self.trained_roles:
            raise ConfigError(f"the designer's model {self.role_model('designer')} is an OpenAI-compatible "
                              "endpoint, which this run cannot train: add \"designer\" to frozen "
                              "(--freeze designer)")
        if self.train and self.reward.variant != "blend" and "designer" not in self.trained_roles:
            raise ConfigError(f"reward.variant = {self.reward.variant!r} only changes what the designer "
                              "is trained on, and this run freezes the designer, so it would play "
                              "exactly as the blend run and differ only in the designer reward it "
                              "reports: take \"designer\" out of frozen, or leave variant at \"blend\"")
        if is_endpoint(self.role_model("agent")):
            raise ConfigError("only the designer may be an OpenAI-compatible endpoint: the agent's "
                              "turns need token ids and logprobs from a local model")
        frozen_shared = self.train and self.frozen and self.shared
        if frozen_shared and not self.learner.lora:
            raise ConfigError(
                f"frozen = {list(self.frozen)} with one shared model keeps the frozen role on the "
                "base weights by switching the LoRA adapter off while it samples; with [learner] "
                "lora = false every update changes the weights both roles sample from, so the "
                "frozen role would drift with the trained one. Set [learner] lora = true, or give "
                "the frozen role its own model (designer_model / agent_model)")
        if frozen_shared and self.ray.enabled:
            raise ConfigError(
                f"frozen = {list(self.frozen)} with one shared model is not supported with --ray: "
                "the generation servers serve the trained weights to both roles. Run without "
                "--ray, or drop the freeze")

    @property
    def check(self) -> CheckConfig:
        """How this run checks environments: built with the turn limit they are played with
        (``play.max_turns``), so whatever the run plays has passed the checker under its limit."""
        return CheckConfig(max_turns=self.play.max_turns)

    def role_model(self, role: str) -> str | None:
        """The model name ``role`` plays with (None: the registry's default)."""
        own = self.designer_model if role == "designer" else self.agent_model
        return own if own is not None else self.model

    @property
    def shared(self) -> bool:
        """One model plays both roles (the default)."""
        return self.role_model("designer") == self.role_model("agent")

    @property
    def trained_roles(self) -> tuple[str, ...]:
        """The roles whose weights this run updates (none without training)."""
        return tuple(r for r in ROLES if r not in self.frozen) if self.train else ()

    def engine_weights(self, role: str) -> str:
        """The llamacpp weights ``role`` samples from: ``frozen_weights`` for a frozen role with
        a model of its own (nothing matches its logprobs to a learner), else the 16-bit copy."""
        return self.frozen_weights if role in self.frozen and not self.shared else "bf16"

    def roles_trained_on_policy(self, *, shared: bool) -> tuple[str, ...]:
        """The trained roles whose samples train the agent's model: every trained role when
        that model also designs (``shared``), else the agent's only."""
        return tuple(r for r in self.trained_roles if shared or r == "agent")

    @property
    def setting(self) -> str:
        """The setting designed and played ("games" or "tool-use"): the designer's."""
        return self.design.setting


def preset(name: str) -> RunConfig:
    """A named preset: ``smoke``, ``cpu`` (the default), ``cpu-qwen``, ``paper-4b``, ``paper-30b``.
    Each is a TOML file shipped in ``spadework/presets/`` (with why it is shaped so, in its
    comments), read as a ``--config`` file is, over the defaults of :class:`RunConfig`.

    >>> preset("smoke").iterations, preset("paper-4b").play.max_turns
    (2, 25)
    """
    import tomllib
    from importlib import resources

    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    text = resources.files("spadework").joinpath("presets", f"{name}.toml").read_text(encoding="utf-8")
    try:
        return override(dataclasses.replace(RunConfig(), preset=name), tomllib.loads(text))
    except ConfigError as e:  # a broken install or an edited preset file
        raise ConfigError(f"preset {name} (spadework/presets/{name}.toml): {e.reason}") from e


PRESETS = ("smoke", "cpu", "cpu-qwen", "paper-4b", "paper-30b")
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

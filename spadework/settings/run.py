"""The run's own settings (:class:`RunConfig`: the model, the roles, the backend, the sizes of an
iteration) and the sections it holds, with the names they are validated against."""

from __future__ import annotations

from dataclasses import dataclass, field

from spadework.errors import ConfigError
from spadework.settings.check import CheckConfig
from spadework.settings.curriculum import CurriculumConfig
from spadework.settings.design import DesignConfig
from spadework.settings.eval import EvalConfig
from spadework.settings.learner import TrainConfig, is_thread_setting
from spadework.settings.log import LogConfig
from spadework.settings.play import PlayConfig
from spadework.settings.ray import RayConfig
from spadework.settings.reward import RewardConfig

#: The sampling backends a run may name: the built-in ones, and any added to the table of
#: :mod:`spadework.policy.backends` (its ``register`` appends here).
BACKENDS: list[str] = ["hf", "llamacpp"]

#: The backend every command uses unless told otherwise (the CPU presets name ``llamacpp``).
DEFAULT_BACKEND = "hf"


def split_endpoint(spec: str) -> tuple[str, str]:
    """(base URL, model) of ``http(s)://HOST:PORT/v1#MODEL``; ConfigError without a model.

    >>> split_endpoint("http://localhost:8000/v1#Qwen/Qwen3-4B")
    ('http://localhost:8000/v1', 'Qwen/Qwen3-4B')
    """
    url, _, model = spec.partition("#")
    if not model:
        raise ConfigError(f"endpoint {spec!r} names no model: write it as {url}#MODEL, with the "
                          f"name the server serves (GET {url.rstrip('/')}/models lists them)")
    return url, model


WEIGHTS = ("f16", "bf16", "q8_0", "gguf")


ROLES = ("agent", "designer")


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
    ``policy_batch``: rows generated together. ``backend``: the sampler, a name in the table of
    :mod:`spadework.policy.backends`: ``hf`` (transformers, sampling from the module it trains;
    the default) or ``llamacpp`` (the fast CPU engine, which the CPU presets name; the learner
    trains a transformers twin and each update is synced into it). ``threads``: the llamacpp
    engine's threads (None: half the cores this process may use, at least 1; ``"auto"``: at
    the start of each play and design stage, the cores this process may use less those other
    processes keep busy then, :func:`spadework.cores.free_cores`, recorded as ``threads`` in
    the stage's engine figures. The count can change a run's numbers in the last bits, so a
    run under a changing load replays exactly only with a number set).
    ``frozen_weights``: the llamacpp weights of a role in ``frozen`` with a model of its own
    (it never trains, so nothing needs its logprobs to match a learner's): ``gguf``, the
    quantised file as pulled, or ``bf16`` / ``f16``, the 16-bit copy the trained roles sample
    from. Measured for the 1.5B designer at batch 2 on two threads: 28.5 tokens/s from the
    Q4_1 file against 20.7 from the BF16 copy, 2.1 GiB resident against 3.8, prefill 118 against
    141 tokens/s (``benchmarks/generation.py``; docs/engine.md).
    ``flash_attn``: the roles whose llamacpp engine computes attention as flash attention (the
    others multiply keys and queries as matrices); a shared model's one engine follows
    ``"agent"``. Which is faster depends on the model and the work: on two threads the 0.5B's
    BF16 copy played 40 episodes 1.11-1.15x faster without it and decoded four rows at about
    3,000 tokens of context 1.9x faster, while the 1.5B's Q4_1 file decoded as fast either way
    and prefilled four design prompts 1.2x slower without it (``benchmarks/play.py
    --flash-attn on,off``; docs/engine.md, "Attention without flash attention").

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
    backend: str = DEFAULT_BACKEND
    threads: int | str | None = None
    frozen_weights: str = "gguf"
    flash_attn: tuple[str, ...] = ROLES
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
        if not is_thread_setting(self.threads):
            raise ConfigError(f'RunConfig.threads must be an integer >= 1, "auto" or unset, got '
                              f"{self.threads!r}")
        if self.frozen_weights not in WEIGHTS:
            raise ConfigError(f"RunConfig.frozen_weights must be one of {', '.join(WEIGHTS)}, got "
                              f"{self.frozen_weights!r}")
        if isinstance(self.flash_attn, str) or any(r not in ROLES for r in self.flash_attn):
            raise ConfigError(f"RunConfig.flash_attn lists roles ({', '.join(ROLES)}) whose engine "
                              f"uses flash attention, e.g. [\"designer\"]; got {self.flash_attn!r}")
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

    @property
    def engine_threads(self) -> int | None:
        """The threads an engine is built with: ``threads``, or None (its own default) when
        unset or ``"auto"`` (the run sets them per stage then)."""
        return None if self.threads == "auto" else self.threads

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

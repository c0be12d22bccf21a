"""Typed, validated configuration of the LLM trainer (`jaxvaco.llm.run`), beside the RL
trainer's `TrainConfig` (re-exported as `jaxvaco.core.config.LLMConfig` and `jaxvaco.LLMConfig`).

Choices are `Literal`s; `LLMConfig.__post_init__` refuses a bad value with a `ConfigError`
that names the option and says what to change. The defaults are the setting of the lag
comparison in docs/results/llm.md (`experiments/llm_lag.py`): the 1800-step warm start,
lr 1e-4, 16 prompts × 16 completions, E = 2 epochs of one minibatch, 100 generation steps,
K ∈ {0, 2, 4, 8} × 4 seeds, evaluated every 20 steps.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Literal

from jaxvaco.core.errors import ConfigError

Anchor = Literal["behaviour", "learner"]


@dataclasses.dataclass(frozen=True)
class GRPOConfig:
    """GRPO's clipped token surrogate (`jaxvaco.llm.losses.grpo_policy_loss`)."""

    clip_eps: float = 0.2
    """ε of the clip of r = π_θ/anchor."""
    anchor: Anchor = "behaviour"
    """behaviour: r = π_θ/β (GRPO); learner: r = π_θ/π_T with each token's Â weighted once
    by min(ρ̄, π_T/β) (decoupled clip, Hilton et al. 2021)."""


@dataclasses.dataclass(frozen=True)
class TokenVacoConfig:
    """Token-level VACO (`jaxvaco.llm.losses.vaco_policy_loss`)."""

    delta: float = 0.2
    """δ: the TV threshold on the token mean ½|r − 1|."""
    filter: Literal["batch", "sample", "none"] = "batch"
    """batch: drop the tokens pushing TV further when the minibatch's TV ≥ δ; sample: when
    the token's own ½|r − 1| ≥ δ; none: keep every token."""
    anchor: Anchor = "learner"
    """learner: r = π_θ/π_T; behaviour: r = π_θ/β."""
    weight: Literal["none", "truncated"] = "none"
    """With anchor learner: none (r = π_θ/π_T alone) or truncated (Â weighted once by
    min(ρ̄, π_T/β), as GRPO's anchor learner)."""


@dataclasses.dataclass(frozen=True)
class LLMLagConfig:
    """Generation lag (the lag model of docs/concepts/spec.md §1.1 with one actor group):
    completions of step T are sampled with θ_{T−k}, k = min(K, T)."""

    delays: tuple[int, ...] = (0, 2, 4, 8)
    """The K of the runs: each K is run with every seed, all in one program."""
    max_delay: int = 8
    """K_max: the ring buffer holds K_max + 1 parameter snapshots; ≥ every delay."""
    mode: Literal["fixed", "uniform", "spread"] = "fixed"
    """fixed: k = K; uniform: k ~ U{0..K} per step; spread: as fixed (one group)."""


@dataclasses.dataclass(frozen=True)
class WarmStartConfig:
    """The supervised warm start on worked solutions (`jaxvaco.llm.train.warm_start`)."""

    steps: int = 1800
    batch_size: int = 64
    learning_rate: float = 1e-3
    pool_size: int = 20000
    """Training problems (disjoint from the held-out sets): SFT data and RL prompts."""


@dataclasses.dataclass(frozen=True)
class LLMEvalConfig:
    """Held-out evaluation (`jaxvaco.llm.evaluation`), after every chunk of `every` steps."""

    every: int = 20
    """Generation steps per chunk; an evaluation follows each chunk."""
    samples: int = 4
    """Completions per held-out problem for the sampled accuracy."""
    test_size: int = 128
    """Held-out problems per difficulty level."""


@dataclasses.dataclass(frozen=True)
class LLMModelConfig:
    """The transformer's size (`jaxvaco.llm.model.ModelConfig`)."""

    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4


POSITIVE = ("num_seeds", "num_steps", "num_prompts", "group_size", "epochs", "minibatches",
            "warm_start.steps", "warm_start.batch_size", "warm_start.pool_size",
            "eval.every", "eval.samples", "eval.test_size", "model.d_model",
            "model.num_layers", "model.num_heads")
"""Options that must be ≥ 1."""


@dataclasses.dataclass(frozen=True)
class LLMConfig:
    """GRPO or token-level VACO on the arithmetic task, under generation lag."""

    algo: Literal["grpo", "vaco"] = "grpo"
    seed: int = 0
    """Run (K, s) trains with the key fold_in(key(seed + K), s)."""
    num_seeds: int = 4
    num_steps: int = 100
    """RL generation steps per run."""
    num_prompts: int = 16
    """P prompts per generation step."""
    group_size: int = 16
    """G completions per prompt."""
    epochs: int = 2
    """E passes over each generation batch."""
    minibatches: int = 1
    """M minibatches (of whole groups) per epoch; must divide num_prompts."""
    learning_rate: float = 1e-4
    max_grad_norm: float = 1.0
    warmup_updates: int = 0
    """Linear learning-rate warm-up over this many optimizer updates (0 = none)."""
    temperature: float = 1.0
    """τ of sampling and of every loss's log-probabilities."""
    kl_coef: float = 0.0
    """c_kl of the k3 KL to the warm-start policy (0 = off)."""
    rho_bar: float = 1.0
    """ρ̄: truncation of the anchor-π_T importance weight."""
    adv_scale: Literal["std", "none"] = "std"
    """std: Â = (R − mean_g R)/std_g R (GRPO); none: R − mean_g R (Dr. GRPO)."""
    loss_agg: Literal["token", "sequence", "constant"] = "token"
    """How the per-token surrogate is reduced (`jaxvaco.llm.losses.aggregate`)."""
    run_name: str = ""
    """Folder name under results_dir; empty = llm__<algo>__<timestamp>."""
    results_dir: str = "results"
    progress: bool = True
    grpo: GRPOConfig = GRPOConfig()
    vaco: TokenVacoConfig = TokenVacoConfig()
    lag: LLMLagConfig = LLMLagConfig()
    warm_start: WarmStartConfig = WarmStartConfig()
    eval: LLMEvalConfig = LLMEvalConfig()
    model: LLMModelConfig = LLMModelConfig()

    def __post_init__(self):
        check(self)

    @property
    def num_runs(self) -> int:
        return len(self.lag.delays) * self.num_seeds

    @property
    def completions(self) -> int:
        """Completions per generation step (P·G)."""
        return self.num_prompts * self.group_size


def option(config: LLMConfig, path: str):
    for name in path.split("."):
        config = getattr(config, name)
    return config


def check(config: LLMConfig) -> None:
    """ConfigError, naming the option and what to change, for a value no run can use.
    Literal choices are checked by `check_choices`."""
    check_choices(config)
    for path in POSITIVE:
        if option(config, path) < 1:
            raise ConfigError(f"LLMConfig.{path} must be >= 1, got {option(config, path)}.")
    for path in ("learning_rate", "rho_bar", "temperature", "grpo.clip_eps", "vaco.delta",
                 "warm_start.learning_rate"):
        if not option(config, path) > 0:
            raise ConfigError(f"LLMConfig.{path} must be > 0, got {option(config, path)}.")
    if config.num_prompts % config.minibatches:
        raise ConfigError(f"LLMConfig.minibatches ({config.minibatches}) must divide "
                          f"num_prompts ({config.num_prompts}): minibatches are whole groups.")
    lag = config.lag
    if not lag.delays or min(lag.delays) < 0 or max(lag.delays) > lag.max_delay:
        raise ConfigError(f"LLMConfig.lag.delays {list(lag.delays)} must be K's in "
                          f"0..lag.max_delay ({lag.max_delay}): raise lag.max_delay or drop "
                          "the larger K.")
    if len(set(lag.delays)) != len(lag.delays):
        raise ConfigError(f"LLMConfig.lag.delays {list(lag.delays)} repeats a K: give each once.")
    if config.num_steps % config.eval.every:
        raise ConfigError(f"LLMConfig.eval.every ({config.eval.every}) must divide num_steps "
                          f"({config.num_steps}): each chunk of eval.every steps ends with an "
                          "evaluation.")
    if config.model.d_model % config.model.num_heads:
        raise ConfigError(f"LLMConfig.model.num_heads ({config.model.num_heads}) must divide "
                          f"model.d_model ({config.model.d_model}).")


def check_choices(config: LLMConfig) -> None:
    """A misspelt choice fails here, naming the option, instead of silently selecting
    another branch of the loss."""
    groups = [("", config)] + [(f.name + ".", getattr(config, f.name))
                               for f in dataclasses.fields(config)
                               if dataclasses.is_dataclass(getattr(config, f.name))]
    for prefix, group in groups:
        for name, kind in typing.get_type_hints(type(group)).items():
            allowed = typing.get_args(kind) if typing.get_origin(kind) is Literal else None
            if allowed and getattr(group, name) not in allowed:
                raise ConfigError(f"LLMConfig.{prefix}{name} must be one of {list(allowed)}, "
                                  f"got {getattr(group, name)!r}.")


FRACTIONS = {"grpo": "grpo/clipped_fraction", "vaco": "vaco/filtered_fraction"}
"""Per objective, the metric of the valid tokens it acts on: GRPO's clip removes their
gradient, VACO's filter drops them."""

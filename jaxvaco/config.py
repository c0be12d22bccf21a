"""Typed, validated configuration for every jaxvaco run.

The dataclasses here are the single source of truth for the CLI (tyro turns each field
into a flag: `--num-envs`, `--lag.max-delay`, `--vaco.delta`, ...) and for the Python
API. `validate(config)` runs before anything is compiled and raises `ConfigError` with
a message that says what to change.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from pathlib import PurePath
from typing import Any, Literal

ALGOS = ("ppo", "ppo_kl", "spo", "impala", "vaco")

Critic = Literal["behaviour", "learner"]
Estimator = Literal["gae", "vtrace"]
AdvantageForm = Literal["weighted", "normalize_then_weight"]
Anchor = Literal["behaviour", "learner"]


class ConfigError(ValueError):
    """An impossible or inconsistent setting, caught before compiling."""


class RunFileError(ConfigError):
    """A run's or a sweep's file (config.json, metrics.jsonl, a sweep TOML) that cannot be
    read as jaxvaco wrote it; the message names the file, the line or the key."""


@dataclasses.dataclass(frozen=True)
class LagConfig:
    """Simulated policy lag (spec §1.1, [ours]).

    The N envs are split into `num_groups` actor groups; in iteration T group g acts with
    the learner's parameters from k_g(T) iterations ago, clamped at θ_0.
    """

    max_delay: int = 0
    """K, the lag in learner iterations, of a run (0 = synchronous on-policy training), and
    the ring buffer's capacity: the largest K (`lag_delay` in grids) a run's grid may ask
    for."""
    mode: Literal["fixed", "uniform", "spread"] = "fixed"
    """fixed: k_g = K; uniform: k_g(T) ~ U{0..K} per group and iteration;
    spread: group g always lags round(g·K/(G−1))."""
    num_groups: int = 1
    """G: actor groups; must divide --num-envs."""


@dataclasses.dataclass(frozen=True)
class EstimateConfig:
    """The per-iteration estimate of an algorithm (spec §2): which critic and which estimator
    give the advantages Â and value targets, frozen for the iteration's E × M updates.

    The importance correction from β to the learner enters once (`jaxvaco.algos.common`):
    with anchor β the objective's ratio π_θ/β carries it, so Â holds no ρ; with anchor π_T,
    ρ_t = min(ρ̄, π_T/β) multiplies Â once (inside V-trace, or after normalisation).
    """

    critic: Critic = "behaviour"
    """behaviour: the values V_β(s) recorded at collection time; learner: V_T(s), V_T(s')
    recomputed with the learner's critic once per iteration (what a practitioner runs)."""
    advantages: Estimator = "gae"
    """gae: GAE(γ, λ); vtrace: V-trace(γ, λ, ρ̄, c̄) with ratios π_T/β (value targets with
    truncated traces; Â_t = q_t − V(s_t), times ρ_t only with anchor π_T)."""
    rho_bar: float = 1.0
    """ρ̄: truncation of V-trace's ρ and of the anchor-π_T importance weight."""
    c_bar: float = 1.0
    """c̄: truncation of V-trace's trace coefficient c."""
    advantage_form: AdvantageForm = "weighted"
    """With anchor π_T and V-trace: weighted = ρ_t inside Â_t, then per-minibatch
    normalisation; normalize_then_weight = normalise the unweighted Â, then multiply by ρ_t.
    With anchor π_T and GAE the weight always comes after normalisation."""


@dataclasses.dataclass(frozen=True)
class PPOConfig(EstimateConfig):
    """Options of `ppo` (spec §3): the clipped surrogate on the chosen anchor."""

    anchor: Anchor = "behaviour"
    """behaviour: r = π_θ/β (logged log-probs); learner: r = π_θ/π_T, the sample weighted once
    by min(rho_bar, π_T/β) (decoupled PPO, Hilton et al. 2021)."""


@dataclasses.dataclass(frozen=True)
class PPOKLConfig(EstimateConfig):
    """Options of `ppo_kl`: −E[r Â] + c_kl·KL(β‖π_θ) (Schulman et al. 2017)."""

    kl_coef: float = 1.0
    """Initial (or fixed) KL penalty coefficient c_kl."""
    target_kl: float = 0.01
    """d: adaptive mode halves c_kl when KL < d/1.5 and doubles it when KL > 1.5·d."""
    adaptive: bool = True
    """False keeps c_kl fixed."""


@dataclasses.dataclass(frozen=True)
class SPOConfig(EstimateConfig):
    """Options of `spo` (Xie et al. 2024); its ε is --clip-coef."""


@dataclasses.dataclass(frozen=True)
class VtraceConfig:
    """V-trace truncation levels for `impala` (spec §2), recomputed at every minibatch."""

    rho_bar: float = 1.0
    """ρ̄: truncation of the importance weight in δ_t and the advantage."""
    c_bar: float = 1.0
    """c̄: truncation of the trace coefficient c_t = λ·min(c̄, π/β)."""


@dataclasses.dataclass(frozen=True)
class VacoConfig(EstimateConfig):
    """Options of `vaco` (spec §3.1). Which parts are [paper] and which [ours] is stated
    in `jaxvaco.algos.vaco`. The defaults were chosen by the stated experiment of spec §3.2
    (`experiments/vaco_design.py`, README "VACO: ... choosing the defaults"): anchor β,
    the learner's critic with GAE ("value-only alignment"), batch filter at the paper's
    δ = 0.2 [ours]; spec §3.1's original recipe is `--vaco.anchor learner --vaco.critic
    learner --vaco.advantages vtrace --vaco.advantage-form weighted`."""

    critic: Critic = "learner"
    """Alignment of the critic: learner [paper, ours default] recomputes V_T once per
    iteration; behaviour keeps the recorded values (filter only)."""
    advantage_form: AdvantageForm = "normalize_then_weight"
    """With anchor π_T and V-trace: weighted = ρ_t inside Â_t (spec §3.1);
    normalize_then_weight [ours] = normalise the unweighted Â, then multiply by ρ_t."""
    delta: float = 0.2
    """δ: TV threshold of the filter [paper: 0.2]."""
    filter: Literal["batch", "sample", "none"] = "batch"
    """batch: filter when the minibatch TV estimate D ≥ δ; sample: when ½|r_i − 1| ≥ δ;
    none: keep every sample (a plain importance-weighted policy gradient)."""
    anchor: Anchor = "behaviour"
    """Denominator of r: β (behaviour, default: the constraint covers backward and forward
    lag) or π_T (learner: forward lag only, spec §3.1)."""


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation, logged apart from training returns."""

    every_chunks: int = 5
    """Evaluate every this many chunks (and at the end); 0 = only at the end."""
    num_episodes: int = 16
    """Episodes per evaluation, run in parallel, each mode (greedy and stochastic)."""


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
    """Training over several devices (`jaxvaco.distributed`).

    axis "envs": data-parallel learning; each device holds N/D envs, acts with its own copy of
    the parameters refreshed every `sync_interval` iterations, and the gradients of every SGD
    step are averaged over the devices. axis "seeds": the independent runs (seeds × grid) are
    split over the devices instead, with no communication.
    """

    num_devices: int = 1
    """D: devices in the mesh (1 = the ordinary single-device program)."""
    axis: Literal["envs", "seeds"] = "envs"
    """What the devices split: the envs of each run, or the runs."""
    sync_interval: int = 1
    """S: the actors on a device refresh their parameters from the learner every S iterations
    (1 = every iteration, no lag). Only with axis envs."""
    stagger: bool = False
    """Device d refreshes at iterations T with (T + d) mod S == 0 (asynchronous workers);
    otherwise all devices refresh together at T mod S == 0."""
    shuffle: Literal["global", "local"] = "global"
    """Minibatches with axis envs. "global": every device gathers the whole batch, the
    minibatches are the single-device run's (one shuffle of all N envs) and device d trains
    on the d-th slice of each; advantage normalisation and VACO's batch filter use
    minibatch-wide statistics, so S = 1 equals the single-device run up to reduction order.
    "local": each device shuffles only its own envs and normalises per device (no batch
    communication; the usual data-parallel PPO)."""
    multihost: bool = False
    """Call `jax.distributed.initialize` before building the mesh (one process per host)."""
    coordinator_address: str = ""
    """host:port of process 0; empty = read by JAX from the environment (SLURM, ...)."""
    num_processes: int = 0
    """Processes in the job; 0 = from the environment."""
    process_id: int = -1
    """This process's index; -1 = from the environment."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """One training run (or S seeds of it in one program)."""

    env: str = "CartPole-v1"
    """A gymnax id (CartPole-v1, Acrobot-v1, Breakout-MinAtar, ...) or a Brax name
    (inverted_pendulum, ant, ...)."""
    algo: str = "ppo"
    """One of ppo, ppo_kl, spo, impala, vaco."""
    seed: int = 0
    """Seed of the first run; run i uses seed + i."""
    num_seeds: int = 1
    """S: independent runs vmapped in one program."""
    num_envs: int = 16
    """N: parallel environments per seed."""
    num_steps: int = 128
    """L: rollout length per iteration."""
    total_timesteps: int = 1_000_000
    """Env steps per seed; iterations = total // (N·L)."""
    update_epochs: int = 4
    """E: passes over each batch."""
    num_minibatches: int = 4
    """M: minibatches per epoch; each holds whole trajectories (N/M envs × L steps)."""
    learning_rate: float = 2e-3
    """Adam step size. The default was chosen for PPO on CartPole-v1 by
    `experiments/default_sweep.py`: with the other defaults it solved (greedy return >= 475
    at 1M steps) 16 of 16 seeds and 32 of 32 fresh ones, against 16 / 16 and 27 / 32 for the
    previous 1e-3 (README "Learning"). The lag sweep and the VACO design ran at 1e-3 and
    2.5e-4 and pin them."""
    anneal_lr: bool = True
    """Linearly anneal the learning rate to 0 over training."""
    gamma: float = 0.99
    """Discount factor γ."""
    gae_lambda: float = 0.95
    """λ of GAE and of V-trace's traces."""
    clip_coef: float = 0.2
    """ε of PPO's clip and of SPO's penalty."""
    ent_coef: float = 0.01
    """c_e: weight of the entropy bonus."""
    vf_coef: float = 0.5
    """c_v: weight of the value loss ½·(V(s) − v)²."""
    max_grad_norm: float = 0.5
    """Global-norm gradient clipping (actor and critic together)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this for learning (not for the reported returns). Brax
    returns are large: with global-norm clipping over actor and critic together, big value
    errors would otherwise starve the policy gradient."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the actor and of the critic MLP."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation of the hidden layers."""
    normalize_obs: bool = False
    """Running observation normalisation (statistics updated once per iteration)."""
    brax_backend: str = "spring"
    """Physics backend for Brax environments: spring (fastest on CPU), mjx, generalized,
    positional."""
    chunk_iterations: int = 0
    """Iterations per compiled chunk; 0 picks about 20 chunks per run."""
    run_name: str = ""
    """Folder name under --results-dir; empty = <env>__<algo>__<timestamp>."""
    results_dir: str = "results"
    """Where run folders are written."""
    progress: bool = True
    """Show a progress bar."""
    lag: LagConfig = LagConfig()
    ppo: PPOConfig = PPOConfig()
    ppo_kl: PPOKLConfig = PPOKLConfig()
    spo: SPOConfig = SPOConfig()
    impala: VtraceConfig = VtraceConfig()
    vaco: VacoConfig = VacoConfig()
    eval: EvalConfig = EvalConfig()
    distributed: DistributedConfig = DistributedConfig()

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size

    @property
    def updates_per_iteration(self) -> int:
        return self.update_epochs * self.num_minibatches


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _flag(name: str) -> str:
    """The command-line flag of a (dotted) field name: lag.max_delay -> --lag.max-delay."""
    return "--" + name.replace("_", "-")


def _float_fields(config: Any, prefix: str = "") -> dict[str, float]:
    """Every float-typed field of a (nested) config dataclass, by dotted name."""
    hints = typing.get_type_hints(type(config))
    out = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            out.update(_float_fields(value, f"{prefix}{field.name}."))
        elif hints[field.name] is float:
            out[prefix + field.name] = value
    return out


def _validate_finite(config: TrainConfig) -> None:
    for name, value in _float_fields(config).items():
        _require(math.isfinite(value), f"{_flag(name)} must be a finite number, got {value}.")


def _validate_coefficients(config: TrainConfig) -> None:
    _require(config.reward_scale > 0,
             f"--reward-scale must be > 0, got {config.reward_scale}: 0 removes the reward "
             "and a negative scale turns it into a cost.")
    for name in ("vf_coef", "ent_coef"):
        value = getattr(config, name)
        _require(value >= 0, f"{_flag(name)} must be >= 0, got {value}.")
    _require(config.eval.num_episodes >= 1,
             f"--eval.num-episodes must be >= 1, got {config.eval.num_episodes}.")
    _require(config.eval.every_chunks >= 0,
             f"--eval.every-chunks must be >= 0 (0 = only at the end), got "
             f"{config.eval.every_chunks}.")


def plain_folder_name(name: str) -> bool:
    """True for one folder name: no separators, not absolute, not "." or ".."."""
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name \
        and PurePath(name).name == name


def _validate_paths(config: TrainConfig) -> None:
    _require(not config.run_name or plain_folder_name(config.run_name),
             f"--run-name must be a single folder name (it is created under --results-dir), "
             f"got {config.run_name!r}; choose the location with --results-dir.")


def _validate_positive(config: TrainConfig) -> None:
    for name in ("num_seeds", "num_envs", "num_steps", "total_timesteps", "update_epochs",
                 "num_minibatches"):
        value = getattr(config, name)
        _require(value > 0, f"--{name.replace('_', '-')} must be positive, got {value}.")
    for name in ("learning_rate", "max_grad_norm", "clip_coef"):
        value = getattr(config, name)
        _require(value > 0, f"--{name.replace('_', '-')} must be > 0, got {value}.")
    _require(0 < config.gamma <= 1, f"--gamma must be in (0, 1], got {config.gamma}.")
    _require(0 <= config.gae_lambda <= 1,
             f"--gae-lambda must be in [0, 1], got {config.gae_lambda}.")
    _require(all(h > 0 for h in config.hidden_sizes) and len(config.hidden_sizes) > 0,
             f"--hidden-sizes must be positive widths, got {config.hidden_sizes}.")


def _validate_shapes(config: TrainConfig) -> None:
    _require(config.num_envs % config.num_minibatches == 0,
             f"--num-minibatches {config.num_minibatches} must divide --num-envs "
             f"{config.num_envs}: minibatches hold whole trajectories. Try --num-minibatches "
             f"{_nearest_divisor(config.num_envs, config.num_minibatches)}.")
    _require(config.num_iterations >= 1,
             f"--total-timesteps {config.total_timesteps} is less than one batch "
             f"(--num-envs × --num-steps = {config.batch_size}); raise it.")
    _require(config.chunk_iterations >= 0, "--chunk-iterations must be >= 0 (0 = automatic).")


def _validate_lag(config: TrainConfig) -> None:
    lag = config.lag
    _require(lag.max_delay >= 0, f"--lag.max-delay must be >= 0, got {lag.max_delay}.")
    _require(lag.num_groups >= 1, f"--lag.num-groups must be >= 1, got {lag.num_groups}.")
    _require(config.num_envs % lag.num_groups == 0,
             f"--lag.num-groups {lag.num_groups} must divide --num-envs {config.num_envs}.")
    _require(lag.mode != "spread" or lag.num_groups >= 2 or lag.max_delay == 0,
             "--lag.mode spread needs --lag.num-groups >= 2 (group g lags g·K/(G−1)).")


def _validate_algo(config: TrainConfig) -> None:
    if config.algo not in ALGOS:
        close = difflib.get_close_matches(config.algo, ALGOS, n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"Unknown --algo {config.algo!r}.{hint} Choose one of {', '.join(ALGOS)}.")
    _require(config.vaco.delta > 0, f"--vaco.delta must be > 0, got {config.vaco.delta}.")
    _require(config.vaco.delta <= 1,
             f"--vaco.delta must be at most 1, got {config.vaco.delta}: a TV estimate never "
             "exceeds 1, so the filter could never fire (use --vaco.filter none for no filter).")
    for group in ALGOS:
        sub, flag = getattr(config, group), group.replace("_", "-")
        _require(sub.rho_bar > 0 and sub.c_bar > 0,
                 f"--{flag}.rho-bar and --{flag}.c-bar must be > 0.")
    _require(config.ppo_kl.kl_coef >= 0 and config.ppo_kl.target_kl > 0,
             "--ppo-kl.kl-coef must be >= 0 and --ppo-kl.target-kl > 0.")


def _validate_distributed(config: TrainConfig) -> None:
    dist = config.distributed
    devices = dist.num_devices
    _require(devices >= 1, f"--distributed.num-devices must be >= 1, got {devices}.")
    _require(dist.sync_interval >= 1,
             f"--distributed.sync-interval must be >= 1, got {dist.sync_interval}.")
    if devices == 1:
        return
    if dist.axis == "seeds":
        _require(config.num_seeds % devices == 0,
                 f"--num-seeds {config.num_seeds} must be a multiple of "
                 f"--distributed.num-devices {devices} with --distributed.axis seeds.")
        _require(dist.sync_interval == 1,
                 "--distributed.sync-interval needs --distributed.axis envs (with axis seeds "
                 "every run is on one device and has no actor copies to sync).")
        return
    _require(config.num_envs % devices == 0,
             f"--num-envs {config.num_envs} must be divisible by --distributed.num-devices "
             f"{devices}: each device holds num_envs/devices envs.")
    local = config.num_envs // devices
    _require(local % config.num_minibatches == 0,
             f"--num-minibatches {config.num_minibatches} must divide the envs per device "
             f"({config.num_envs}/{devices} = {local}): every minibatch holds the same number "
             f"of envs from each device. Try --num-minibatches "
             f"{_nearest_divisor(local, config.num_minibatches)}.")
    _require(config.lag.max_delay == 0,
             "--lag.max-delay and --distributed.num-devices > 1 with --distributed.axis envs "
             "are exclusive: use --distributed.sync-interval for lag across devices, or run the "
             "lag ring buffer on one device (--distributed.num-devices 1).")


def _validate_env(config: TrainConfig) -> None:
    from jaxvaco.envs import UnknownEnvError, env_spec
    from jaxvaco.envs.brax_env import BRAX_BACKENDS

    if config.brax_backend not in BRAX_BACKENDS:
        close = difflib.get_close_matches(config.brax_backend, BRAX_BACKENDS, n=2, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"Unknown --brax-backend {config.brax_backend!r}.{hint} Choose one of "
                          f"{', '.join(BRAX_BACKENDS)}.")
    try:
        env_spec(config.env, brax_backend=config.brax_backend)
    except UnknownEnvError as error:
        raise ConfigError(str(error)) from None


def _nearest_divisor(n: int, target: int) -> int:
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return min(divisors, key=lambda d: abs(d - target))


def validate(config: TrainConfig) -> TrainConfig:
    """Check every setting; raise ConfigError naming the option to change. Returns config."""
    _validate_finite(config)
    _validate_positive(config)
    _validate_coefficients(config)
    _validate_paths(config)
    _validate_shapes(config)
    _validate_lag(config)
    _validate_algo(config)
    _validate_distributed(config)
    _validate_env(config)
    return config


def unused_algo_options(config: TrainConfig) -> list[str]:
    """Options of another algorithm's group (--<algo>.*) set away from their defaults."""
    out = []
    for group in ALGOS:
        if group == config.algo or not hasattr(config, group):
            continue
        options, defaults = getattr(config, group), type(getattr(config, group))()
        out += [f"{_flag(f'{group}.{f.name}')} has no effect with --algo {config.algo}."
                for f in dataclasses.fields(options)
                if getattr(options, f.name) != getattr(defaults, f.name)]
    return out


def lag_reaches_end(delay: int, num_iterations: int) -> bool:
    """True when actors lagging `delay` act with θ_0 in every iteration (delays clamp at 0)."""
    return delay > 0 and delay >= num_iterations - 1


def lag_beyond_run(config: TrainConfig) -> list[str]:
    """A lag so long that lagged actors never act with a trained policy."""
    k, n = config.lag.max_delay, config.num_iterations
    if not lag_reaches_end(k, n):
        return []
    return [f"--lag.max-delay {k} is not below the run's {n} iterations: delays are clamped at "
            "θ_0, so actors lagging that much act with the initial policy throughout. Lower "
            "--lag.max-delay or raise --total-timesteps."]


def ineffective_options(config: TrainConfig) -> list[str]:
    """Settings that are valid but change nothing (or nothing useful), one message each.

    For one training run; a sweep's base table legitimately holds options of every algorithm
    and environment it covers, so a sweep checks only `lag_beyond_run`.
    """
    from jaxvaco.envs import env_spec

    out = unused_algo_options(config)
    default = TrainConfig()
    if config.brax_backend != default.brax_backend and env_spec(config.env).family != "brax":
        out.append(f"--brax-backend has no effect with the gymnax environment {config.env}.")
    if config.lag.max_delay == 0:
        out += [f"--lag.{name.replace('_', '-')} has no effect with --lag.max-delay 0."
                for name in ("mode", "num_groups")
                if getattr(config.lag, name) != getattr(default.lag, name)]
    return out + lag_beyond_run(config)


def to_dict(config: TrainConfig) -> dict:
    """JSON-ready nested dict of the config."""
    return dataclasses.asdict(config)


RUN_RECORD_KEYS = ("control", "resume_changes")
"""Keys of a run's config.json besides the TrainConfig: the host-loop options
(`jaxvaco.run_dir.RunControl`) and the changes accepted by --resume-with-changes."""


def from_dict(data: dict, source: str = "config") -> TrainConfig:
    """Inverse of to_dict (used by resume and by experiment scripts).

    Missing keys take their defaults; an unknown key or a value of the wrong type raises
    ConfigError naming `source` (e.g. the file) and the key.
    """
    fields = {k: v for k, v in data.items() if k not in RUN_RECORD_KEYS}
    return from_table(TrainConfig, fields, source)


def from_table(cls: type, data: Any, source: str, prefix: str = "") -> Any:
    """Dataclass `cls` from a JSON/TOML table, every value checked against its field type."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {prefix.rstrip('.') or 'the file'} must be a table "
                          f"(key = value pairs), got {data!r}.")
    hints = typing.get_type_hints(cls)
    unknown = [key for key in data if key not in hints]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(hints), n=1, cutoff=0.6)
        hint = f"; did you mean {prefix}{close[0]}?" if close else f"; known: {', '.join(hints)}."
        raise ConfigError(f"{source}: unknown option {prefix}{unknown[0]}{hint}")
    return cls(**{key: _typed(value, hints[key], source, prefix + key)
                  for key, value in data.items()})


def _typed(value: Any, kind: Any, source: str, name: str) -> Any:
    """`value` as field type `kind` (tuples from lists); ConfigError when it is not one."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if dataclasses.is_dataclass(kind):
        return from_table(kind, value, source, f"{name}.")
    if origin is Literal:
        if value == "behavior" and "behaviour" in args:
            value = "behaviour"  # legacy spelling of config.json / sweep TOMLs written before
        if value in args:
            return value
        return _wrong_type(source, name, value, f"one of {', '.join(map(repr, args))}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return _wrong_type(source, name, value, "a list")
        return tuple(_typed(v, args[0], source, f"{name}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            return _wrong_type(source, name, value, "a table")
        return {k: _typed(v, args[1], source, f"{name}.{k}") for k, v in value.items()}
    accepted = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}[kind]
    if isinstance(value, accepted) and (kind is bool or not isinstance(value, bool)):
        return value
    what = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[kind]
    return _wrong_type(source, name, value, what)


def _wrong_type(source: str, name: str, value: Any, expected: str) -> Any:
    raise ConfigError(f"{source}: {name} must be {expected}, got {value!r}.")

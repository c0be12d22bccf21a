"""Validation of a `TrainConfig`: the checks that run before anything is compiled.

`validate(config)` raises `ConfigError` with a message that names the flag and says what to
change; `ineffective_options` and `lag_beyond_run` list the one-line warnings for options
that are valid but do nothing in this run.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from pathlib import PurePath
from typing import Any

from jaxvaco.core.algos.registry import algorithms, spec_of
from jaxvaco.core.config import ConfigError, TrainConfig, with_tuned_defaults


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
        elif hints[field.name] in (float, float | None) and value is not None:
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


SEED_LIMIT = 2**32
"""JAX's `PRNGKey` keeps 32 bits of a seed (without x64): seeds must lie in [0, 2^32)."""
ITERATION_LIMIT = 2**31 - 1
"""Iteration counters are int32 inside the compiled loop."""


def _validate_ranges(config: TrainConfig) -> None:
    last = config.seed + config.num_seeds - 1
    _require(0 <= config.seed and last < SEED_LIMIT,
             f"--seed {config.seed} with --num-seeds {config.num_seeds} uses seeds up to {last}; "
             f"seeds must lie in [0, 2^32) (JAX keeps 32 bits of a seed, so larger or negative "
             "ones would repeat others).")
    _require(config.num_iterations <= ITERATION_LIMIT,
             f"--total-timesteps {config.total_timesteps} is {config.num_iterations:,} "
             f"iterations of {config.batch_size} env steps, more than the {ITERATION_LIMIT:,} "
             "an int32 counter holds; lower it.")


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
    _require(lag.mode != "replay" or bool(lag.replay),
             "--lag.mode replay needs --lag.replay RUN_DIR (an asynchronous run's folder).")
    _require(lag.mode != "replay" or lag.num_groups == 1,
             "--lag.mode replay replays one schedule: use --lag.num-groups 1.")


def _validate_async(config: TrainConfig) -> None:
    options = config.asynchronous
    if not options.enabled:
        return
    _require(options.actor_devices >= 1 and options.queue_size >= 1 and options.max_lag >= 0,
             "--asynchronous.actor-devices and --asynchronous.queue-size must be >= 1 and "
             "--asynchronous.max-lag >= 0.")
    learners = options.learner_devices
    _require(learners >= 1, f"--asynchronous.learner-devices must be >= 1, got {learners}.")
    _require(config.num_envs % (learners * config.num_minibatches) == 0,
             f"--num-envs {config.num_envs} must be divisible by --asynchronous.learner-devices "
             f"× --num-minibatches ({learners} × {config.num_minibatches}): every minibatch "
             "is split evenly over the learner devices.")
    _require(options.timeout_s > 0, "--asynchronous.timeout-s must be > 0.")
    _require(config.num_seeds == 1, "--asynchronous.enabled trains one run: use --num-seeds 1 "
             "(replay its schedule with --lag.mode replay to vmap over seeds).")
    _require(config.lag.max_delay == 0 and config.lag.mode != "replay"
             and config.distributed.num_devices == 1,
             "--asynchronous.enabled makes its own lag: leave --lag.max-delay 0, --lag.mode "
             "unset and --distributed.num-devices 1.")


def _validate_algo(config: TrainConfig) -> None:
    """A registered algorithm, and every algorithm's options as its `AlgorithmSpec.check`
    wants them (a group that does not run is still checked: it may run in a sweep's cell)."""
    spec = spec_of(config.algo)
    if spec is None:
        names = list(algorithms())
        close = difflib.get_close_matches(config.algo, names, n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"Unknown --algo {config.algo!r}.{hint} Choose one of {', '.join(names)}.")
    for name, group_spec in algorithms().items():
        problems = group_spec.problems(getattr(config, name))
        _require(not problems, " ".join(problems))


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
    from jaxvaco.core.envs import UnknownEnvError, env_spec
    from jaxvaco.core.envs.brax_env import BRAX_BACKENDS

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
    """Check every setting; raise ConfigError naming the option to change. Returns the
    config with its algorithm's tuned values where shared options were left at None."""
    _validate_algo(config)
    config = with_tuned_defaults(config)
    _validate_finite(config)
    _validate_positive(config)
    _validate_ranges(config)
    _validate_coefficients(config)
    _validate_paths(config)
    _validate_shapes(config)
    _validate_lag(config)
    _validate_async(config)
    _validate_distributed(config)
    _validate_env(config)
    return config


def unused_algo_options(config: TrainConfig) -> list[str]:
    """Options of another algorithm's group (--<algo>.*) set away from their defaults."""
    out = []
    for group in algorithms():
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
    from jaxvaco.core.envs import env_spec

    out = unused_algo_options(config)
    default = TrainConfig()
    if config.brax_backend != default.brax_backend and env_spec(config.env).family != "brax":
        out.append(f"--brax-backend has no effect with the gymnax environment {config.env}.")
    if config.lag.max_delay == 0:
        out += [f"--lag.{name.replace('_', '-')} has no effect with --lag.max-delay 0."
                for name in ("mode", "num_groups")
                if getattr(config.lag, name) != getattr(default.lag, name)]
    dist = config.distributed
    if dist.num_devices == 1 and dist.sync_interval != default.distributed.sync_interval:
        out.append("--distributed.sync-interval has no effect with one device (it delays the "
                   "actor copies of --distributed.num-devices > 1); use --lag.max-delay for "
                   "lag on one device.")
    return out + lag_beyond_run(config)

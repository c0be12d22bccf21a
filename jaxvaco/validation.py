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
from pathlib import Path, PurePath
from typing import Any

from jaxvaco.config import ALGOS, ConfigError, TrainConfig, with_tuned_defaults


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
    _validate_distributed(config)
    _validate_env(config)
    return config


GRID_FIELDS = {"learning_rate": "learning_rate", "gamma": "gamma", "gae_lambda": "gae_lambda",
               "clip_coef": "clip_coef", "ent_coef": "ent_coef", "vf_coef": "vf_coef",
               "max_grad_norm": "max_grad_norm", "reward_scale": "reward_scale",
               "rho_bar": "{algo}.rho_bar", "c_bar": "{algo}.c_bar", "delta": "vaco.delta",
               "target_kl": "ppo_kl.target_kl"}
"""The TrainConfig field each float `Hyperparams` leaf comes from (`lag_delay` is checked on
its own: an integer K up to lag.max_delay)."""


def with_value(config: TrainConfig, path: str, value: float) -> TrainConfig:
    """`config` with the (dotted) field `path` set to `value`."""
    group, _, name = path.rpartition(".")
    if not group:
        return dataclasses.replace(config, **{name: value})
    return dataclasses.replace(config, **{group: dataclasses.replace(getattr(config, group),
                                                                     **{name: value})})


def validate_grid_values(config: TrainConfig, swept: dict[str, list]) -> None:
    """Every swept value passes the check its option passes on the command line (a grid
    over lag_delay takes integers 0 <= K <= lag.max_delay). ConfigError names the value."""
    for name, values in swept.items():
        for value in values:
            if name == "lag_delay":
                _require(isinstance(value, int | float) and float(value).is_integer()
                         and 0 <= value <= config.lag.max_delay,
                         f"grid value lag_delay = {value!r}: K must be an integer in "
                         f"[0, --lag.max-delay = {config.lag.max_delay}]; raise "
                         "--lag.max-delay for longer lags.")
                continue
            _require(isinstance(value, int | float) and not isinstance(value, bool),
                     f"grid value {name} = {value!r} must be a number.")
            path = GRID_FIELDS[name].format(algo=config.algo)
            try:
                validate(with_value(config, path, float(value)))
            except ConfigError as error:
                raise ConfigError(f"grid value {name} = {value!r}: {error}") from None


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
    dist = config.distributed
    if dist.num_devices == 1 and dist.sync_interval != default.distributed.sync_interval:
        out.append("--distributed.sync-interval has no effect with one device (it delays the "
                   "actor copies of --distributed.num-devices > 1); use --lag.max-delay for "
                   "lag on one device.")
    return out + lag_beyond_run(config)


def parameter_count(config: TrainConfig) -> int:
    """Parameters of the actor-critic (`jaxvaco.networks.ActorCritic`): two MLPs with
    widths hidden_sizes, an action head and a value head, and log σ for continuous actions."""
    from jaxvaco.envs import env_spec

    spec = env_spec(config.env, brax_backend=config.brax_backend)
    inputs = math.prod(spec.obs_shape)

    def mlp(out: int) -> int:
        widths = [inputs, *config.hidden_sizes, out]
        return sum((a + 1) * b for a, b in zip(widths, widths[1:], strict=False))

    return mlp(spec.num_actions) + mlp(1) + (0 if spec.discrete else spec.num_actions)


def memory_estimate(config: TrainConfig, num_runs: int) -> dict[str, int]:
    """Bytes the largest arrays of a run take, a lower bound on what it needs:
    the lag ring buffer, (max_delay + 1) float32 copies of the parameters per run, and the
    parameters with Adam's two moments; the batch, num_envs × num_steps observations and
    about 8 float32 per step (reward, value, log β, ...) per run. A run's total also has
    XLA's temporaries and the environments' states on top."""
    from jaxvaco.envs import env_spec

    params = parameter_count(config)
    obs = math.prod(env_spec(config.env, brax_backend=config.brax_backend).obs_shape)
    ring = (config.lag.max_delay + 1 if config.lag.max_delay else 0) * params * 4
    learner = 3 * params * 4
    batch = config.num_envs * config.num_steps * (obs + 8) * 4
    return {"ring buffer": ring * num_runs, "learner": learner * num_runs,
            "batch": batch * num_runs}


def available_memory() -> tuple[int, str] | None:
    """(bytes, what) the arrays of a run can use: the accelerator's memory, else the host's
    available memory (/proc/meminfo); None when unknown."""
    import jax

    device = jax.devices()[0]
    if device.platform != "cpu":
        limit = (device.memory_stats() or {}).get("bytes_limit")
        return (int(limit), f"the {device.device_kind}'s memory") if limit else None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "this machine's available memory"
    except (OSError, ValueError, IndexError):
        return None
    return None


def validate_memory(config: TrainConfig, num_runs: int) -> None:
    """ConfigError, with the figures, when the largest arrays alone exceed the memory there
    is (`memory_estimate` against `available_memory`)."""
    have = available_memory()
    if have is None:
        return
    parts = memory_estimate(config, num_runs)
    need = sum(parts.values())
    if need <= have[0]:
        return
    detail = ", ".join(f"{name} {size / 1e9:.1f} GB" for name, size in parts.items() if size)
    raise ConfigError(f"this run needs at least {need / 1e9:.1f} GB ({detail}; {num_runs} "
                      f"run(s)), more than {have[1]} ({have[0] / 1e9:.1f} GB). Lower "
                      "--lag.max-delay, --num-envs × --num-steps, or the number of runs "
                      "(--num-seeds, the grid).")

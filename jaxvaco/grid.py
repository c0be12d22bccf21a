"""A run's runs: every (grid combination, seed) pair, checked and expanded.

A program holds R runs side by side (one `jax.vmap`): the seeds, times every combination
of the hyperparameter values in a `Grid` (any `Hyperparams` field: learning rate, δ, γ, λ,
coefficients, the lag K up to `lag.max_delay`). A grid is a product {name: values} or an
explicit list of combinations. `validate_grid` checks every value as its option is checked
on the command line; `expand_runs` gives each run its labels, key and hyperparameters.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp

from jaxvaco.config import ConfigError, TrainConfig
from jaxvaco.hparams import Hyperparams, hyperparams_from_config
from jaxvaco.run_dir import Grid
from jaxvaco.validation import validate

GRID_FIELDS = {"learning_rate": "learning_rate", "gamma": "gamma", "gae_lambda": "gae_lambda",
               "clip_coef": "clip_coef", "ent_coef": "ent_coef", "vf_coef": "vf_coef",
               "max_grad_norm": "max_grad_norm", "reward_scale": "reward_scale",
               "rho_bar": "{algo}.rho_bar", "c_bar": "{algo}.c_bar", "delta": "vaco.delta",
               "target_kl": "ppo_kl.target_kl"}
"""The TrainConfig field each float `Hyperparams` leaf comes from (`lag_delay` is checked on
its own: an integer K up to lag.max_delay)."""


def grid_combinations(grid: Grid | None) -> list[dict[str, float]]:
    """The grid's combinations in order ([{}] for no grid)."""
    if isinstance(grid, list):
        return [dict(combo) for combo in grid]
    grid = grid or {}
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


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
                if not (isinstance(value, int | float) and float(value).is_integer()
                        and 0 <= value <= config.lag.max_delay):
                    raise ConfigError(f"grid value lag_delay = {value!r}: K must be an integer "
                                      f"in [0, --lag.max-delay = {config.lag.max_delay}]; raise "
                                      "--lag.max-delay for longer lags.")
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"grid value {name} = {value!r} must be a number.")
            path = GRID_FIELDS[name].format(algo=config.algo)
            try:
                validate(with_value(config, path, float(value)))
            except ConfigError as error:
                raise ConfigError(f"grid value {name} = {value!r}: {error}") from None


def validate_grid(config: TrainConfig, grid: Grid) -> None:
    """ConfigError unless every name is a `Hyperparams` field with values, every value is
    valid, and a list grid's combinations all set the same names."""
    names = {f.name for f in dataclasses.fields(Hyperparams)}
    if isinstance(grid, list):
        if not grid or len({tuple(sorted(combo)) for combo in grid}) != 1:
            raise ConfigError("A list grid needs at least one combination, and every "
                              "combination must set the same names.")
        swept = {name: [combo[name] for combo in grid] for name in grid[0]}
    else:
        swept = grid
    for name, values in swept.items():
        if name not in names:
            raise ConfigError(f"Cannot sweep {name!r}: sweepable values are {sorted(names)}.")
        if not len(values):
            raise ConfigError(f"The sweep over {name!r} has no values.")
    validate_grid_values(config, swept)


def expand_runs(config: TrainConfig, grid: Grid | None = None
                ) -> tuple[list[dict], jax.Array, Hyperparams]:
    """Every (grid combination, seed) pair as one run: labels, keys [R], hyperparams [R]."""
    validate_grid(config, grid or {})
    base = hyperparams_from_config(config)
    runs, hps = [], []
    for combo in grid_combinations(grid):
        hp = base.replace(**{k: jnp.asarray(v, getattr(base, k).dtype) for k, v in combo.items()})
        for i in range(config.num_seeds):
            runs.append({"seed": config.seed + i, **combo})
            hps.append(hp)
    keys = jnp.stack([jax.random.PRNGKey(run["seed"]) for run in runs])
    return runs, keys, jax.tree.map(lambda *leaves: jnp.stack(leaves), *hps)

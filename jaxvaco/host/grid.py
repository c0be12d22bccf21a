"""A run's runs: every (grid combination, seed) pair, checked and expanded.

A program holds R runs side by side (one `jax.vmap`): the seeds, times every combination
of the hyperparameter values in a `Grid` (a shared `Hyperparams` leaf: learning rate, γ, λ,
coefficients; one of the algorithm's traced options: δ, target KL, ρ̄, c̄, ...; the lag K up
to `lag.max_delay`). A grid is a product {name: values} or an
explicit list of combinations. `validate_grid` checks every value as its option is checked
on the command line; `expand_runs` gives each run its labels, key and hyperparameters.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp

from jaxvaco.core.algos.registry import spec_of
from jaxvaco.core.config import ConfigError, TrainConfig, option_path, with_tuned_defaults
from jaxvaco.core.hparams import LAG, SHARED, Hyperparams
from jaxvaco.core.validation import validate
from jaxvaco.host.run_dir import Grid


def sweepable(algo: str) -> tuple[str, ...]:
    """The grid names of a run of `algo`: the shared leaves, its traced options and K."""
    return (*SHARED, *spec_of(algo).traced, LAG)


def hyperparams_from_config(config: TrainConfig) -> Hyperparams:
    """Scalar leaves for one run, read from the config (shared options left at None: the
    algorithm's tuned values)."""
    config = with_tuned_defaults(config)
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    traced = spec_of(config.algo).traced_values(getattr(config, config.algo))
    return Hyperparams(**{name: f32(getattr(config, name)) for name in SHARED},
                       algo={name: f32(value) for name, value in traced.items()},
                       lag_delay=jnp.asarray(config.lag.max_delay, jnp.int32))


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
            if name == LAG:
                if not (isinstance(value, int | float) and float(value).is_integer()
                        and 0 <= value <= config.lag.max_delay):
                    raise ConfigError(f"grid value lag_delay = {value!r}: K must be an integer "
                                      f"in [0, --lag.max-delay = {config.lag.max_delay}]; raise "
                                      "--lag.max-delay for longer lags.")
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"grid value {name} = {value!r} must be a number.")
            path = option_path(config.algo, name)
            try:
                validate(with_value(config, path, float(value)))
            except ConfigError as error:
                raise ConfigError(f"grid value {name} = {value!r}: {error}") from None


def validate_grid(config: TrainConfig, grid: Grid) -> None:
    """ConfigError unless every name is sweepable for the algorithm (`sweepable`) with
    values, every value is valid, and a list grid's combinations all set the same names."""
    names = sweepable(config.algo)
    if isinstance(grid, list):
        if not grid or len({tuple(sorted(combo)) for combo in grid}) != 1:
            raise ConfigError("A list grid needs at least one combination, and every "
                              "combination must set the same names.")
        swept = {name: [combo[name] for combo in grid] for name in grid[0]}
    else:
        swept = grid
    for name, values in swept.items():
        if name not in names:
            raise ConfigError(f"Cannot sweep {name!r} with --algo {config.algo}: sweepable "
                              f"values are {', '.join(sorted(names))}.")
        if not len(values):
            raise ConfigError(f"The sweep over {name!r} has no values.")
    validate_grid_values(config, swept)


def with_grid_values(hp: Hyperparams, combo: dict[str, float]) -> Hyperparams:
    """`hp` with the grid combination's values: shared leaves, traced options and K."""
    algo = {**hp.algo, **{k: jnp.asarray(v, jnp.float32) for k, v in combo.items()
                          if k in hp.algo}}
    shared = {k: jnp.asarray(v, getattr(hp, k).dtype) for k, v in combo.items()
              if k not in hp.algo}
    return hp.replace(algo=algo, **shared)


def expand_runs(config: TrainConfig, grid: Grid | None = None
                ) -> tuple[list[dict], jax.Array, Hyperparams]:
    """Every (grid combination, seed) pair as one run: labels, keys [R], hyperparams [R]."""
    validate_grid(config, grid or {})
    base = hyperparams_from_config(config)
    runs, hps = [], []
    for combo in grid_combinations(grid):
        hp = with_grid_values(base, combo)
        for i in range(config.num_seeds):
            runs.append({"seed": config.seed + i, **combo})
            hps.append(hp)
    keys = jnp.stack([jax.random.PRNGKey(run["seed"]) for run in runs])
    return runs, keys, jax.tree.map(lambda *leaves: jnp.stack(leaves), *hps)

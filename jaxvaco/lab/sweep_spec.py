"""A sweep's specification: `SweepConfig` (read from TOML by `load_sweep_file` and checked
by `validate_sweep`), its cells (`cells`) and each cell's configuration (`cell_config`).
How a sweep runs, what it writes and the TOML format: `jaxvaco.lab.sweep`.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxvaco.core.config import (
    ConfigError,
    RunFileError,
    TrainConfig,
    from_table,
    option_paths,
    with_overrides,
)
from jaxvaco.core.validation import plain_folder_name
from jaxvaco.host.run_folder import SweepFolder

SWEEP_SET = ("env", "run_name", "results_dir", "lag.max_delay")
"""Options the sweep sets in every cell (a variant or an env override may not)."""


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A grid of training runs; `base` sets every other option of each cell."""

    name: str = "sweep"
    """Folder under --results-dir."""
    results_dir: str = "results"
    envs: tuple[str, ...] = ("CartPole-v1",)
    algos: tuple[str, ...] = ()
    """One cell per algorithm; empty = base.algo. Leave it empty when `variants` are given."""
    lag_delays: tuple[int, ...] = (0,)
    """Policy lags K: the cells' `lag_delay` values (a cell's lag.max_delay is their max)."""
    vmap_lag: bool = True
    """Run the K values of an (env, algo) cell as one program (else one cell per K)."""
    grid: dict[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    """More hyperparameter values vmapped in every cell, e.g. learning_rate."""
    variants: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Named variants, one cell each per env (instead of one per algorithm): a (nested)
    table of TrainConfig options over `base`, algo included (else base.algo), e.g.
    {"decoupled": {"algo": "ppo", "ppo": {"anchor": "learner"}}} (or "ppo.anchor" keys)."""
    env_overrides: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Per env, a (nested) table of TrainConfig options over `base` in that env's cells,
    e.g. {"Breakout-MinAtar": {"total_timesteps": 1000000}}; none a variant also sets."""
    base: TrainConfig = TrainConfig()
    """Options of every cell; its env, lag.max_delay, run_name, results_dir (and algo, with
    `algos`) are set by the sweep."""


@dataclasses.dataclass(frozen=True)
class Cell:
    env: str
    algo: str
    delays: tuple[int, ...]
    variant: str = ""
    """The variant's name; empty = the algo (a sweep without variants)."""

    @property
    def label(self) -> str:
        """The results' variant column: the variant's name, else the algo."""
        return self.variant or self.algo

    @property
    def name(self) -> str:
        env = self.env.replace("/", "-")
        return f"{env}__{folder_name(self.label)}__K{'-'.join(map(str, self.delays))}"


def folder_name(label: str) -> str:
    """A variant's name as part of a folder name: runs of characters other than letters,
    digits, '.', '=' and '-' become '-' ("clip β | learner | gae" -> "clip-β-learner-gae")."""
    return re.sub(r"[^\w.=-]+", "-", label).strip("-")


def load_sweep_file(path: Path) -> SweepConfig:
    """A SweepConfig from TOML: top-level sweep fields, a [base] table of TrainConfig and
    optional [variants] and [env_overrides] tables of TrainConfig options.

    An unreadable or malformed file, an unknown key (at any depth, in a variant or an env
    override too) or a value of the wrong type raises ConfigError naming the file and the
    key or line.
    """
    try:
        data = tomllib.loads(path.read_text())
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise RunFileError(f"{path} is not valid TOML: {error}.") from None
    if data.get("algos") == []:  # left out, it means base.algo
        raise ConfigError(f"{path}: algos is empty; give at least one value.")
    spec = from_table(SweepConfig, data, str(path))
    for env in spec.env_overrides:  # (--envs may choose fewer: their overrides go unused)
        if env not in spec.envs:
            raise ConfigError(f"{path} [env_overrides.{env!r}]: {env} is not one of envs "
                              f"({', '.join(spec.envs)}); add it to envs or remove its "
                              "override.")
    return validate_sweep(spec, str(path))


def validate_sweep(spec: SweepConfig, source: str = "sweep") -> SweepConfig:
    """Check the sweep's own fields, its variants and env overrides (each key and value
    against TrainConfig; the cells' configurations are validated by `cell_setup`)."""
    if not plain_folder_name(spec.name):
        raise ConfigError(f"{source}: name must be a single folder name (created under "
                          f"results_dir), got {spec.name!r}.")
    for field in ("envs", "lag_delays"):
        if not getattr(spec, field):
            raise ConfigError(f"{source}: {field} is empty; give at least one value.")
    lists = {"envs": spec.envs, "algos": spec.algos, "lag_delays": spec.lag_delays,
             **{f"grid.{name}": values for name, values in spec.grid.items()}}
    for field, values in lists.items():
        twice = sorted({str(v) for v in values if list(values).count(v) > 1})
        if twice:
            raise ConfigError(f"{source}: {field} lists {', '.join(twice)} more than once; list "
                              "each value once (repeats would count the same runs twice in "
                              "every statistic).")
    if spec.variants and spec.algos:
        raise ConfigError(f"{source}: give either algos (one cell per algorithm) or "
                          "variants (one cell per variant), not both; set each variant's "
                          "algo in its table instead.")
    folders: dict[str, str] = {}
    for label, options in spec.variants.items():
        where = f"{source} [variants.{label!r}]"
        folder = folder_name(label)
        if not folder or not plain_folder_name(folder):
            raise ConfigError(f"{where}: the name gives no folder name; use letters or "
                              "digits in it.")
        if folder in folders:
            raise ConfigError(f"{where}: the names {folders[folder]!r} and {label!r} give "
                              f"the same folder name {folder!r}; rename one of them.")
        folders[folder] = label
        _check_options(spec, options, where, SWEEP_SET)
    for env, options in spec.env_overrides.items():
        where = f"{source} [env_overrides.{env!r}]"
        _check_options(spec, options, where, (*SWEEP_SET, "algo"))
        for label, variant in spec.variants.items():
            both = sorted(set(option_paths(options)) & set(option_paths(variant)))
            if both:
                raise ConfigError(f"{where}: {', '.join(both)} is also set by variant "
                                  f"{label!r}; set it in one place.")
    return spec


def _check_options(spec: SweepConfig, options: Any, where: str, forbidden: Sequence[str]
                   ) -> None:
    if not isinstance(options, dict):
        raise ConfigError(f"{where}: must be a table of TrainConfig options, got "
                          f"{options!r}.")
    taken = [path for path in option_paths(options) if path in forbidden]
    if taken:
        raise ConfigError(f"{where}: {taken[0]} is set by the sweep for each cell; remove it.")
    with_overrides(spec.base, options, where)


def cells(spec: SweepConfig) -> list[Cell]:
    """Every cell: env × (variant or algo) × K-set, in that order."""
    delays = [tuple(spec.lag_delays)] if spec.vmap_lag else [(k,) for k in spec.lag_delays]
    if spec.variants:
        kinds = [(option_paths(options).get("algo", spec.base.algo), label)
                 for label, options in spec.variants.items()]
    else:
        kinds = [(algo, "") for algo in spec.algos or (spec.base.algo,)]
    return [Cell(env, algo, ks, variant) for env in spec.envs for algo, variant in kinds
            for ks in delays]


def cell_config(spec: SweepConfig, cell: Cell, directory: Path | None = None
                ) -> TrainConfig:
    """The TrainConfig of one cell (not yet validated): base, then the env's overrides and
    the variant's options (or the cell's algo), then what the sweep sets."""
    config = with_overrides(spec.base, spec.env_overrides.get(cell.env, {}),
                          f"env_overrides.{cell.env}")
    if cell.variant:
        config = with_overrides(config, spec.variants[cell.variant], f"variants.{cell.variant}")
    directory = directory or Path(spec.results_dir) / spec.name
    return dataclasses.replace(
        config, env=cell.env, algo=cell.algo, run_name=cell.name,
        results_dir=str(SweepFolder(directory).cells),
        lag=dataclasses.replace(config.lag, max_delay=max(cell.delays)))

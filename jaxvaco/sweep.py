"""Sweeps over environments × algorithms (or named variants) × lags × seeds, restartable,
with one tidy table. The experiments under experiments/ are such sweeps: their specs are
the TOML files in experiments/sweeps/.

A sweep lives in ``<results_dir>/<name>/``. It is made of cells, one per (env, algo) and,
with ``vmap_lag = false``, per K. Each cell is one `jaxvaco.runner.run` in
``runs/<env>__<algo>__K<k1-k2-...>/``: its seeds, and its K values when vmapped, are runs
of one compiled program (``lag.max_delay`` = max K and grid ``{"lag_delay": Ks}``; K = 0
then takes the lagged code path with a delay of 0). Values in ``grid`` (any `Hyperparams`
field, e.g. learning_rate) are vmapped the same way.

Named variants replace the algorithms: with a ``[variants]`` table, the cells are
env × variant (× K), each variant a (nested) table of TrainConfig options over ``[base]``,
its algorithm included (a variant without ``algo`` runs ``base.algo``; ``algos`` must then
be left out). The cell folder is ``<env>__<variant as a folder name>__K...`` (runs of
characters other than letters, digits, ``.``, ``=`` and ``-`` become ``-``).
``[env_overrides]`` gives per-env options over ``[base]`` (a budget, Brax's observation
normalisation); an option may not be set both by an env override and by a variant. The
sweep sets env, algo (from ``algos``), run_name, results_dir and lag.max_delay itself.

A cell is complete when its metrics.jsonl and its DONE marker exist. Restarting a sweep
skips complete cells and resumes an unfinished one from its newest checkpoint; a cell that
diverged (`NonFiniteError`) has a FAILED marker holding the message and is skipped too
(delete it to retry). Complete cells must have been run with the configuration the sweep
gives them now, else the sweep is refused.

After each cell, ``results.csv`` is rewritten from all complete cells: one row per run and
chunk with columns env, algo, K, seed, step, return (training episode return), variant
(the variant's name, else the algo), then every other metric (eval/greedy_return,
tv/backward, tv/forward, tv/total, lag/iterations, the algorithm's ppo/clipped_fraction,
spo/outside_fraction or vaco/filtered_fraction, ...): see `jaxvaco.results`.
``jaxvaco sweep`` ends by printing its table of final returns per (env, variant) and K with
the retention at the largest K (`jaxvaco.analysis.tables.robustness_table`), then the
``jaxvaco plot`` command, which prints the same table and draws it (one colour per variant).

Example ``sweep.toml``::

    name = "lag"
    envs = ["CartPole-v1", "Breakout-MinAtar"]
    lag_delays = [0, 4, 16]

    [base]                     # any TrainConfig field, as in config.json
    num_seeds = 5
    total_timesteps = 500000
    lag = { mode = "fixed" }

    [env_overrides]
    Breakout-MinAtar = { total_timesteps = 1000000 }

    [variants]                 # or algos = ["ppo", "vaco"] for one cell per algorithm
    ppo = { algo = "ppo" }
    "ppo, learner's critic" = { algo = "ppo", ppo.critic = "learner" }
    vaco = { algo = "vaco" }
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxvaco.config import (
    ConfigError,
    RunFileError,
    TrainConfig,
    from_table,
    to_dict,
    tuned_settings,
)
from jaxvaco.results import tidy_rows, write_table
from jaxvaco.run_dir import RunControl, config_changes, load_run_dir, write_json
from jaxvaco.runner import check_before_start, run
from jaxvaco.validation import lag_reaches_end, plain_folder_name

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


def option_paths(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A (nested) table of options as {dotted path: value}; "ppo.critic" keys and
    {"ppo": {"critic": ...}} tables give the same path."""
    out = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(option_paths(value, path + "."))
        else:
            out[path] = value
    return out


def with_options(config: TrainConfig, options: dict[str, Any], source: str) -> TrainConfig:
    """`config` with `options` (a nested table or dotted paths) set, every key and value
    checked as in a config file: ConfigError naming `source` and the key otherwise."""
    data = to_dict(config)
    for path, value in option_paths(options).items():
        *groups, field = path.split(".")
        table = data
        for i, group in enumerate(groups):
            table = table.setdefault(group, {})  # an unknown group: from_table names it
            if not isinstance(table, dict):
                raise ConfigError(f"{source}: {'.'.join(groups[:i + 1])} is an option, not "
                                  f"a table of options; cannot set {path}.")
        table[field] = value
    return from_table(TrainConfig, data, source)


@dataclasses.dataclass
class SweepResult:
    directory: Path
    ran: list[str]  # cells trained (or continued) by this call
    skipped: list[str]  # cells already complete (or failed) before it
    failed: dict[str, str]  # cell -> NonFiniteError message, including earlier ones
    stop_signal: int = 0


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
    with_options(spec.base, options, where)


Plan = list[tuple[Cell, TrainConfig, dict[str, tuple] | None]]
"""Every cell of a sweep with its validated configuration and grid (`plan_sweep`)."""


def long_lags(spec: SweepConfig, plan: Plan | None = None) -> list[str]:
    """A warning when some K are so long that those actors act with θ_0 throughout
    (`plan`: the sweep's `plan_sweep`, made here when not given)."""
    lengths = {config.num_iterations for _, config, _ in plan or plan_sweep(spec)}
    n = min(lengths)
    too_long = [k for k in spec.lag_delays if lag_reaches_end(k, n)]
    if not too_long:
        return []
    cells_ = "cells'" if len(lengths) == 1 else "shortest cells'"
    return [f"lag_delays {too_long} are not below the {cells_} {n} iterations: delays are "
            "clamped at θ_0, so those actors act with the initial policy throughout. Lower "
            "them or raise total_timesteps."]


def critic_of(config: TrainConfig) -> str:
    """Which critic gives a cell's advantages: its algorithm's `critic` option; IMPALA
    recomputes V-trace with the learner's critic at every minibatch."""
    return "learner" if config.algo == "impala" else getattr(config, config.algo).critic


def unlike_comparisons(spec: SweepConfig, plan: Plan | None = None) -> list[str]:
    """Warnings for a comparison of unlike variants: some use the recorded (behaviour)
    critic and others the learner's, or some run their algorithm's tuned values
    (`jaxvaco.config.TUNED`) and others not. One line each, naming the variants (`plan`:
    the sweep's `plan_sweep`, made here when not given)."""
    configs: dict[str, TrainConfig] = {}
    for cell, config, _ in plan or plan_sweep(spec):
        configs.setdefault(cell.label, config)
    out = []
    critics = {label: critic_of(config) for label, config in configs.items()}
    if len(set(critics.values())) > 1:
        named = ", ".join(f"{label} ({critic})" for label, critic in critics.items())
        out.append(f"the variants differ in critic: {named}; a lag comparison then measures "
                   "the critic too (advantages from the recorded critic collapse under lag). "
                   "Set <algo>.critic alike unless the critic is what you compare.")
    tuned = {label: tuned_settings(config) for label, config in configs.items()}
    if len(set(tuned.values())) > 1:
        untuned = ", ".join(label for label, ok in tuned.items() if not ok)
        out.append(f"{untuned} do(es) not run with its algorithm's tuned values "
                   "(jaxvaco.config.TUNED: learning rate, entropy, epochs, minibatches, its own "
                   "knob) while the other variants do; give every variant the same tuning "
                   "budget, or name the difference.")
    return out


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
    config = with_options(spec.base, spec.env_overrides.get(cell.env, {}),
                          f"env_overrides.{cell.env}")
    if cell.variant:
        config = with_options(config, spec.variants[cell.variant], f"variants.{cell.variant}")
    directory = directory or Path(spec.results_dir) / spec.name
    return dataclasses.replace(
        config, env=cell.env, algo=cell.algo, run_name=cell.name,
        results_dir=str(directory / "runs"),
        lag=dataclasses.replace(config.lag, max_delay=max(cell.delays)))


def cell_setup(spec: SweepConfig, cell: Cell, directory: Path
               ) -> tuple[TrainConfig, dict[str, tuple] | None]:
    """The TrainConfig and grid of one cell (validated)."""
    config = cell_config(spec, cell, directory)
    grid = dict(spec.grid)
    if len(cell.delays) > 1:
        grid["lag_delay"] = cell.delays
    config = check_before_start(config, grid)
    return config, grid or None


def plan_sweep(spec: SweepConfig, only: Sequence[Cell] | None = None) -> Plan:
    """Every cell (of `only`, when given) with its validated configuration and grid: all
    are checked before any folder is made or anything compiled."""
    directory = Path(spec.results_dir) / spec.name
    return [(cell, *cell_setup(spec, cell, directory))
            for cell in (cells(spec) if only is None else only)]


def cell_state(cell_dir: Path) -> str:
    """done, failed or todo."""
    if (cell_dir / "DONE").exists() and (cell_dir / "metrics.jsonl").exists():
        return "done"
    return "failed" if (cell_dir / "FAILED").exists() else "todo"


def check_unchanged(cell_dir: Path, config: TrainConfig) -> None:
    changes = config_changes(load_run_dir(cell_dir)[0], config)
    if changes:
        raise ConfigError(f"{cell_dir} is complete but was run with other settings "
                          f"({'; '.join(changes)}); use another sweep name.")


def run_sweep(spec: SweepConfig, control: RunControl | None = None,
              only: Sequence[Cell] | None = None, plan: Plan | None = None) -> SweepResult:
    """Run every cell not yet complete (of `only`, when given, a subset of `cells(spec)`);
    rewrite results.csv after each. `plan`: `plan_sweep(spec, only)` when the caller has
    made it already (validating every cell builds every environment once more)."""
    from jaxvaco.guard import NonFiniteError

    validate_sweep(spec)
    directory = Path(spec.results_dir) / spec.name
    plan = plan or plan_sweep(spec, only)
    directory.mkdir(parents=True, exist_ok=True)
    write_json(directory / "sweep.json", dataclasses.asdict(spec))
    result = SweepResult(directory, [], [], {})
    for i, (cell, config, grid) in enumerate(plan):
        cell_dir = directory / "runs" / cell.name
        state = cell_state(cell_dir)
        if state != "todo":
            if state == "done":
                check_unchanged(cell_dir, config)
            else:
                result.failed[cell.name] = (cell_dir / "FAILED").read_text()
            result.skipped.append(cell.name)
            continue
        print(f"[{i + 1}/{len(plan)}] {cell.name}", flush=True)
        resume = cell_dir if (cell_dir / "config.json").exists() else None
        result.ran.append(cell.name)
        try:
            outcome = run(config, grid, control, resume=resume)
        except NonFiniteError as error:
            (cell_dir / "FAILED").write_text(str(error))
            result.failed[cell.name] = str(error)
            continue
        if outcome.stop_signal:
            result.stop_signal = outcome.stop_signal
            break
        write_json(cell_dir / "DONE", {k: np.asarray(v).tolist()
                                       for k, v in outcome.summary.items()})
        write_sweep_table(directory, [c for c, _, _ in plan])
    write_sweep_table(directory, [c for c, _, _ in plan])
    return result


def write_sweep_table(directory: Path, sweep_cells: list[Cell]) -> Path:
    """results.csv from every complete cell (atomically replaced)."""
    rows = [row for cell in sweep_cells
            if cell_state(directory / "runs" / cell.name) == "done"
            for row in tidy_rows(directory / "runs" / cell.name, cell.label)]
    return write_table(directory / "results.csv", rows)

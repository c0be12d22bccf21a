"""Sweeps over environments × algorithms × lags × seeds, restartable, with one tidy table.

A sweep lives in ``<results_dir>/<name>/``. It is made of cells, one per (env, algo) and,
with ``vmap_lag = false``, per K. Each cell is one `jaxvaco.runner.run` in
``runs/<env>__<algo>__K<k1-k2-...>/``: its seeds, and its K values when vmapped, are runs
of one compiled program (``lag.max_delay`` = max K and grid ``{"lag_delay": Ks}``; K = 0
then takes the lagged code path with a delay of 0). Values in ``grid`` (any `Hyperparams`
field, e.g. learning_rate) are vmapped the same way.

A cell is complete when its metrics.jsonl and its DONE marker exist. Restarting a sweep
skips complete cells and resumes an unfinished one from its newest checkpoint; a cell that
diverged (`NonFiniteError`) has a FAILED marker holding the message and is skipped too
(delete it to retry). Complete cells must have been run with the configuration the sweep
gives them now, else the sweep is refused.

After each cell, ``results.csv`` is rewritten from all complete cells: one row per run and
chunk with columns env, algo, K, seed, step, return (training episode return), then every
other metric (eval/greedy_return, tv/backward, tv/forward, tv/total, lag/iterations, the
algorithm's ppo/clipped_fraction, spo/outside_fraction or vaco/filtered_fraction, ...): see
`jaxvaco.results`. ``jaxvaco plot`` draws it.

Example ``sweep.toml``::

    name = "lag"
    envs = ["CartPole-v1"]
    algos = ["ppo", "vaco"]
    lag_delays = [0, 4, 16]

    [base]                     # any TrainConfig field, as in config.json
    num_seeds = 5
    total_timesteps = 500000
    lag = { mode = "fixed" }
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import numpy as np

from jaxvaco.checkpoint import config_changes
from jaxvaco.config import (
    ConfigError,
    RunFileError,
    TrainConfig,
    from_table,
)
from jaxvaco.results import tidy_rows, write_table
from jaxvaco.run_dir import RunControl, load_run_dir, write_json
from jaxvaco.runner import expand_runs, run
from jaxvaco.validation import lag_reaches_end, plain_folder_name, validate


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A grid of training runs; `base` sets every other option of each cell."""

    name: str = "sweep"
    """Folder under --results-dir."""
    results_dir: str = "results"
    envs: tuple[str, ...] = ("CartPole-v1",)
    algos: tuple[str, ...] = ("ppo",)
    lag_delays: tuple[int, ...] = (0,)
    """Policy lags K: the cells' `lag_delay` values (a cell's lag.max_delay is their max)."""
    vmap_lag: bool = True
    """Run the K values of an (env, algo) cell as one program (else one cell per K)."""
    grid: dict[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    """More hyperparameter values vmapped in every cell, e.g. learning_rate."""
    base: TrainConfig = TrainConfig()
    """Options of every cell; its env, algo, lag.max_delay, run_name, results_dir are set
    by the sweep."""


@dataclasses.dataclass(frozen=True)
class Cell:
    env: str
    algo: str
    delays: tuple[int, ...]

    @property
    def name(self) -> str:
        env = self.env.replace("/", "-")
        return f"{env}__{self.algo}__K{'-'.join(map(str, self.delays))}"


@dataclasses.dataclass
class SweepResult:
    directory: Path
    ran: list[str]  # cells trained (or continued) by this call
    skipped: list[str]  # cells already complete (or failed) before it
    failed: dict[str, str]  # cell -> NonFiniteError message, including earlier ones
    stop_signal: int = 0


def load_sweep_file(path: Path) -> SweepConfig:
    """A SweepConfig from TOML: top-level sweep fields and a [base] table of TrainConfig.

    An unreadable or malformed file, an unknown key (at any depth) or a value of the wrong
    type raises ConfigError naming the file and the key or line.
    """
    try:
        data = tomllib.loads(path.read_text())
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise RunFileError(f"{path} is not valid TOML: {error}.") from None
    return validate_sweep(from_table(SweepConfig, data, str(path)), str(path))


def validate_sweep(spec: SweepConfig, source: str = "sweep") -> SweepConfig:
    """Check the sweep's own fields (the cells are validated by `cell_setup`)."""
    if not plain_folder_name(spec.name):
        raise ConfigError(f"{source}: name must be a single folder name (created under "
                          f"results_dir), got {spec.name!r}.")
    for field in ("envs", "algos", "lag_delays"):
        if not getattr(spec, field):
            raise ConfigError(f"{source}: {field} is empty; give at least one value.")
    return spec


def long_lags(spec: SweepConfig) -> list[str]:
    """A warning when some K are so long that those actors act with θ_0 throughout."""
    n = spec.base.num_iterations
    too_long = [k for k in spec.lag_delays if lag_reaches_end(k, n)]
    if not too_long:
        return []
    return [f"lag_delays {too_long} are not below the cells' {n} iterations: delays are "
            "clamped at θ_0, so those actors act with the initial policy throughout. Lower "
            "them or raise base.total_timesteps."]


def cells(spec: SweepConfig) -> list[Cell]:
    delays = [tuple(spec.lag_delays)] if spec.vmap_lag else [(k,) for k in spec.lag_delays]
    return [Cell(env, algo, ks) for env in spec.envs for algo in spec.algos for ks in delays]


def cell_setup(spec: SweepConfig, cell: Cell, directory: Path
               ) -> tuple[TrainConfig, dict[str, tuple] | None]:
    """The TrainConfig and grid of one cell (validated)."""
    config = dataclasses.replace(
        spec.base, env=cell.env, algo=cell.algo, run_name=cell.name,
        results_dir=str(directory / "runs"),
        lag=dataclasses.replace(spec.base.lag, max_delay=max(cell.delays)))
    grid = dict(spec.grid)
    if len(cell.delays) > 1:
        grid["lag_delay"] = cell.delays
    validate(config)
    expand_runs(config, grid)  # validates the grid
    return config, grid or None


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


def run_sweep(spec: SweepConfig, control: RunControl | None = None) -> SweepResult:
    """Run every cell not yet complete; rewrite results.csv after each."""
    from jaxvaco.runner import NonFiniteError

    validate_sweep(spec)
    directory = Path(spec.results_dir) / spec.name
    plan = [(cell, *cell_setup(spec, cell, directory)) for cell in cells(spec)]
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
        write_sweep_table(directory, [c.name for c, _, _ in plan])
    write_sweep_table(directory, [c.name for c, _, _ in plan])
    return result


def write_sweep_table(directory: Path, cell_names: list[str]) -> Path:
    """results.csv from every complete cell (atomically replaced)."""
    rows = [row for name in cell_names
            if cell_state(directory / "runs" / name) == "done"
            for row in tidy_rows(directory / "runs" / name)]
    return write_table(directory / "results.csv", rows)

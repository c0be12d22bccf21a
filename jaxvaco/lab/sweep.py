"""Sweeps over environments × algorithms (or named variants) × lags × seeds, restartable,
with one tidy table. The experiments under experiments/ are such sweeps: their specs are
the TOML files in experiments/sweeps/.

A sweep lives in ``<results_dir>/<name>/``. It is made of cells, one per (env, algo) and,
with ``vmap_lag = false``, per K. Each cell is one `jaxvaco.host.runner.run` in
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

After each cell, ``results.csv`` is rewritten from all complete cells in the one results
schema (`jaxvaco.lab.results`, docs/results_schema.md): one row per run and chunk with columns
env, algo, variant (the variant's name, else the algo), K, seed, step, return (training
episode return), then every other metric (eval/greedy_return, tv/backward, tv/forward,
tv/total, lag/iterations, the algorithm's ppo/clipped_fraction, spo/outside_fraction or
vaco/filtered_fraction, ...).
``jaxvaco sweep`` ends by printing its table of final returns per (env, variant) and K with
the retention at the largest K (`jaxvaco.lab.sweep_table.robustness_table`), then the
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
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxvaco.core.algos.registry import spec_of
from jaxvaco.core.config import ConfigError, TrainConfig, tuned_settings
from jaxvaco.core.validation import lag_reaches_end
from jaxvaco.host.run_dir import RunControl, config_changes, load_run_dir
from jaxvaco.host.run_folder import RunFolder, SweepFolder, write_json
from jaxvaco.host.runner import check_before_start, run
from jaxvaco.lab.results import tidy_rows, write_results
from jaxvaco.lab.sweep_spec import (
    Cell,
    SweepConfig,
    cell_config,
    cells,
    load_sweep_file,
    validate_sweep,
)

__all__ = ["Cell", "Plan", "SweepConfig", "SweepResult", "cell_config", "cell_setup",
           "cell_state", "cells", "check_unchanged", "critic_of",
           "load_sweep_file", "long_lags", "plan_sweep", "run_sweep", "unlike_comparisons",
           "validate_sweep", "write_sweep_table"]
"""The sweep's API, its specification (`jaxvaco.lab.sweep_spec`) included."""


@dataclasses.dataclass
class SweepResult:
    directory: Path
    ran: list[str]  # cells trained (or continued) by this call
    skipped: list[str]  # cells already complete (or failed) before it
    failed: dict[str, str]  # cell -> NonFiniteError message, including earlier ones
    stop_signal: int = 0
    seconds: float = 0.0  # wall time of the cells this call trained
    compile_seconds: float = 0.0  # of which tracing, lowering and compiling

    def compile_share(self) -> str:
        """One line: how much of the cells' wall time went to compiling."""
        share = self.compile_seconds / self.seconds if self.seconds else 0.0
        return (f"compiling: {self.compile_seconds:.1f} s of {self.seconds:.1f} s in the cells "
                f"trained ({share:.0%})")


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
    """Which critic gives a cell's advantages: "learner" (recomputed once per iteration, or at
    every minibatch) or "behaviour" (the values the actors recorded), as its algorithm's
    record says (`AlgorithmSpec.learner_critic`)."""
    spec = spec_of(config.algo)
    return "learner" if spec.learner_critic(getattr(config, config.algo)) else "behaviour"


def unlike_comparisons(spec: SweepConfig, plan: Plan | None = None) -> list[str]:
    """Warnings for a comparison of unlike variants: some use the recorded (behaviour)
    critic and others the learner's, or some run their algorithm's tuned values
    (`AlgorithmSpec.tuned`) and others not. One line each, naming the variants (`plan`:
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
                   "(learning rate, entropy, epochs, minibatches, its own tuned options) "
                   "while the other variants do; give every variant the same tuning budget, or "
                   "name the difference.")
    return out


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
    folder = RunFolder(cell_dir)
    if folder.done.exists() and folder.metrics.exists():
        return "done"
    return "failed" if folder.failed.exists() else "todo"


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
    from jaxvaco.core.guard import NonFiniteError

    validate_sweep(spec)
    directory = Path(spec.results_dir) / spec.name
    plan = plan or plan_sweep(spec, only)
    directory.mkdir(parents=True, exist_ok=True)
    sweep = SweepFolder(directory)
    write_json(sweep.spec, dataclasses.asdict(spec))
    result = SweepResult(directory, [], [], {})
    for i, (cell, config, grid) in enumerate(plan):
        folder = sweep.cell(cell.name)
        cell_dir = folder.path
        state = cell_state(cell_dir)
        if state != "todo":
            if state == "done":
                check_unchanged(cell_dir, config)
            else:
                result.failed[cell.name] = folder.failed.read_text()
            result.skipped.append(cell.name)
            continue
        print(f"[{i + 1}/{len(plan)}] {cell.name}", flush=True)
        resume = cell_dir if folder.config.exists() else None
        result.ran.append(cell.name)
        t0 = time.perf_counter()
        try:
            outcome = run(config, grid, control, resume=resume)
        except NonFiniteError as error:
            result.seconds += time.perf_counter() - t0
            folder.failed.write_text(str(error))
            result.failed[cell.name] = str(error)
            continue
        result.seconds += time.perf_counter() - t0
        result.compile_seconds += float(outcome.summary["compile_time"])
        if outcome.stop_signal:
            result.stop_signal = outcome.stop_signal
            break
        write_json(folder.done, {k: np.asarray(v).tolist()
                                 for k, v in outcome.summary.items()})
        write_sweep_table(directory, [c for c, _, _ in plan])
    write_sweep_table(directory, [c for c, _, _ in plan])
    return result


def write_sweep_table(directory: Path, sweep_cells: list[Cell]) -> Path:
    """results.csv from every complete cell (atomically replaced)."""
    sweep = SweepFolder(directory)
    cell_dirs = [(sweep.cell(cell.name).path, cell.label) for cell in sweep_cells]
    rows = [row for cell_dir, label in cell_dirs if cell_state(cell_dir) == "done"
            for row in tidy_rows(cell_dir, label)]
    return write_results(sweep.results, rows)

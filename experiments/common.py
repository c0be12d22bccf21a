"""Shared plumbing of the experiment scripts. An experiment is a sweep spec
(experiments/sweeps/*.toml, `jaxvaco.lab.sweep`): `experiment_spec` loads it with the
script's command-line choices (envs, seeds, steps, variants, output folder) and `run_spec`
runs its cells, each a named variant (or algorithm) on one env with the lag K (and any
other hyperparameter) vmapped beside the seeds, then appends each finished cell's rows
to the experiment's results CSV (`jaxvaco.lab.results.write_results`, the one results schema
of docs/results_schema.md). (env, variant) pairs the CSV already holds are not run again,
so a killed script resumes where it stopped; the rows already there keep their values (a
committed CSV written before the schema is rewritten in it once, at its first append).

The sweep lives in ``<out>/runs/<spec name>/`` (ignored by git): a cell interrupted midway
resumes from its newest checkpoint, and a finished one (DONE) is not trained again. As a
safety net for long runs (we met an XLA CPU runtime hang, now avoided in
`compiled.Compiled`), `hang_watchdog` ends the process with HANG_EXIT_CODE when it has used
no CPU for a while, and the script's `--retry-hangs` loop (`parse_with_retries`) starts it
again, which resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from jaxvaco.core.config import ConfigError, TrainConfig, with_overrides
from jaxvaco.lab.results import done_keys, tidy_rows, write_results
from jaxvaco.lab.sweep import (
    SweepConfig,
    cell_state,
    cells,
    load_sweep_file,
    run_sweep,
    validate_sweep,
)

SWEEPS = Path(__file__).resolve().parent / "sweeps"
HANG_EXIT_CODE = 75


PRE_TUNING_DEFAULTS = {"update_epochs": 4, "num_minibatches": 4, "learning_rate": 2e-3,
                       "clip_coef": 0.2, "ent_coef": 0.01, "ppo.critic": "behaviour",
                       "ppo_kl.critic": "behaviour", "ppo_kl.target_kl": 0.01,
                       "spo.critic": "behaviour", "vaco.delta": 0.2}
"""TrainConfig's defaults before issue 30 made each algorithm's tuned values and the
learner's critic the defaults: the experiments that ran under them pin them."""


def pre_tuning_config(**fields) -> TrainConfig:
    """TrainConfig(**fields) with `PRE_TUNING_DEFAULTS` for what `fields` leaves out."""
    pinned = {k: v for k, v in PRE_TUNING_DEFAULTS.items() if k.split(".")[0] not in fields}
    return with_overrides(TrainConfig(**fields), pinned, "PRE_TUNING_DEFAULTS")


def experiment_spec(path: Path, out: Path, envs: Sequence[str] | None = None,
                    seeds: int | None = None, steps: int | None = None,
                    variants: Sequence[str] | None = None,
                    algos: Sequence[str] | None = None) -> SweepConfig:
    """The sweep of an experiment's spec file, run under `out`/runs; `envs` (any env, in
    place of the spec's), `seeds`, `steps` (env steps per run in every env, in place of
    the spec's budgets), `variants` (a subset of the spec's, by name) and `algos` (in
    place of the spec's) when given."""
    spec = load_sweep_file(path)
    base = spec.base if seeds is None else dataclasses.replace(spec.base, num_seeds=seeds)
    overrides = spec.env_overrides
    if steps is not None:
        base = dataclasses.replace(base, total_timesteps=steps)
        overrides = {env: {k: v for k, v in options.items() if k != "total_timesteps"}
                     for env, options in overrides.items()}
    chosen = spec.variants
    if variants is not None:
        unknown = [name for name in variants if name not in spec.variants]
        if unknown:
            raise ConfigError(f"{path}: no variant {unknown[0]!r}; the variants are "
                              f"{', '.join(map(repr, spec.variants))}.")
        chosen = {name: spec.variants[name] for name in variants}
    spec = dataclasses.replace(spec, results_dir=str(out / "runs"), base=base,
                               env_overrides=overrides, variants=chosen,
                               envs=tuple(envs) if envs else spec.envs,
                               algos=tuple(algos) if algos else spec.algos)
    return validate_sweep(spec, str(path))


def run_spec(spec: SweepConfig, csv_path: Path) -> None:
    """Run the cells of `spec` whose (env, variant) `csv_path` does not hold yet, then
    add each finished one's rows to it (in the order of the cells)."""
    done = done_keys(csv_path, ("env", "variant"))
    todo = []
    for cell in cells(spec):
        if (cell.env, cell.label) in done:
            print(f"skip {cell.env} {cell.label}: already in {csv_path}")
        else:
            todo.append(cell)
    result = run_sweep(spec, only=todo)
    if result.ran:
        print(result.compile_share(), flush=True)
    if result.stop_signal:  # interrupted: the checkpoint is saved, the rows are incomplete
        sys.exit(128 + result.stop_signal)
    for cell in todo:
        cell_dir = result.directory / "runs" / cell.name
        if cell_state(cell_dir) == "done":
            write_results(csv_path, tidy_rows(cell_dir, cell.label), append=True)
    if result.failed:
        sys.exit(f"{len(result.failed)} cells diverged (FAILED markers in "
                 f"{result.directory / 'runs'}): " + "; ".join(result.failed))


def hang_watchdog(idle_seconds: float = 180.0, period: float = 30.0) -> None:
    """Exit with HANG_EXIT_CODE if this process uses < 1 s of CPU in `idle_seconds`."""

    def watch():
        history = []
        while True:
            time.sleep(period)
            history = (history + [time.process_time()])[-int(idle_seconds / period) - 1:]
            if len(history) > idle_seconds / period and history[-1] - history[0] < 1.0:
                print(f"watchdog: no CPU progress in {idle_seconds:.0f} s, exiting to retry",
                      file=sys.stderr, flush=True)
                os._exit(HANG_EXIT_CODE)

    threading.Thread(target=watch, daemon=True).start()


def parse_with_retries(parser: argparse.ArgumentParser, module: str) -> argparse.Namespace:
    """Parse the script's arguments, adding --retry-hangs.

    With --retry-hangs the script reruns itself as `python -m module` in a child process,
    restarted (and so resumed) while it exits with HANG_EXIT_CODE; this process then exits
    with the child's code. Otherwise it starts `hang_watchdog` and returns the arguments.
    """
    parser.add_argument("--retry-hangs", action="store_true",
                        help="run in a child process, restarted (resuming) if it hangs")
    args = parser.parse_args()
    if args.retry_hangs:
        argv = [a for a in sys.argv[1:] if a != "--retry-hangs"]
        for _ in range(5):
            code = subprocess.call([sys.executable, "-m", module, *argv])
            if code != HANG_EXIT_CODE:
                break
        sys.exit(code)
    hang_watchdog()
    return args

"""`run`: train every run of a configuration (seeds × grid) as one program, in a run folder.

The public entry. `run(config, grid, control, resume)` checks everything that can be
checked before a folder is made (`check_before_start`), opens the run folder
(`jaxvaco.host.run_dir.open_run`: a fresh one, or the one it resumes), builds the RL trainer's
programs over the runs (`jaxvaco.host.compiled.Compiled`, with the runs of
`jaxvaco.host.grid.expand_runs` bound as a `RunsTrainer`), lets the host loop
(`jaxvaco.host.session.Session`) train them, and returns a `RunResult`.

`run(config, resume=run_dir)` continues from the newest checkpoint of a run; chunks are
deterministic, so the result is bit-identical to a run that was never interrupted.

For benchmarks and loops of one's own, the pieces `run` is built from are public here too:
`make_train(config)` (the pure trainer functions), `expand_runs(config, grid)` (the runs'
labels, keys and stacked hyperparameters) and `Compiled(trainer)` (the jitted entry points,
vmapped over runs); `RunControl` sets checkpointing.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import numpy as np

from jaxvaco.core import distributed
from jaxvaco.core.config import ConfigError, TrainConfig, to_dict
from jaxvaco.core.memory import validate_memory
from jaxvaco.core.train import TrainState, make_train
from jaxvaco.core.validation import validate
from jaxvaco.host.checkpoint import Checkpointer, write_failure
from jaxvaco.host.compilation import COMPILE_CLOCK, Stopwatch, configure_cache
from jaxvaco.host.compiled import Compiled
from jaxvaco.host.grid import expand_runs, grid_combinations, validate_grid
from jaxvaco.host.rows import summarize
from jaxvaco.host.run_dir import Grid, RunControl, grid_as_json, load_run_control, open_run
from jaxvaco.host.run_folder import RunFolder
from jaxvaco.host.runs_trainer import RunsTrainer
from jaxvaco.host.session import Schedule, Session

TARGET_CHUNKS = 20


@dataclasses.dataclass
class RunResult:
    config: TrainConfig
    run_dir: Path
    runs: list[dict]  # per run: its seed and hyperparameter overrides
    state: TrainState  # final state, every leaf with a leading [num_runs] axis
    rows: list[dict]  # what metrics.jsonl holds
    summary: dict[str, np.ndarray]  # per-run final figures
    stop_signal: int = 0  # 0: trained to the end; else the signal that stopped it early
    already_complete: bool = False  # resumed at its end: nothing was trained

    def table(self) -> list[dict]:
        """One row per run: env, algo, K (the run's lag), seed, every other swept value, and
        the run's final figures (train_return: the last chunk's mean training episode
        return; eval/greedy_return and eval/stochastic_return: the last evaluation; env
        steps), ready for pandas.DataFrame or `jaxvaco.lab`."""
        num_runs = len(self.runs)
        per_run = {name: np.asarray(values) for name, values in self.summary.items()
                   if np.ndim(values) == 1 and len(values) == num_runs}
        rows = []
        for r, labels in enumerate(self.runs):
            swept = {k: v for k, v in labels.items() if k not in ("seed", "lag_delay")}
            k = labels.get("lag_delay", self.config.lag.max_delay)
            rows.append({"env": self.config.env, "algo": self.config.algo, "K": int(k),
                         "seed": labels["seed"], **swept,
                         **{name: values[r].item() for name, values in per_run.items()}})
        return rows


def chunk_length(config: TrainConfig) -> int:
    """Iterations per compiled chunk: the configured value, else about 20 chunks a run."""
    if config.chunk_iterations:
        return min(config.chunk_iterations, config.num_iterations)
    return max(1, math.ceil(config.num_iterations / TARGET_CHUNKS))


def schedule(config: TrainConfig) -> Schedule:
    return Schedule(config.num_iterations, chunk_length(config), config.eval.every_chunks,
                    config.batch_size)


def check_before_start(config: TrainConfig, grid: Grid | None) -> TrainConfig:
    """Everything that can be checked before a run folder is made: the configuration, every
    grid value, the devices asked for, and memory for the largest arrays. Returns the
    config with its algorithm's tuned values where shared options were left at None."""
    config = validate(config)
    validate_grid(config, grid or {})
    if config.asynchronous.enabled and len(grid_combinations(grid)) > 1:
        raise ConfigError("--asynchronous.enabled trains one run: drop the grid (--grid/"
                          "--sweep) or turn --asynchronous.enabled off.")
    distributed.check_device_count(config)
    validate_memory(config, config.num_seeds * len(grid_combinations(grid)))
    return config


def replay_delays(config: TrainConfig) -> np.ndarray | None:
    """The recorded delays of --lag.mode replay (the run folder's lag schedule), else None."""
    if config.lag.mode != "replay":
        return None
    from jaxvaco.host.asynchronous.schedule import read_delays

    return read_delays(config.lag.replay)


def open_session(config: TrainConfig, grid: Grid | None, run_dir: Path,
                 store: Checkpointer | None, control: RunControl, cache_dir: Path | None,
                 started: float, watch: Stopwatch) -> Session:
    """The runs (recorded in runs.json), their compiled programs and the host loop."""
    runs, keys, hp = expand_runs(config, grid)
    RunFolder(run_dir).write_runs(grid_as_json(grid), runs)
    layout = distributed.layout(config)  # decided once: the trainer and its programs share it
    trainer = make_train(config, layout, replay_delays(config))
    record = {"config": to_dict(config), "grid": grid_as_json(grid)}
    if config.asynchronous.enabled:
        from jaxvaco.host.asynchronous.trainer import AsyncTrainer

        looped = AsyncTrainer(Compiled(trainer, None, layout), keys, hp, runs,
                              setup=trainer.setup, run_dir=run_dir)
    else:
        looped = RunsTrainer(Compiled(trainer, cache_dir, layout), keys, hp, runs)
    return Session(run_dir, runs, looped, schedule(config), store, control, record,
                   started=started, watch=watch)


def compile_figures(started: float) -> dict[str, np.ndarray]:
    """Seconds spent compiling since `started`, programs compiled, compilation-cache hits."""
    stats = COMPILE_CLOCK.stats(started)
    return {"compile_time": np.array(stats.seconds),
            "compiled_programs": np.array(stats.programs),
            "cache_hits": np.array(stats.cache_hits)}


def run(config: TrainConfig, grid: Grid | None = None, control: RunControl | None = None,
        resume: str | Path | None = None, allow_changes: bool = False) -> RunResult:
    """Train every run (seeds × grid) in one program; write config.json and metrics.jsonl.

    With `resume` (a run directory), continue its newest checkpoint: `config` and `grid`
    must match what it was started with (see `resume_run_dir`; `allow_changes` accepts new
    hyperparameter values); grid None = the saved one, control None = the saved one.
    Returns early, with `stop_signal` set and a checkpoint saved, on SIGINT or SIGTERM.
    Raises RunAlreadyComplete when resuming a finished run that has no checkpoint.
    """
    from jaxvaco.host.progress import Progress, print_summary

    resume = None if resume is None else Path(resume)
    control = control or (load_run_control(resume) if resume else RunControl())
    COMPILE_CLOCK.start()
    started, watch = time.time(), Stopwatch()
    cache_dir = configure_cache(control.compilation_cache)  # first: validating may compile
    config = check_before_start(config, grid)
    if control.checkpoint_every < 0 or control.keep_checkpoints < 0:
        raise ConfigError("--checkpoint-every and --keep-checkpoints must be >= 0.")
    config, grid, run_dir, store = open_run(config, grid, control, resume, allow_changes)
    session = None
    try:
        session = open_session(config, grid, run_dir, store, control, cache_dir, started, watch)
        state, loop, rows = session.start(resume is not None)
        already_complete = loop.iteration >= config.num_iterations
        watch.add("setup", started)
        progress = Progress(config, enabled=config.progress)
        state, loop, stop_signal = session.train(state, loop, rows, progress)
    except OSError as error:  # a full disk or lost permissions while writing results
        steps = store.steps() if store is not None else []
        raise write_failure(f"{getattr(error, 'filename', None) or 'the results'}", error,
                            run_dir, steps) from error
    finally:
        if session is not None:
            session.trainer.close()
        if store is not None:
            watch.add("checkpoint", (time.time(), store.close())[0])
    runs = session.runs
    summary = {**summarize(rows, loop, len(runs), config.batch_size), **compile_figures(started)}
    if not already_complete:  # a finished run's files stay as they were
        session.write_timings()
    if config.progress and not stop_signal:
        print_summary(config, run_dir, runs, summary)
    return RunResult(config, run_dir, runs, state, rows, summary, stop_signal, already_complete)

"""The host loop: runs compiled chunks, owns progress, metrics, checkpoints and stopping.

Nothing here runs inside jit. A program holds R runs side by side (one `jax.vmap`):
the seeds, times every combination of the hyperparameter values in `grid` (any
`Hyperparams` field: learning rate, δ, γ, λ, coefficients, the lag K up to
`lag.max_delay`). Each chunk returns metrics summed over its iterations for every run;
after each chunk the loop

1. checks that the losses, gradient norms and parameters are finite (else it stops with
   `NonFiniteError` naming the run and the first bad iteration, found by replaying the
   chunk one iteration at a time from the last good state);
2. evaluates the policy every `eval.every_chunks` chunks and at the end;
3. writes one row per run to metrics.jsonl (and TensorBoard / W&B when asked) and draws
   progress;
4. saves a checkpoint every `RunControl.checkpoint_every` chunks, at the end, and when
   SIGINT or SIGTERM asked it to stop (it then returns at this chunk boundary).

`run(config, resume=run_dir)` continues from the newest checkpoint of a run; chunks are
deterministic, so the result is bit-identical to a run that was never interrupted.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import signal
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco import distributed
from jaxvaco.checkpoint import (
    Checkpointer,
    write_failure,
)
from jaxvaco.compilation import COMPILE_CLOCK, Stopwatch, configure_cache
from jaxvaco.config import ConfigError, RunFileError, TrainConfig, to_dict
from jaxvaco.hparams import Hyperparams, hyperparams_from_config
from jaxvaco.programs import ProgramCache
from jaxvaco.run_dir import (
    Grid,
    RunControl,
    grid_as_json,
    load_run_control,
    open_run,
    set_aside_results,
    write_json,
)
from jaxvaco.sinks import Sinks, open_sinks, read_rows
from jaxvaco.train import Trainer, TrainState, make_train
from jaxvaco.validation import validate, validate_grid_values, validate_memory

TARGET_CHUNKS = 20
GUARDED_METRICS = ("loss/", "grad_norm")
"""Metric names (prefixes) that must stay finite; the parameters are checked as well."""


class NonFiniteError(RuntimeError):
    """A loss, gradient norm or parameter became NaN or infinite."""


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
        steps), ready for pandas.DataFrame or `jaxvaco.analysis`."""
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


@dataclasses.dataclass
class LoopState:
    """The host loop's counters, saved with every checkpoint to continue exactly."""

    chunk: int = 0
    iteration: int = 0
    metrics_bytes: int = 0  # length of metrics.jsonl at this point
    wall_time: float = 0.0
    train_time: float = 0.0  # seconds in chunks, without each session's compiling chunk
    timed_steps: int = 0  # env steps of all runs done in train_time
    latest_eval: dict[str, list[float]] = dataclasses.field(default_factory=dict)


def chunk_length(config: TrainConfig) -> int:
    """Iterations per compiled chunk: the configured value, else about 20 chunks a run."""
    if config.chunk_iterations:
        return min(config.chunk_iterations, config.num_iterations)
    return max(1, math.ceil(config.num_iterations / TARGET_CHUNKS))


def grid_combinations(grid: Grid | None) -> list[dict[str, float]]:
    """The grid's combinations in order ([{}] for no grid)."""
    if isinstance(grid, list):
        return [dict(combo) for combo in grid]
    grid = grid or {}
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def validate_grid(config: TrainConfig, grid: Grid) -> None:
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


def check_before_start(config: TrainConfig, grid: Grid | None) -> TrainConfig:
    """Everything that can be checked before a run folder is made: the configuration, every
    grid value, the devices asked for, and memory for the largest arrays. Returns the
    config with its algorithm's tuned values where shared options were left at None."""
    config = validate(config)
    validate_grid(config, grid or {})
    distributed.check_device_count(config)
    validate_memory(config, config.num_seeds * len(grid_combinations(grid)))
    return config


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


def chunk_rows(sums: dict[str, np.ndarray], n_iter: int, info: dict[str, Any],
               runs: list[dict]) -> list[dict]:
    """One row per run from metrics summed over n_iter iterations."""
    rows = []
    for r, run in enumerate(runs):
        row = dict(info, run=r, **run)
        for name, values in sums.items():
            if not name.startswith("episode/"):
                row[name] = float(values[r]) / n_iter
        count = float(sums["episode/count"][r])
        row["episode/count"] = count
        row["episode/return"] = float(sums["episode/return_sum"][r]) / count if count else None
        row["episode/length"] = float(sums["episode/length_sum"][r]) / count if count else None
        rows.append(row)
    return rows


class Compiled:
    """The jitted entry points of a Trainer, vmapped over runs (keys and hyperparameters)."""

    def __init__(self, trainer: Trainer, cache_dir: Path | None = None):
        """With `cache_dir` (single device only), the traced programs are kept there
        (`jaxvaco.programs.ProgramCache`)."""
        sharding = distributed.runs_sharding(trainer.config)  # runs over devices, or None
        single_device = sharding is None and distributed.env_axis(trainer.config) is None
        programs = None if cache_dir is None or not single_device else ProgramCache(
            cache_dir, trainer.config, (trainer.init, trainer.train_chunk, trainer.evaluate))

        def jit(name: str, function: Any, **options: Any) -> Any:
            if programs is not None:
                return programs.jit(name, function)
            return jax.jit(function, **options)

        shard = {} if sharding is None else {"out_shardings": sharding}
        # lax.map, not vmap: executing the vmapped init (orthogonal initialisers, batched
        # over many runs) deterministically hung XLA's CPU runtime here (e.g. 80 runs).
        self.init = jit("init", lambda keys, hp: jax.lax.map(lambda run: trainer.init(*run),
                                                             (keys, hp)), **shard)
        self.chunk = jit("chunk", jax.vmap(trainer.train_chunk, in_axes=(0, 0, None)))
        self.evaluate = jit("evaluate", jax.vmap(trainer.evaluate, in_axes=(0, 0, None)))
        self.finite = jit("finite", jax.vmap(all_finite))
        self.programs = programs

    def compile_ahead(self, keys: jax.Array, hp: Hyperparams) -> TrainState | None:
        """With the program cache: start compiling all four programs now, side by side
        (`jaxvaco.programs.Program.compile_ahead`), and return the state's
        ShapeDtypeStructs; without it, None (jit compiles each on its first call)."""
        state = None if self.programs is None else self.init.compile_ahead(keys, hp)
        if state is None:
            return None
        self.chunk.compile_ahead(state, hp, jnp.int32(1))
        self.evaluate.compile_ahead(state, keys, True)
        self.finite.compile_ahead(state.params)
        return state


def evaluate_policy(compiled: Compiled, state: TrainState, iteration: int, runs: list[dict]
                    ) -> dict[str, np.ndarray]:
    """Greedy and stochastic evaluation returns, mean over episodes, per run.

    The episodes depend only on the run's seed and the iteration, so runs that differ
    only in a swept hyperparameter are evaluated on the same episodes.
    """
    keys = eval_keys(iteration, runs)
    out = {}
    for mode, greedy in (("greedy", True), ("stochastic", False)):
        returns = np.asarray(compiled.evaluate(state, keys, greedy))
        out[f"eval/{mode}_return"] = returns.mean(axis=1)
    return out


def eval_keys(iteration: int, runs: list[dict], base_seed: int | None = None) -> jax.Array:
    """The evaluation keys of every run [R]: `fold_in(PRNGKey(10_000 + iteration), seed)`
    with the run's seed (`base_seed` replaces 10_000 + iteration: other episodes, as
    `jaxvaco eval --seed` draws them)."""
    base = jax.random.PRNGKey(10_000 + iteration if base_seed is None else base_seed)
    seeds = jnp.asarray([run["seed"] for run in runs])
    return jax.vmap(lambda seed: jax.random.fold_in(base, seed))(seeds)


def all_finite(tree: Any) -> jax.Array:
    """True when every element of every leaf is finite."""
    return jnp.all(jnp.stack([jnp.isfinite(x).all() for x in jax.tree.leaves(tree)]))


def nonfinite(sums: dict[str, np.ndarray], params_finite: np.ndarray) -> dict[int, list[str]]:
    """Per run that went wrong: the guarded metrics that are not finite, and "params"."""
    problems: dict[int, list[str]] = {}
    for name, values in sums.items():
        if name.startswith(GUARDED_METRICS):
            for r in np.flatnonzero(~np.isfinite(values)):
                problems.setdefault(int(r), []).append(name)
    for r in np.flatnonzero(~params_finite):
        problems.setdefault(int(r), []).append("params")
    return problems


def check_chunk(compiled: Compiled, state: TrainState, sums: dict[str, np.ndarray]
                ) -> dict[int, list[str]]:
    return nonfinite(sums, np.asarray(compiled.finite(state.params)))


def locate_nonfinite(compiled: Compiled, good: TrainState, hp: Hyperparams, n: int
                     ) -> tuple[int, dict[int, list[str]]] | None:
    """Replay up to n iterations one at a time from a good state: the first bad one.

    Chunks are deterministic, so this finds the iteration the chunk went wrong in; None
    if the replay stays finite (it should not).
    """
    state = good
    for _ in range(n):
        state, sums = compiled.chunk(state, hp, jnp.int32(1))
        problems = check_chunk(compiled, state, jax.tree.map(np.asarray, sums))
        if problems:
            return int(state.iteration[0]), problems
    return None


def describe_runs(problems: dict[int, list[str]], runs: list[dict]) -> str:
    """E.g. "run 1 (seed 0, learning_rate=inf): loss/policy, params"."""
    parts = []
    for r, names in problems.items():
        labels = ", ".join(f"{k}={v}" if k != "seed" else f"seed {v}" for k, v in runs[r].items())
        parts.append(f"run {r} ({labels}): {', '.join(names)}")
    return "; ".join(parts)


class StopSignals:
    """Within `with`: SIGINT/SIGTERM ask the loop to stop at the next chunk boundary.

    `signal` holds the signal received (0: none). A second signal acts as it would
    without this (KeyboardInterrupt, termination). Only installed in the main thread.
    """

    def __enter__(self) -> StopSignals:
        self.signal = 0
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.signal = signum
        self._restore()

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def __exit__(self, *exc) -> None:
        self._restore()


@dataclasses.dataclass
class Session:
    """One process's share of a run: compiled programs, checkpoints and sinks."""

    config: TrainConfig
    run_dir: Path
    runs: list[dict]
    hp: Hyperparams
    compiled: Compiled
    store: Checkpointer | None
    control: RunControl
    record: dict = dataclasses.field(default_factory=dict)  # config and grid, per checkpoint
    sinks: Sinks | None = None
    started: float = 0.0  # time.time() when the run began: compile time is counted from it
    watch: Stopwatch = dataclasses.field(default_factory=Stopwatch)

    def start(self, keys: jax.Array, resume: bool) -> tuple[TrainState, LoopState, list[dict]]:
        """The newest checkpoint's state when resuming and there is one, else a fresh one."""
        restored = None
        state_type = self.compiled.compile_ahead(keys, self.hp)
        if resume and self.store is not None:
            restored = self.store.restore(state_type or jax.eval_shape(self.compiled.init,
                                                                        keys, self.hp))
        if restored is None:
            if resume and not set_aside_results(self.run_dir):
                warnings.warn(f"No checkpoint in {self.run_dir}: starting from the beginning.",
                              stacklevel=3)
            return self.compiled.init(keys, self.hp), LoopState(), []
        _, state, host = restored
        loop = LoopState(**host)
        return state, loop, self.checkpointed_rows(loop)

    def checkpointed_rows(self, loop: LoopState) -> list[dict]:
        """The rows of metrics.jsonl up to the checkpoint (RunFileError if it lost some)."""
        path = self.run_dir / "metrics.jsonl"
        size = path.stat().st_size if path.exists() else 0
        if size < loop.metrics_bytes:
            raise RunFileError(f"{path} holds {size} bytes, fewer than the {loop.metrics_bytes} "
                               f"it held at the checkpoint of iteration {loop.iteration}: it was "
                               "truncated or replaced. Restore it, or start a new run.")
        return read_rows(path, loop.metrics_bytes)

    def open_sinks(self, loop: LoopState, resumed: bool) -> Sinks:
        resume = (loop.metrics_bytes, loop.iteration * self.config.batch_size) if resumed else None
        self.sinks = open_sinks(self.run_dir, to_dict(self.config), self.runs,
                                tensorboard=self.control.tensorboard, wandb=self.control.wandb,
                                wandb_project=self.control.wandb_project, resume=resume)
        return self.sinks

    def save(self, state: TrainState, loop: LoopState) -> None:
        """Checkpoint (state, loop) unless disabled or already saved at this iteration."""
        if self.store is None or self.store.last_saved == loop.iteration:
            return
        t0 = time.time()
        loop.metrics_bytes = self.sinks.jsonl.sync()
        self.store.save(loop.iteration, state, dataclasses.asdict(loop), self.record)
        self.watch.add("checkpoint", t0)

    def checkpoint_due(self, loop: LoopState) -> bool:
        every = self.control.checkpoint_every
        return loop.iteration == self.config.num_iterations or (
            every > 0 and loop.chunk % every == 0)

    def chunk(self, state: TrainState, loop: LoopState, clock: float, timed: bool
              ) -> tuple[TrainState, LoopState, list[dict], dict]:
        """Run one chunk, guard it, evaluate when due; the new state, counters, rows, info."""
        config = self.config
        n = min(chunk_length(config), config.num_iterations - loop.iteration)
        t_chunk = time.time()
        t0 = time.perf_counter()
        new_state, sums = self.compiled.chunk(state, self.hp, jnp.int32(n))
        sums = jax.tree.map(np.asarray, sums)
        elapsed = time.perf_counter() - t0
        problems = check_chunk(self.compiled, new_state, sums)
        t_eval = self.watch.add("train", t_chunk)
        if problems:
            self.fail(state, loop, n, problems)
        loop = dataclasses.replace(loop, chunk=loop.chunk + 1, iteration=loop.iteration + n,
                                   wall_time=loop.wall_time + time.perf_counter() - clock)
        if timed:  # the first chunk of a session includes compilation
            loop.train_time += elapsed
            loop.timed_steps += n * config.batch_size * len(self.runs)
        info = {"chunk": loop.chunk, "iteration": loop.iteration,
                "env_steps": loop.iteration * config.batch_size,
                "sps": n * config.batch_size * len(self.runs) / elapsed,
                "wall_time": loop.wall_time,
                "compile_time": COMPILE_CLOCK.stats(self.started).seconds}
        evaluate_now = loop.iteration == config.num_iterations or (
            config.eval.every_chunks and loop.chunk % config.eval.every_chunks == 0)
        if evaluate_now:
            latest = evaluate_policy(self.compiled, new_state, loop.iteration, self.runs)
            loop.latest_eval = {k: v.tolist() for k, v in latest.items()}
            self.watch.add("evaluate", t_eval)
        rows = chunk_rows(sums, n, info, self.runs)
        for r, row in enumerate(rows):
            if evaluate_now:
                row.update({k: v[r] for k, v in loop.latest_eval.items()})
        return new_state, loop, rows, info

    def fail(self, good: TrainState, loop: LoopState, n: int, problems: dict) -> None:
        """Save the last good state, then raise NonFiniteError naming runs and iteration."""
        if loop.iteration:
            self.save(good, loop)
        found = locate_nonfinite(self.compiled, good, self.hp, n)
        if found:
            where, problems = f"iteration {found[0]}", found[1]
        else:
            where = f"iterations {loop.iteration + 1}..{loop.iteration + n}"
        kept = (f"last good checkpoint: iteration {self.store.last_saved} in "
                f"{self.store.directory}" if self.store and self.store.last_saved is not None
                else "no checkpoint was saved")
        raise NonFiniteError(f"Non-finite values in {where} of {self.run_dir}: "
                             f"{describe_runs(problems, self.runs)}. Training stopped; {kept}.")


def run(config: TrainConfig, grid: Grid | None = None, control: RunControl | None = None,
        resume: str | Path | None = None, allow_changes: bool = False) -> RunResult:
    """Train every run (seeds × grid) in one program; write config.json and metrics.jsonl.

    With `resume` (a run directory), continue its newest checkpoint: `config` and `grid`
    must match what it was started with (see `resume_run_dir`; `allow_changes` accepts new
    hyperparameter values); grid None = the saved one, control None = the saved one.
    Returns early, with `stop_signal` set and a checkpoint saved, on SIGINT or SIGTERM.
    Raises RunAlreadyComplete when resuming a finished run that has no checkpoint.
    """
    from jaxvaco.progress import Progress, print_summary

    resume = None if resume is None else Path(resume)
    control = control or (load_run_control(resume) if resume else RunControl())
    COMPILE_CLOCK.start()
    started, watch = time.time(), Stopwatch()
    cache_dir = configure_cache(control.compilation_cache)  # first: validating may compile
    config = check_before_start(config, grid)
    if control.checkpoint_every < 0 or control.keep_checkpoints < 0:
        raise ConfigError("--checkpoint-every and --keep-checkpoints must be >= 0.")
    config, grid, run_dir, store = open_run(config, grid, control, resume, allow_changes)
    try:
        runs, keys, hp = expand_runs(config, grid)
        write_json(run_dir / "runs.json", {"grid": grid_as_json(grid), "runs": runs})
        compiled = Compiled(make_train(config), cache_dir)
        record = {"config": to_dict(config), "grid": grid_as_json(grid)}
        session = Session(config, run_dir, runs, hp, compiled, store, control, record,
                          started=started, watch=watch)
        state, loop, rows = session.start(keys, resume is not None)
        already_complete = loop.iteration >= config.num_iterations
        watch.add("setup", started)
        clock = time.perf_counter()
        with Progress(config, enabled=config.progress) as progress, \
                session.open_sinks(loop, resumed=loop.chunk > 0) as sinks, StopSignals() as stop:
            timed = False
            while loop.iteration < config.num_iterations and not stop.signal:
                state, loop, new_rows, info = session.chunk(state, loop, clock, timed)
                clock, timed = time.perf_counter(), True
                sinks.write(new_rows, info)
                rows.extend(new_rows)
                progress.update(new_rows, info)
                if session.checkpoint_due(loop):
                    session.save(state, loop)
            if stop.signal:  # also when it arrived after the last chunk's checkpoint check
                session.save(state, loop)
    except OSError as error:  # a full disk or lost permissions while writing results
        steps = store.steps() if store is not None else []
        raise write_failure(f"{getattr(error, 'filename', None) or 'the results'}", error,
                            run_dir, steps) from error
    finally:
        if store is not None:
            watch.add("checkpoint", (time.time(), store.close())[0])
    summary = summarize(rows, loop, len(runs), config.batch_size)
    compile_stats = COMPILE_CLOCK.stats(started)
    summary.update(compile_time=np.array(compile_stats.seconds),
                   compiled_programs=np.array(compile_stats.programs),
                   cache_hits=np.array(compile_stats.cache_hits))
    if not already_complete:  # a finished run's files stay as they were
        write_json(run_dir / "timings.json", {  # where the seconds went (experiments/startup.py)
            "started": started, "finished": time.time(), "phases": watch.report(COMPILE_CLOCK),
            "compile": dataclasses.asdict(compile_stats)})
    if config.progress and not stop.signal:
        print_summary(config, run_dir, runs, summary)
    return RunResult(config, run_dir, runs, state, rows, summary, stop.signal, already_complete)


def summarize(rows: list[dict], loop: LoopState, num_runs: int, batch_size: int
              ) -> dict[str, np.ndarray]:
    """Per-run final train return (last chunk with episodes), eval returns, throughput."""
    final_train = np.full(num_runs, np.nan)
    for row in rows:
        if row["episode/return"] is not None:
            final_train[row["run"]] = row["episode/return"]
    return {
        "train_return": final_train,
        **{k: np.asarray(v) for k, v in loop.latest_eval.items()},
        "env_steps": np.full(num_runs, loop.iteration * batch_size),
        "sps": np.array(loop.timed_steps / loop.train_time if loop.train_time else np.nan),
    }

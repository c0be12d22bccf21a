"""The host loop: runs compiled chunks, owns progress, metrics, checkpoints and stopping.

Nothing here runs inside jit, and nothing here knows what is trained: a `Session` drives
any trainer that follows the `LoopTrainer` protocol (R runs side by side, their state a
pytree whose leaves have a leading [R] axis):

- ``prepare()``: optionally start compiling the programs now (a head start);
- ``init()``: a fresh state of every run;
- ``abstract_state()``: the state's ShapeDtypeStructs, to restore a checkpoint into;
- ``chunk(state, n)``: n iterations; the new state and the metrics summed over them,
  {name: [R]} as numpy arrays;
- ``finite(state)``: [R] bools, True where a run's parameters are all finite;
- ``evaluate(state, iteration)``: per-run evaluation figures {name: [R]};
- ``rows(sums, n, info)``: one metrics row per run of a chunk (`info`: the chunk's
  counters, timings and compile time, shared by every row).

A `Schedule` says how long a run is and how it is cut into chunks. After each chunk the
loop

1. checks that the losses, gradient norms and parameters are finite (else it stops with
   `jaxvaco.core.guard.NonFiniteError` naming the run and the first bad iteration, found by
   replaying the chunk one iteration at a time from the last good state);
2. evaluates every `Schedule.eval_every_chunks` chunks and at the end;
3. writes one row per run to metrics.jsonl (and TensorBoard / W&B when asked) and draws
   progress;
4. saves a checkpoint every `RunControl.checkpoint_every` chunks, at the end, and when
   SIGINT or SIGTERM asked it to stop (it then returns at this chunk boundary).

A resumed session continues from the newest checkpoint of its run folder; chunks are
deterministic, so the result is bit-identical to a run that was never interrupted.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from jaxvaco.core.errors import RunFileError
from jaxvaco.core.guard import NonFiniteError, Problems, describe_runs, locate_nonfinite, nonfinite
from jaxvaco.host.checkpoint import Checkpointer
from jaxvaco.host.compilation import COMPILE_CLOCK, Stopwatch
from jaxvaco.host.run_dir import RunControl, set_aside_results
from jaxvaco.host.run_folder import RunFolder, read_rows, write_json
from jaxvaco.host.signals import StopSignals
from jaxvaco.host.sinks import Sinks, open_sinks


class LoopTrainer(Protocol):
    """What a `Session` drives (see the module docstring)."""

    def prepare(self) -> None: ...
    def init(self) -> Any: ...
    def abstract_state(self) -> Any: ...
    def chunk(self, state: Any, n: int) -> tuple[Any, dict[str, np.ndarray]]: ...
    def finite(self, state: Any) -> np.ndarray: ...
    def evaluate(self, state: Any, iteration: int) -> dict[str, np.ndarray]: ...
    def rows(self, sums: dict[str, np.ndarray], n: int, info: dict) -> list[dict]: ...


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How long a run is and how the host loop cuts it."""

    num_iterations: int
    chunk_iterations: int  # iterations per compiled chunk
    eval_every_chunks: int  # 0: evaluate only at the end
    steps_per_iteration: int  # env steps (samples) of one run per iteration


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


@dataclasses.dataclass
class Session:
    """One process's share of a run: the trainer, checkpoints and sinks."""

    run_dir: Path
    runs: list[dict]  # labels of each run
    trainer: LoopTrainer
    schedule: Schedule
    store: Checkpointer | None
    control: RunControl
    record: dict  # {"config": ..., "grid": ...}: kept with every checkpoint, given to W&B
    started: float = 0.0  # time.time() when the run began: compile time is counted from it
    watch: Stopwatch = dataclasses.field(default_factory=Stopwatch)
    sinks: Sinks | None = None

    def start(self, resume: bool) -> tuple[Any, LoopState, list[dict]]:
        """The newest checkpoint's state when resuming and there is one, else a fresh one;
        the loop's counters and the rows recorded so far."""
        restored = None
        self.trainer.prepare()
        if resume and self.store is not None:
            restored = self.store.restore(self.trainer.abstract_state())
        if restored is None:
            if resume and not set_aside_results(self.run_dir):
                warnings.warn(f"No checkpoint in {self.run_dir}: starting from the beginning.",
                              stacklevel=3)
            return self.trainer.init(), LoopState(), []
        _, state, host = restored
        loop = LoopState(**host)
        return state, loop, self.checkpointed_rows(loop)

    def checkpointed_rows(self, loop: LoopState) -> list[dict]:
        """The rows of metrics.jsonl up to the checkpoint (RunFileError if it lost some)."""
        path = RunFolder(self.run_dir).metrics
        size = path.stat().st_size if path.exists() else 0
        if size < loop.metrics_bytes:
            raise RunFileError(f"{path} holds {size} bytes, fewer than the {loop.metrics_bytes} "
                               f"it held at the checkpoint of iteration {loop.iteration}: it was "
                               "truncated or replaced. Restore it, or start a new run.")
        return read_rows(path, loop.metrics_bytes)

    def open_sinks(self, loop: LoopState, resumed: bool) -> Sinks:
        steps = loop.iteration * self.schedule.steps_per_iteration
        resume = (loop.metrics_bytes, steps) if resumed else None
        self.sinks = open_sinks(self.run_dir, self.record["config"], self.runs,
                                tensorboard=self.control.tensorboard, wandb=self.control.wandb,
                                wandb_project=self.control.wandb_project, resume=resume)
        return self.sinks

    def train(self, state: Any, loop: LoopState, rows: list[dict], progress: Any
              ) -> tuple[Any, LoopState, int]:
        """Chunks to the end, or to the chunk boundary after SIGINT/SIGTERM: the state, the
        counters and the signal that stopped it (0: none). New rows are appended to `rows`
        and shown by `progress` (a context manager with `update(rows, info)`)."""
        clock = time.perf_counter()
        with progress, self.open_sinks(loop, resumed=loop.chunk > 0) as sinks, \
                StopSignals() as stop:
            timed = False
            while loop.iteration < self.schedule.num_iterations and not stop.signal:
                state, loop, new_rows, info = self.chunk(state, loop, clock, timed)
                clock, timed = time.perf_counter(), True
                sinks.write(new_rows, info)
                rows.extend(new_rows)
                progress.update(new_rows, info)
                if self.checkpoint_due(loop):
                    self.save(state, loop)
            if stop.signal:  # also when it arrived after the last chunk's checkpoint check
                self.save(state, loop)
        return state, loop, stop.signal

    def save(self, state: Any, loop: LoopState) -> None:
        """Checkpoint (state, loop) unless disabled or already saved at this iteration."""
        if self.store is None or self.store.last_saved == loop.iteration:
            return
        t0 = time.time()
        loop.metrics_bytes = self.sinks.jsonl.sync()
        self.store.save(loop.iteration, state, dataclasses.asdict(loop), self.record)
        self.watch.add("checkpoint", t0)

    def checkpoint_due(self, loop: LoopState) -> bool:
        every = self.control.checkpoint_every
        return loop.iteration == self.schedule.num_iterations or (
            every > 0 and loop.chunk % every == 0)

    def evaluation_due(self, loop: LoopState) -> bool:
        every = self.schedule.eval_every_chunks
        return loop.iteration == self.schedule.num_iterations or bool(
            every and loop.chunk % every == 0)

    def check(self, state: Any, sums: dict[str, np.ndarray]) -> Problems:
        return nonfinite(sums, self.trainer.finite(state))

    def chunk(self, state: Any, loop: LoopState, clock: float, timed: bool
              ) -> tuple[Any, LoopState, list[dict], dict]:
        """Run one chunk, guard it, evaluate when due; the new state, counters, rows, info."""
        schedule = self.schedule
        n = min(schedule.chunk_iterations, schedule.num_iterations - loop.iteration)
        t_chunk = time.time()
        t0 = time.perf_counter()
        new_state, sums = self.trainer.chunk(state, n)
        elapsed = time.perf_counter() - t0
        problems = self.check(new_state, sums)
        t_eval = self.watch.add("train", t_chunk)
        if problems:
            self.fail(state, loop, n, problems)
        loop = dataclasses.replace(loop, chunk=loop.chunk + 1, iteration=loop.iteration + n,
                                   wall_time=loop.wall_time + time.perf_counter() - clock)
        steps = n * schedule.steps_per_iteration * len(self.runs)
        if timed:  # the first chunk of a session includes compilation
            loop.train_time += elapsed
            loop.timed_steps += steps
        info = {"chunk": loop.chunk, "iteration": loop.iteration,
                "env_steps": loop.iteration * schedule.steps_per_iteration,
                "sps": steps / elapsed, "wall_time": loop.wall_time,
                "compile_time": COMPILE_CLOCK.stats(self.started).seconds}
        evaluate_now = self.evaluation_due(loop)
        if evaluate_now:
            latest = self.trainer.evaluate(new_state, loop.iteration)
            loop.latest_eval = {k: v.tolist() for k, v in latest.items()}
            self.watch.add("evaluate", t_eval)
        rows = self.trainer.rows(sums, n, info)
        if evaluate_now:
            for r, row in enumerate(rows):
                row.update({k: v[r] for k, v in loop.latest_eval.items()})
        return new_state, loop, rows, info

    def fail(self, good: Any, loop: LoopState, n: int, problems: Problems) -> None:
        """Save the last good state, then raise NonFiniteError naming runs and iteration."""
        if loop.iteration:
            self.save(good, loop)
        found = locate_nonfinite(self.replay, good, loop.iteration, n)
        if found:
            where, problems = f"iteration {found[0]}", found[1]
        else:
            where = f"iterations {loop.iteration + 1}..{loop.iteration + n}"
        kept = (f"last good checkpoint: iteration {self.store.last_saved} in "
                f"{self.store.directory}" if self.store and self.store.last_saved is not None
                else "no checkpoint was saved")
        raise NonFiniteError(f"Non-finite values in {where} of {self.run_dir}: "
                             f"{describe_runs(problems, self.runs)}. Training stopped; {kept}.")

    def replay(self, state: Any) -> tuple[Any, Problems]:
        """One iteration from `state`, and what went wrong in it."""
        state, sums = self.trainer.chunk(state, 1)
        return state, self.check(state, sums)

    def write_timings(self) -> None:
        """timings.json: where the seconds went (experiments/startup.py)."""
        compile_stats = COMPILE_CLOCK.stats(self.started)
        write_json(RunFolder(self.run_dir).timings, {
            "started": self.started, "finished": time.time(),
            "phases": self.watch.report(COMPILE_CLOCK),
            "compile": dataclasses.asdict(compile_stats)})

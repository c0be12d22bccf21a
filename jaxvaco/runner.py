"""The host loop: runs compiled chunks, owns progress, metrics on disk and the summary.

Nothing here runs inside jit. A program holds R runs side by side (one `jax.vmap`):
the seeds, times every combination of the hyperparameter values in `grid` (any
`Hyperparams` field: learning rate, δ, γ, λ, coefficients, the lag K up to
`lag.max_delay`). Each chunk returns metrics summed over its iterations for every run;
the loop turns them into one JSONL row per chunk per run, draws progress, and evaluates
the policy every `eval.every_chunks` chunks and at the end.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.config import ConfigError, TrainConfig, to_dict, validate
from jaxvaco.hparams import Hyperparams, hyperparams_from_config
from jaxvaco.train import Trainer, TrainState, make_train

TARGET_CHUNKS = 20


@dataclasses.dataclass
class RunResult:
    config: TrainConfig
    run_dir: Path
    runs: list[dict]  # per run: its seed and hyperparameter overrides
    state: TrainState  # final state, every leaf with a leading [num_runs] axis
    rows: list[dict]  # what metrics.jsonl holds
    summary: dict[str, np.ndarray]  # per-run final figures


def chunk_length(config: TrainConfig) -> int:
    """Iterations per compiled chunk: the configured value, else about 20 chunks a run."""
    if config.chunk_iterations:
        return min(config.chunk_iterations, config.num_iterations)
    return max(1, math.ceil(config.num_iterations / TARGET_CHUNKS))


def seed_keys(config: TrainConfig) -> jax.Array:
    """One key per seed: run i uses PRNGKey(seed + i), exactly as a single-seed run would."""
    return jnp.stack([jax.random.PRNGKey(config.seed + i) for i in range(config.num_seeds)])


Grid = dict[str, Sequence[float]]


def validate_grid(config: TrainConfig, grid: Grid) -> None:
    names = {f.name for f in dataclasses.fields(Hyperparams)}
    for name, values in grid.items():
        if name not in names:
            raise ConfigError(f"Cannot sweep {name!r}: sweepable values are {sorted(names)}.")
        if not len(values):
            raise ConfigError(f"The sweep over {name!r} has no values.")
    too_long = [k for k in grid.get("lag_delay", []) if k > config.lag.max_delay or k < 0]
    if too_long:
        raise ConfigError(f"lag_delay values {too_long} need 0 <= K <= --lag.max-delay "
                          f"({config.lag.max_delay}); raise --lag.max-delay.")


def expand_runs(config: TrainConfig, grid: Grid | None = None
                ) -> tuple[list[dict], jax.Array, Hyperparams]:
    """Every (grid combination, seed) pair as one run: labels, keys [R], hyperparams [R]."""
    grid = grid or {}
    validate_grid(config, grid)
    base = hyperparams_from_config(config)
    combos = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    runs, hps = [], []
    for combo in combos:
        hp = base.replace(**{k: jnp.asarray(v, getattr(base, k).dtype) for k, v in combo.items()})
        for i in range(config.num_seeds):
            runs.append({"seed": config.seed + i, **combo})
            hps.append(hp)
    keys = jnp.stack([jax.random.PRNGKey(run["seed"]) for run in runs])
    return runs, keys, jax.tree.map(lambda *leaves: jnp.stack(leaves), *hps)


def default_run_name(config: TrainConfig) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{config.env}__{config.algo}__{stamp}"


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

    def __init__(self, trainer: Trainer):
        self.init = jax.jit(jax.vmap(trainer.init))
        self.chunk = jax.jit(jax.vmap(trainer.train_chunk, in_axes=(0, 0, None)))
        self.evaluate = jax.jit(jax.vmap(trainer.evaluate, in_axes=(0, 0, None)),
                                static_argnums=2)


def evaluate_policy(compiled: Compiled, state: TrainState, iteration: int
                    ) -> dict[str, np.ndarray]:
    """Greedy and stochastic evaluation returns, mean over episodes, per run."""
    num_runs = state.iteration.shape[0]
    base = jax.random.PRNGKey(10_000 + iteration)
    keys = jax.vmap(lambda k: jax.random.fold_in(base, k))(jnp.arange(num_runs))
    out = {}
    for mode, greedy in (("greedy", True), ("stochastic", False)):
        returns = np.asarray(compiled.evaluate(state, keys, greedy))
        out[f"eval/{mode}_return"] = returns.mean(axis=1)
    return out


def prepare_run_dir(config: TrainConfig) -> tuple[TrainConfig, Path]:
    if not config.run_name:
        config = dataclasses.replace(config, run_name=default_run_name(config))
    run_dir = Path(config.results_dir) / config.run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(to_dict(config), indent=2))
    return config, run_dir


def run(config: TrainConfig, grid: Grid | None = None) -> RunResult:
    """Train every run (seeds × grid) in one program; write config.json and metrics.jsonl."""
    from jaxvaco.progress import Progress, print_summary

    validate(config)
    runs, keys, hp = expand_runs(config, grid)
    config, run_dir = prepare_run_dir(config)
    compiled = Compiled(make_train(config))
    state = compiled.init(keys, hp)
    per_chunk = chunk_length(config)
    total_iters = config.num_iterations
    rows: list[dict] = []
    latest_eval: dict[str, np.ndarray] = {}
    start = time.perf_counter()
    train_time = 0.0
    with Progress(config, enabled=config.progress) as progress, \
            open(run_dir / "metrics.jsonl", "w") as sink:
        chunk = 0
        while int(state.iteration[0]) < total_iters:
            n = min(per_chunk, total_iters - int(state.iteration[0]))
            t0 = time.perf_counter()
            state, sums = compiled.chunk(state, hp, jnp.int32(n))
            sums = jax.tree.map(np.asarray, sums)
            elapsed = time.perf_counter() - t0
            if chunk > 0:  # the first chunk includes compilation
                train_time += elapsed
            chunk += 1
            iteration = int(state.iteration[0])
            info = {"chunk": chunk, "iteration": iteration,
                    "env_steps": iteration * config.batch_size,
                    "sps": n * config.batch_size * len(runs) / elapsed,
                    "wall_time": time.perf_counter() - start}
            evaluate_now = iteration == total_iters or (
                config.eval.every_chunks and chunk % config.eval.every_chunks == 0)
            if evaluate_now:
                latest_eval = evaluate_policy(compiled, state, iteration)
            new_rows = chunk_rows(sums, n, info, runs)
            for r, row in enumerate(new_rows):
                if evaluate_now:
                    row.update({k: float(v[r]) for k, v in latest_eval.items()})
                sink.write(json.dumps(row) + "\n")
            sink.flush()
            rows.extend(new_rows)
            progress.update(new_rows, info)
    summary = summarize(rows, latest_eval, len(runs), train_time)
    if config.progress:
        print_summary(config, run_dir, runs, summary)
    return RunResult(config, run_dir, runs, state, rows, summary)


def summarize(rows: list[dict], latest_eval: dict[str, np.ndarray], num_runs: int,
              train_time: float) -> dict[str, np.ndarray]:
    """Per-run final train return (last chunk with episodes), eval returns, throughput."""
    final_train = np.full(num_runs, np.nan)
    for row in rows:
        if row["episode/return"] is not None:
            final_train[row["run"]] = row["episode/return"]
    steps_after_compile = (rows[-1]["env_steps"] - rows[0]["env_steps"]) * num_runs
    return {
        "train_return": final_train,
        **latest_eval,
        "env_steps": np.full(num_runs, rows[-1]["env_steps"]),
        "sps": np.array(steps_after_compile / train_time if train_time else np.nan),
    }

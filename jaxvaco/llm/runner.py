"""`jaxvaco.llm.run`: train an `LLMConfig`'s runs (lag.delays × seeds) in a run folder,
through the same host loop as RL runs (`jaxvaco.host.session.Session`: progress,
metrics.jsonl, checkpoints, resume, the non-finite guard).

A run folder holds config.json ({"llm": the LLMConfig, "control": the host-loop options}),
runs.json, metrics.jsonl (one row per run and chunk, an evaluation in each),
checkpoints/ and the warm start's parameters (warm_start_<...>.msgpack, unless cached
elsewhere). `run(config, resume=run_dir)` continues from the newest checkpoint;
chunks are deterministic, so the result is bit-identical to a run never interrupted.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp

from jaxvaco.core.config import from_table
from jaxvaco.core.errors import ConfigError, RunFileError
from jaxvaco.host.checkpoint import Checkpointer
from jaxvaco.host.run_dir import RunAlreadyComplete, RunControl
from jaxvaco.host.run_folder import RunFolder, read_rows
from jaxvaco.host.session import Schedule, Session
from jaxvaco.lab.results import DROPPED
from jaxvaco.llm import task
from jaxvaco.llm.config import LLMConfig
from jaxvaco.llm.model import Transformer
from jaxvaco.llm.train import make_llm_train, model_config, run_labels, warm_start

TASK = "arithmetic"
"""The `env` of the LLM trainer's results rows."""
RESUMABLE = ("progress", "results_dir", "run_name")
"""LLMConfig fields that may differ on resume: where and how a run is shown."""


@dataclasses.dataclass
class LLMRunResult:
    config: LLMConfig
    run_dir: Path
    runs: list[dict]  # per run: its seed and lag_delay (K)
    state: Any  # final state, every leaf with a leading [num_runs] axis
    rows: list[dict]  # what metrics.jsonl holds
    stop_signal: int = 0



def results_rows(config: LLMConfig, rows: list[dict], variant: str | None = None
                 ) -> list[dict]:
    """An LLM run's metrics rows in the one results schema (docs/results_schema.md):
    env = the task, algo, variant (default: the algo), K, seed, step = generation steps,
    then its metrics (no `return`: the LLM trainer has no episodes)."""
    return [{"env": TASK, "algo": config.algo, "variant": variant or config.algo,
             "K": row["lag_delay"], "seed": row["seed"], "step": row["env_steps"],
             **{k: v for k, v in row.items() if k not in DROPPED | {"seed"}}}
            for row in rows]


def run_results(run_dir: Path, variant: str | None = None) -> list[dict]:
    """The complete rows of an LLM run folder's metrics.jsonl in the results schema."""
    return results_rows(load_llm_config(run_dir), read_rows(RunFolder(run_dir).metrics),
                        variant)


def load_llm_config(run_dir: Path) -> LLMConfig:
    """The LLMConfig a run folder was started with; RunFileError when it holds another
    kind of run."""
    folder = RunFolder(run_dir)
    record = folder.read_config()
    if "llm" not in record:
        raise RunFileError(f"{folder.config} is not an LLM run's (no 'llm' table): "
                           "an RL run continues with `jaxvaco run --resume`; start a new LLM "
                           "run with jaxvaco.llm.run(config).")
    return from_table(LLMConfig, record["llm"], str(folder.config), "llm.")


def changed(saved: LLMConfig, new: LLMConfig) -> list[str]:
    """'path: saved -> new' of every option that differs (but `RESUMABLE`)."""
    def flat(data: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in data.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k: v})
        return out

    a, b = flat(dataclasses.asdict(saved)), flat(dataclasses.asdict(new))
    return [f"{k}: {a[k]!r} -> {b[k]!r}" for k in a if a[k] != b[k] and k not in RESUMABLE]


def open_llm_run(config: LLMConfig | None, control: RunControl, resume: Path | None
                 ) -> tuple[LLMConfig, Path, Checkpointer | None]:
    """A fresh run folder (config.json written), or the one `resume` names, its config
    checked against `config` (None: the saved one)."""
    if resume is None:
        if config is None:
            raise ConfigError("jaxvaco.llm.run needs a config, or resume=<run folder>.")
        name = config.run_name or f"llm__{config.algo}__{time.strftime('%Y%m%d-%H%M%S')}"
        config = dataclasses.replace(config, run_name=name)
        run_dir = Path(config.results_dir) / name
        folder = RunFolder(run_dir)
        if folder.trained():
            raise ConfigError(f"{run_dir} already holds a run: continue it with "
                              f"jaxvaco.llm.run(config, resume={str(run_dir)!r}), pick another "
                              "run_name, or delete the folder.")
        run_dir.mkdir(parents=True, exist_ok=True)
        folder.write_config({"llm": dataclasses.asdict(config),
                             "control": dataclasses.asdict(control)})
    else:
        run_dir, folder, saved = resume, RunFolder(resume), load_llm_config(resume)
        differ = changed(saved, config) if config is not None else []
        if differ:
            raise ConfigError(f"{run_dir} was started with other settings ({'; '.join(differ)})"
                              ": resume it with its own config, or start a new run.")
        config = saved
        if not folder.checkpoint_steps() and folder.recorded_iterations() >= config.num_steps:
            raise RunAlreadyComplete(f"{run_dir} is already complete ({config.num_steps} "
                                     f"steps); its results are in {folder.metrics}.")
    if not control.keep_checkpoints:
        if resume is not None:
            raise ConfigError("Resuming needs checkpoints: keep_checkpoints must be > 0.")
        return config, run_dir, None
    return config, run_dir, Checkpointer(folder.checkpoints, control.keep_checkpoints)


def warm_started(config: LLMConfig, pool: task.Problems, cache: Path) -> Any:
    """The supervised warm start of `config` (key(0) init, key(1) batches), read from
    `cache` when a run of the same warm start and model wrote it there."""
    model = Transformer(model_config(config))
    w, m = config.warm_start, config.model
    path = RunFolder(cache).warm_start(f"{w.steps}_{w.batch_size}_{w.learning_rate:g}_"
                                       f"{w.pool_size}_{m.d_model}x{m.num_layers}x{m.num_heads}")
    params = model.init(jax.random.key(0), pool.sequences[:1])
    if path.exists():
        return jax.tree.map(jnp.asarray, flax.serialization.from_bytes(params,
                                                                       path.read_bytes()))
    params, _ = jax.jit(lambda p: warm_start(model, p, pool, jax.random.key(1), w.steps,
                                             w.batch_size, w.learning_rate))(params)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(flax.serialization.to_bytes(params))
    return params


def problems(config: LLMConfig) -> tuple[task.Problems, task.Problems]:
    """(training pool: SFT data and RL prompts, held-out test sets)."""
    test = task.test_sets(config.eval.test_size)
    return task.train_pool(config.warm_start.pool_size, 0, test), test


def run(config: LLMConfig | None = None, control: RunControl | None = None,
        resume: str | Path | None = None, warm_start_cache: str | Path | None = None
        ) -> LLMRunResult:
    """Train every run of `config` (lag.delays × seeds, one program) from the supervised
    warm start; write config.json, runs.json and metrics.jsonl in its run folder.

    With `resume` (a run folder), continue its newest checkpoint (`config` None, or the one
    it was started with). `warm_start_cache`: the folder that keeps warm starts (default
    the run folder), so that runs sharing one compute it once. Returns early, with
    `stop_signal` set and a checkpoint saved, on SIGINT or SIGTERM; raises
    `jaxvaco.core.guard.NonFiniteError` when a run's loss, gradient or parameters stop being
    finite (after saving the last good state).
    """
    from jaxvaco.llm.progress import LLMProgress

    resume = None if resume is None else Path(resume)
    control = control or RunControl()
    config, run_dir, store = open_llm_run(config, control, resume)
    started = time.time()
    try:
        pool, test = problems(config)
        ref = warm_started(config, pool, Path(warm_start_cache or run_dir))
        runs = run_labels(config)
        RunFolder(run_dir).write_runs({"lag_delay": list(config.lag.delays)}, runs)
        record = {"config": {"llm": dataclasses.asdict(config)},
                  "grid": {"lag_delay": list(config.lag.delays)}}
        session = Session(run_dir, runs, make_llm_train(config, ref, pool, test),
                          Schedule(config.num_steps, config.eval.every, 1, 1), store, control,
                          record, started=started)
        state, loop, rows = session.start(resume is not None)
        progress = LLMProgress(config, enabled=config.progress)
        state, loop, stop_signal = session.train(state, loop, rows, progress)
    finally:
        if store is not None:
            store.close()
    session.write_timings()
    return LLMRunResult(config, run_dir, runs, state, rows, stop_signal)


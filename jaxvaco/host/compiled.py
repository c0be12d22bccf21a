"""The RL trainer's programs, jitted and vmapped over the runs, and the evaluation they run.

`Compiled` wraps the pure functions of a `jaxvaco.core.train.Trainer` (one run) into programs
over R runs side by side (the runs' keys and hyperparameters are batched), placed by the
run's `jaxvaco.core.distributed.Layout`; on one device they may come from the program cache
(`jaxvaco.host.programs.ProgramCache`). `evaluate_policy` runs the evaluation on each run's
keys (`eval_keys`), which `jaxvaco eval` uses too to reproduce a run's evaluation.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.core import distributed
from jaxvaco.core.guard import all_finite
from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.train import Trainer, TrainState
from jaxvaco.host.compilation import compiler_options
from jaxvaco.host.programs import ProgramCache, named


class Compiled:
    """The jitted entry points of a Trainer, vmapped over runs (keys and hyperparameters)."""

    def __init__(self, trainer: Trainer, cache_dir: Path | None = None,
                 layout: distributed.Layout | None = None):
        """With `cache_dir` (single device only), the traced programs are kept there
        (`jaxvaco.host.programs.ProgramCache`). `layout`: the run's, when already decided
        (default: `distributed.layout(trainer.config)`)."""
        layout = distributed.layout(trainer.config) if layout is None else layout
        programs = None if cache_dir is None or not layout.single_device else ProgramCache(
            cache_dir, trainer.config, (trainer.init, trainer.train_chunk, trainer.evaluate))

        def jit(name: str, function: Any, **options: Any) -> Any:
            xla_options = compiler_options(trainer.spec.family, name)
            function = named(name, function)
            if programs is not None:
                return programs.jit(name, function, xla_options)
            return jax.jit(function, compiler_options=xla_options, **options)

        sharding = layout.runs_sharding  # runs over devices, or None
        shard = {} if sharding is None else {"out_shardings": sharding}
        # lax.map, not vmap: executing the vmapped init (orthogonal initialisers, batched
        # over many runs) deterministically hung XLA's CPU runtime here (e.g. 80 runs).
        self.init = jit("init", lambda keys, hp: jax.lax.map(lambda run: trainer.init(*run),
                                                             (keys, hp)), **shard)
        family = trainer.spec.family
        self.chunk = jit("chunk", over_runs(functools.partial(checked_chunk, trainer),
                                            (family, "chunk") not in VMAPPED_SINGLE_RUN))
        self.evaluate = jit("evaluate", over_runs(
            trainer.evaluate, (family, "evaluate") not in VMAPPED_SINGLE_RUN))
        self.programs = programs

    def compile_ahead(self, keys: jax.Array, hp: Hyperparams) -> TrainState | None:
        """With the program cache: start compiling the three programs now, side by side
        (`jaxvaco.host.programs.Program.compile_ahead`), and return the state's
        ShapeDtypeStructs; without it, None (jit compiles each on its first call)."""
        state = None if self.programs is None else self.init.compile_ahead(keys, hp)
        if state is None:
            return None
        self.chunk.compile_ahead(state, hp, jnp.int32(1))
        self.evaluate.compile_ahead(state, keys, True)
        return state


VMAPPED_SINGLE_RUN = {("brax", "chunk")}
"""(family, program) pairs whose single run stays under the vmap: unbatched, a Brax chunk
compiled with `jaxvaco.host.compilation.CPU_COMPILER_OPTIONS` ran about 30% slower on the CPU
(inverted_pendulum; docs/results/throughput.md)."""


def over_runs(function: Any, single_run_unbatched: bool = True) -> Any:
    """`function(batched, batched, shared)` over the runs: `jax.vmap` over the leading axis
    of the first two arguments, except that a single run is computed unbatched (its axis
    of 1 taken off the inputs and put back on the outputs) unless `single_run_unbatched`
    is False.

    [ours] Unbatched, one run's program traces in about half the time and compiles
    faster (brax's physics or a MinAtar game under one more vmap is most of the tracing),
    and it computes exactly what `jax.jit(function)` of that run computes, the path the
    fingerprints record. It is not bit-identical to the same run vmapped with others:
    batching changes XLA's float reduction order, as it does between any two numbers of
    runs."""
    batched = jax.vmap(function, in_axes=(0, 0, None))
    if not single_run_unbatched:
        return batched

    def call(first: Any, second: Any, shared: Any) -> Any:
        if {leaf.shape[0] for leaf in jax.tree.leaves((first, second))} != {1}:
            return batched(first, second, shared)
        first, second = jax.tree.map(lambda x: x[0], (first, second))
        return jax.tree.map(lambda x: x[None], function(first, second, shared))

    return call


def checked_chunk(trainer: Trainer, state: TrainState, hp: Hyperparams, n: jax.Array
                  ) -> tuple[TrainState, dict[str, jax.Array], jax.Array]:
    """[ours] One run's chunk (`Trainer.train_chunk`) and whether its new parameters are all
    finite: the host loop's guard reads it from the chunk's outputs, so no program of its
    own is compiled for it."""
    state, sums = trainer.train_chunk(state, hp, n)
    return state, sums, all_finite(state.params)


def eval_keys(iteration: int, runs: list[dict], base_seed: int | None = None) -> jax.Array:
    """The evaluation keys of every run [R]: `fold_in(PRNGKey(10_000 + iteration), seed)`
    with the run's seed (`base_seed` replaces 10_000 + iteration: other episodes, as
    `jaxvaco eval --seed` draws them)."""
    base = jax.random.PRNGKey(10_000 + iteration if base_seed is None else base_seed)
    seeds = jnp.asarray([run["seed"] for run in runs])
    return jax.vmap(lambda seed: jax.random.fold_in(base, seed))(seeds)


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

"""The groups of options every run shares (`jaxvaco.core.config.SharedOptions`): the lag,
asynchronous actors, evaluation and distribution (`--lag.*`, `--eval.*`, ... on the command
line). Each algorithm's own group is declared with it (`jaxvaco.core.algos.<name>`)."""

from __future__ import annotations

import dataclasses
from typing import Literal


@dataclasses.dataclass(frozen=True)
class LagConfig:
    """Simulated policy lag [ours].

    The N envs are split into `num_groups` actor groups; in iteration T group g acts with
    the learner's parameters from k_g(T) iterations ago, clamped at θ_0.
    """

    max_delay: int = 0
    """K, the lag in learner iterations, of a run (0 = synchronous on-policy training), and
    the ring buffer's capacity: the largest K (`lag_delay` in grids) a run's grid may ask
    for."""
    mode: Literal["fixed", "uniform", "spread", "replay"] = "fixed"
    """fixed: k_g = K; uniform: k_g(T) ~ U{0..K} per group and iteration;
    spread: group g always lags round(g·K/(G−1)); replay: k(T) is the lag the learner of
    the asynchronous run in --lag.replay saw in its iteration T (G = 1)."""
    num_groups: int = 1
    """G: actor groups; must divide --num-envs."""
    replay: str = ""
    """With --lag.mode replay: the run folder of an asynchronous run, whose
    lag_schedule.csv gives the delays (--lag.max-delay is raised to its largest lag)."""


@dataclasses.dataclass(frozen=True)
class AsyncConfig:
    """Asynchronous actors and learner [ours] (`jaxvaco.host.asynchronous`): actor threads
    collect with the newest parameters they have received and push trajectories into a
    bounded queue; the learner pops one per iteration. Not bit-reproducible; replay its
    lag_schedule.csv with --lag.mode replay for a deterministic run."""

    enabled: bool = False
    """Train with asynchronous actors and learner instead of the one compiled loop."""
    actor_devices: int = 1
    """A: actor threads, actor i on device i mod D; each collects --num-envs envs."""
    learner_devices: int = 1
    """L: the learner's devices (the last L): each trajectory's envs split over them, every
    minibatch spread over all L and the gradients averaged (the synchronous path's global
    shuffle)."""
    queue_size: int = 2
    """Trajectories the queue holds before actors wait."""
    max_lag: int = 0
    """A trajectory older than this many learner iterations is handled by --asynchronous.stale
    (0 = no limit)."""
    stale: Literal["drop", "use"] = "drop"
    """drop: discard a trajectory beyond --asynchronous.max-lag (counted in async/dropped);
    use: learn from it anyway (its lag stays in lag/* and lag_schedule.csv)."""
    timeout_s: float = 300.0
    """The run stops with an error when the learner waits this long for a trajectory."""


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation, logged apart from training returns."""

    every_chunks: int = 5
    """Evaluate every this many chunks (and at the end); 0 = only at the end."""
    num_episodes: int = 16
    """Episodes per evaluation, run in parallel, each mode (greedy and stochastic)."""


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
    """Training over several devices (`jaxvaco.core.distributed`).

    axis "envs": data-parallel learning; each device holds N/D envs, acts with its own copy of
    the parameters refreshed every `sync_interval` iterations, and the gradients of every SGD
    step are averaged over the devices. axis "seeds": the independent runs (seeds × grid) are
    split over the devices instead, with no communication.
    """

    num_devices: int = 1
    """D: devices in the mesh (1 = the ordinary single-device program)."""
    axis: Literal["envs", "seeds"] = "envs"
    """What the devices split: the envs of each run, or the runs."""
    sync_interval: int = 1
    """S: the actors on a device refresh their parameters from the learner every S iterations
    (1 = every iteration, no lag). Only with axis envs."""
    stagger: bool = False
    """Device d refreshes at iterations T with (T + d) mod S == 0 (asynchronous workers);
    otherwise all devices refresh together at T mod S == 0."""
    shuffle: Literal["global", "local"] = "global"
    """Minibatches with axis envs. "global": every device gathers the whole batch, the
    minibatches are the single-device run's (one shuffle of all N envs) and device d trains
    on the d-th slice of each; advantage normalisation and VACO's batch filter use
    minibatch-wide statistics, so S = 1 equals the single-device run up to reduction order.
    "local": each device shuffles only its own envs and normalises per device (no batch
    communication; the usual data-parallel PPO)."""
    multihost: bool = False
    """Call `jax.distributed.initialize` before building the mesh (one process per host)."""
    coordinator_address: str = ""
    """host:port of process 0; empty = read by JAX from the environment (SLURM, ...)."""
    num_processes: int = 0
    """Processes in the job; 0 = from the environment."""
    process_id: int = -1
    """This process's index; -1 = from the environment."""

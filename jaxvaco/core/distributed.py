"""Training over several devices: a device mesh, data-parallel learners, delayed actor sync.

`config.distributed.axis` says what the D devices split.

- **envs** (data parallel): `make_train` returns a Trainer whose `train_chunk` is one
  `jax.shard_map` over the mesh axis "envs". Each device holds N/D envs, their
  trajectories and its own copy of the actor parameters; every SGD step averages the
  gradients over the devices (`lax.pmean`), so the learner parameters and optimizer state
  stay identical everywhere. The observation-normalisation statistics are updated from the
  gathered global batch, and the metrics are averaged (sums: summed) over the devices.
  Minibatches (`distributed.shuffle`): "global" (default) gathers the batch on every
  device, shuffles all N envs with the same key as the single-device run and gives device
  d the d-th slice of each minibatch; advantage normalisation and VACO's batch filter
  reduce over the whole minibatch (the losses' `batch_mean`, here `minibatch_mean`).
  "local" shuffles and normalises each device's own envs (no batch all-gather: less memory
  and communication).
  Delayed sync (docs/concepts/spec.md §1.1): the actors on device d act with θ_{T−k_d(T)},
  the learner's parameters from their last refresh, k_d(T) = min((T + d·stagger) mod S, T);
  S = 1 is ordinary synchronous training. This lag is exclusive with the lag ring buffer (`lag.*`):
  both are `jaxvaco.core.lag.LagModel`s (`delayed_sync` here), and `TrainState.lag` holds the
  actor copies [D, ...]. The state otherwise keeps its single-device layout ([N, ...]
  envs), so the runner, checkpoints and evaluation need no change.
- **seeds**: the runs (seeds × grid) are independent; `Layout.runs_sharding` shards their
  leading axis over the devices and XLA partitions the vmapped program with no communication.

Every env acts and resets with its own key (`env_keys`: the device's slice of
split(key, N)), so with S = 1 and the global shuffle a D-device run is the single-device
run up to floating-point reduction order (tests/test_distributed.py compares 4 simulated
devices with 1, for PPO and for VACO with its batch filter firing).

Multi-host launch (one process per host, every host running the same command)::

    # host 0 (10.0.0.1), host 1: same with --distributed.process-id 1
    jaxvaco train --env CartPole-v1 --num-envs 1024 --distributed.num-devices 16 \\
        --distributed.multihost --distributed.coordinator-address 10.0.0.1:1234 \\
        --distributed.num-processes 2 --distributed.process-id 0

Under SLURM or on Cloud TPU the three coordinator flags can be left out: JAX reads them
from the environment. `initialize` must run before any other JAX call in the process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from jaxvaco.core.config import ConfigError, DistributedConfig, TrainConfig
from jaxvaco.core.lag import Behaviour, LagModel

AXIS = "envs"
"""Name of the mesh axis that splits the envs (data parallelism) or the runs."""
SUMMED_METRICS = ("_sum", "/count")
"""Metrics that are totals over the envs: summed over the devices; all others are averaged."""


def initialize(dist: DistributedConfig) -> None:
    """`jax.distributed.initialize` when `dist.multihost`; call before any other JAX call.

    Empty / 0 / −1 flags are left to JAX, which reads them from the environment (SLURM,
    Open MPI, Cloud TPU).
    """
    if not dist.multihost:
        return
    try:
        jax.distributed.initialize(
            coordinator_address=dist.coordinator_address or None,
            num_processes=dist.num_processes or None,
            process_id=None if dist.process_id < 0 else dist.process_id,
        )
    except (ValueError, RuntimeError) as error:
        raise ConfigError(
            f"--distributed.multihost could not start JAX's multi-host runtime ("
            f"{' '.join(str(error).split())[:200]}): give --distributed.coordinator-address "
            "HOST:PORT, --distributed.num-processes and --distributed.process-id, or launch "
            "under SLURM, Open MPI or Cloud TPU, where JAX finds them.") from None


def check_device_count(config: TrainConfig) -> None:
    """ConfigError when `distributed.num_devices` is more than JAX sees."""
    wanted, present = config.distributed.num_devices, jax.device_count()
    if wanted > present:
        raise ConfigError(
            f"--distributed.num-devices {wanted} is more than the {present} devices JAX sees "
            f"({jax.devices()[0].platform}). Lower it, or on CPU simulate devices with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={wanted} set before JAX starts.")


def make_mesh(config: TrainConfig) -> Mesh:
    """A 1-D mesh of `distributed.num_devices` devices (Auto axis type, see shard_envs)."""
    check_device_count(config)
    return jax.make_mesh((config.distributed.num_devices,), (AXIS,),
                         axis_types=(AxisType.Auto,))


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a run's arrays live, decided once per run from its config (`layout`) and
    handed to `make_train`, `jaxvaco.host.compiled.Compiled` and its program cache."""

    mesh: Mesh | None = None
    """The D devices on mesh axis `AXIS`; None on one device."""
    env_axis: str | None = None
    """Axis envs: the mesh axis that splits every run's envs; else None (every collective
    is then the identity)."""
    minibatch_axis: str | None = None
    """The mesh axis one minibatch is spread over ("global" shuffle), else None."""
    runs_sharding: NamedSharding | None = None
    """Axis seeds: the sharding of the state's leading runs axis over the devices."""

    @property
    def single_device(self) -> bool:
        return self.mesh is None


def layout(config: TrainConfig) -> Layout:
    """The layout of a run: one device, its envs split (axis envs) or its runs split
    (axis seeds) over `distributed.num_devices` devices."""
    dist = config.distributed
    if dist.num_devices == 1:
        return Layout()
    mesh = make_mesh(config)
    if dist.axis == "seeds":
        return Layout(mesh, runs_sharding=NamedSharding(mesh, PartitionSpec(AXIS)))
    return Layout(mesh, AXIS, AXIS if dist.shuffle == "global" else None)


def init_actors(params: Any, num_devices: int) -> Any:
    """θ_0 for every device's actors, stacked on a leading device axis [D, ...]."""
    return jax.tree.map(lambda p: jnp.broadcast_to(p, (num_devices,) + p.shape), params)


def sync_delay(iteration: jax.Array, device: jax.Array, dist: DistributedConfig) -> jax.Array:
    """k_d(T): iterations since device d's actors were last refreshed (clamped at T).

    Device d refreshes when (T + d) mod S == 0 with stagger, when T mod S == 0 without.
    """
    offset = device if dist.stagger else 0
    return jnp.minimum((iteration + offset) % dist.sync_interval, iteration).astype(jnp.int32)


def delayed_sync(dist: DistributedConfig, axis: str) -> LagModel:
    """Spec §1.1's lag across devices [ours], a `LagModel`: actors that refresh their copy
    of the learner's parameters every S iterations (`sync_delay`), so that device d's act
    with θ_{T−k_d(T)}, delays [k_d].

    Its state is the copies, [D, ...] outside shard_map and this device's [1, ...] inside
    it (`state_specs` splits it); `behaviour` runs inside shard_map over `axis`.
    """

    def behaviour(actors, params, iteration, key, lag_delay):
        delay = sync_delay(iteration, jax.lax.axis_index(axis), dist)
        actors = jax.tree.map(lambda a, p: jnp.where(delay == 0, p[None], a), actors, params)
        return Behaviour(jax.tree.map(lambda a: a[0], actors), delay[None], actors)

    return LagModel(lambda params: init_actors(params, dist.num_devices), behaviour)


def device_key(key: jax.Array, axis: str | None) -> jax.Array:
    """A key of this device's own (folded with its index); the key itself on one device."""
    return key if axis is None else jax.random.fold_in(key, jax.lax.axis_index(axis))


def local_part(x: jax.Array, axis: str | None, dim: int) -> jax.Array:
    """This device's contiguous 1/D block of `x` along `dim`; `x` itself on one device."""
    if axis is None:
        return x
    size = x.shape[dim] // jax.lax.axis_size(axis)
    return jax.lax.dynamic_slice_in_dim(x, jax.lax.axis_index(axis) * size, size, axis=dim)


def env_keys(key: jax.Array, num_envs: int, axis: str | None) -> jax.Array:
    """This device's slice of split(key, N), one key per env of the whole run.

    Env i's randomness depends only on its key, not on how the envs are split over devices.
    """
    return local_part(jax.random.split(key, num_envs), axis, dim=0)


def minibatch_mean(axis: str | None) -> Callable[[jax.Array], jax.Array]:
    """The losses' `batch_mean`: the mean over a minibatch spread evenly over the devices
    of `axis` (the mean of the device means); `jnp.mean` on one device."""
    return jnp.mean if axis is None else lambda x: jax.lax.pmean(x.mean(), axis)


def mean(tree: Any, axis: str | None) -> Any:
    """Average over the devices (the gradient all-reduce); identity on one device."""
    return tree if axis is None else jax.lax.pmean(tree, axis)


def gather_envs(x: jax.Array, axis: str | None) -> jax.Array:
    """[T, N/D, ...] -> [T, N, ...] in the global env order; identity on one device."""
    return x if axis is None else jax.lax.all_gather(x, axis, axis=1, tiled=True)


def reduce_metrics(metrics: dict, axis: str | None) -> dict:
    """Sum the per-env totals and average the rest over the devices."""
    if axis is None:
        return metrics
    return {name: (jax.lax.psum(v, axis) if name.endswith(SUMMED_METRICS)
                   else jax.lax.pmean(v, axis)) for name, v in metrics.items()}


def state_specs(state: Any) -> Any:
    """PartitionSpecs of a TrainState: envs and the lag state (the actor copies of
    `delayed_sync`) split, everything else replicated."""
    split = lambda tree: jax.tree.map(lambda _: PartitionSpec(AXIS), tree)  # noqa: E731
    replicated = jax.tree.map(lambda _: PartitionSpec(), state)
    return replicated.replace(obs=PartitionSpec(AXIS), env_state=split(state.env_state),
                              lag=split(state.lag))


def shard_envs(train_chunk: Callable, mesh: Mesh) -> Callable:
    """Wrap a per-device `train_chunk(state, hp, n)` into one shard_map over the mesh.

    The per-device function stays reachable as `.per_device` (the tests run it under
    `jax.vmap(..., axis_name=AXIS)` on one device as a reference). The metrics come out
    already reduced over the devices, hence replicated. `check_vma`
    is off because gymnax states in a `lax.scan` carry fail the varying-axes check, and the
    replicated outputs are made equal by the collectives in the step.
    """

    def sharded_chunk(state, hp, num_iterations):
        specs = state_specs(state)
        fn = jax.shard_map(train_chunk, mesh=mesh, in_specs=(specs, PartitionSpec(),
                                                             PartitionSpec()),
                           out_specs=(specs, PartitionSpec()), check_vma=False)
        return fn(state, hp, num_iterations)

    sharded_chunk.per_device = train_chunk
    return sharded_chunk

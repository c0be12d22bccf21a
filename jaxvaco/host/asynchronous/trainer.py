"""`AsyncTrainer`: asynchronous actors and a learner, driven by the host loop.

It is a `jaxvaco.host.session.LoopTrainer` (one run, R = 1), so the host loop's metrics,
evaluation, checkpoints, SIGINT handling and resume apply unchanged. Per learner
iteration T:

    item = queue.get()                  # (trajectory with log β, version v, θ_v, actor)
    lag  = T − v                        # dropped if lag > --asynchronous.max-lag and stale=drop
    θ_{T+1} = learn(θ_T, item)          # `jaxvaco.core.train.learn`: view, estimate, update
    store.publish((θ_{T+1}, obs stats), version T + 1)

while each actor thread loops: take the newest (θ_v, v) from the store, collect
--num-envs × --num-steps with the jitted rollout stage on its own device, push. The
learner runs in the calling thread, on the last L devices (`learner_program`); its critic
is recomputed as in the synchronous loop. Every popped trajectory is written to lag_schedule.csv
(`jaxvaco.host.run_folder.RunFolder.write_lag_schedule`). Not bit-reproducible (thread timing
decides the lags).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxvaco.core import distributed
from jaxvaco.core.envs import make_env
from jaxvaco.core.errors import ConfigError
from jaxvaco.core.rollout import collect
from jaxvaco.core.train import learn
from jaxvaco.core.train_state import Setup, TrainState
from jaxvaco.host.asynchronous.channels import (
    AsyncWorkerError,
    Item,
    ParameterStore,
    Supervisor,
    TrajectoryQueue,
    one_line,
)
from jaxvaco.host.run_folder import RunFolder
from jaxvaco.host.runs_trainer import RunsTrainer


class ActorState(NamedTuple):
    """What `jaxvaco.core.rollout.collect` reads of a state, for an actor's own envs."""

    obs: jax.Array
    env_state: Any
    obs_stats: Any


def actor_collect(setup: Setup, params: Any, obs_stats: Any, obs: jax.Array, env_state: Any,
                  key: jax.Array):
    """One trajectory of the actor's envs with θ_v: next obs, env state, the Rollout."""
    return collect(setup, ActorState(obs, env_state, obs_stats), params, key)


def learner_step(setup: Setup, state: TrainState, hp: Any, traj: Any, behaviour: Any,
                 lag: jax.Array) -> tuple[TrainState, dict]:
    """Learner iteration T on a trajectory acted with θ_{T−lag}."""
    key, k_update = jax.random.split(state.key)
    return learn(setup, state.replace(key=key), hp, traj, behaviour, lag[None], k_update)


class LearnerProgram(NamedTuple):
    """The learner's step and where its inputs go: `state` (replicated) and `trajectory`
    (its envs split over the learner devices)."""

    step: Any
    state: Any
    trajectory: Any


def learner_program(setup: Setup, devices: list[Any]) -> LearnerProgram:
    """`learner_step` on the learner devices. On one device, jitted there. On L > 1, a
    `shard_map` over a mesh of them: each holds N/L of the trajectory's envs, the batch is
    gathered and shuffled alike on every device, each trains on its 1/L of every
    minibatch and the gradients are averaged (`distributed`'s global shuffle), so the
    update is the one-device update up to float rounding."""
    if len(devices) == 1:
        return LearnerProgram(jax.jit(functools.partial(learner_step, setup)), devices[0],
                              devices[0])
    config, axis = setup.config, distributed.AXIS
    local = setup._replace(
        env=make_env(config.env, config.num_envs // len(devices), config.brax_backend),
        axis=axis, mb_axis=axis)
    mesh = Mesh(np.asarray(devices), (axis,))
    envs, replicated = PartitionSpec(None, axis), PartitionSpec()
    step = jax.shard_map(functools.partial(learner_step, local), mesh=mesh,
                         in_specs=(replicated, replicated, envs, replicated, replicated),
                         out_specs=(replicated, replicated), check_vma=False)
    return LearnerProgram(jax.jit(step), NamedSharding(mesh, replicated),
                          NamedSharding(mesh, envs))


@dataclasses.dataclass
class AsyncTrainer(RunsTrainer):
    """The host loop's trainer for `--asynchronous.enabled` (see the module docstring)."""

    setup: Setup | None = None
    run_dir: Path | None = None
    supervisor: Supervisor | None = None
    lines: list[dict] = dataclasses.field(default_factory=list)  # the last chunk's pops
    # Built in __post_init__ from the setup, and by `start` for each run of the threads:
    options: Any = dataclasses.field(init=False)  # the config's AsyncConfig
    actor_devices: list[Any] = dataclasses.field(init=False)
    learner: LearnerProgram = dataclasses.field(init=False)
    hp_run: Any = dataclasses.field(init=False)  # this run's hyperparameters (R = 1)
    collect: Any = dataclasses.field(init=False)  # the jitted actor_collect
    reset: Any = dataclasses.field(init=False)  # the jitted env reset of an actor's envs
    store: ParameterStore | None = dataclasses.field(init=False, default=None)
    queue: TrajectoryQueue | None = dataclasses.field(init=False, default=None)

    def __post_init__(self):
        options = self.setup.config.asynchronous
        devices = jax.devices()
        self.actor_devices = [devices[i % len(devices)] for i in range(options.actor_devices)]
        if options.learner_devices > len(devices):
            raise ConfigError(f"--asynchronous.learner-devices {options.learner_devices}: "
                              f"only {len(devices)} device(s) here (on a CPU, set XLA_FLAGS="
                              "--xla_force_host_platform_device_count=N before JAX starts).")
        self.learner = learner_program(self.setup, devices[-options.learner_devices:])
        self.options = options
        self.hp_run = jax.tree.map(lambda x: x[0], self.hp)
        self.collect = jax.jit(functools.partial(actor_collect, self.setup))
        self.reset = jax.jit(self.setup.env.reset)

    def act(self, params, obs_stats, obs, env_state, key):
        """One actor collection (a method, so tests can inject a failure)."""
        return self.collect(params, obs_stats, obs, env_state, key)

    def learn_step(self, state, traj, behaviour, lag):
        """One learner update (a method, so tests can inject a failure)."""
        return self.learner.step(state, self.hp_run, traj, behaviour, jnp.int32(lag))

    def start(self, state: TrainState) -> None:
        """The store, the queue and one thread per actor; the schedule cut at T."""
        first = int(state.iteration)
        folder = RunFolder(self.run_dir)
        kept = [row for row in folder.read_lag_schedule() if row["iteration"] < first]
        folder.write_lag_schedule(kept, append=False)
        self.supervisor = Supervisor()
        self.store = ParameterStore((state.params, state.obs_stats), first)
        self.queue = TrajectoryQueue(self.options.queue_size, self.supervisor.stop)
        base = jax.random.fold_in(self.keys[0], 1 + first)
        for i, device in enumerate(self.actor_devices):
            key = jax.device_put(jax.random.fold_in(base, i), device)
            self.supervisor.start(f"actor {i} ({device})", functools.partial(
                self.actor_loop, i, device, key))

    def actor_loop(self, index: int, device: Any, key: jax.Array, stop: Any) -> None:
        key, k_reset = jax.random.split(key)
        obs, env_state = self.reset(k_reset)
        while not stop.is_set():
            (params, obs_stats), version = self.store.latest()
            params, obs_stats = jax.device_put((params, obs_stats), device)
            key, k_collect = jax.random.split(key)
            obs, env_state, traj = self.act(params, obs_stats, obs, env_state, k_collect)
            if not self.queue.put(Item(traj, version, params, index)):
                return

    def pop(self, iteration: int) -> tuple[Item, int]:
        """The next trajectory to learn from and its lag; drops (and records) stale ones."""
        options = self.options
        while True:
            item = self.queue.get(options.timeout_s, self.supervisor.check)
            lag = iteration - item.version
            drop = options.stale == "drop" and 0 < options.max_lag < lag
            self.lines.append({"iteration": iteration, "version": item.version, "lag": lag,
                               "actor": item.actor, "used": int(not drop)})
            if not drop:
                return item, lag

    def chunk(self, state: TrainState, n: int) -> tuple[TrainState, dict[str, np.ndarray]]:
        learner = jax.device_put(jax.tree.map(lambda x: x[0], state), self.learner.state)
        first = int(learner.iteration)
        if self.supervisor is None:
            self.start(learner)
        self.lines, sums = [], None
        try:
            for iteration in range(first, first + n):
                item, lag = self.pop(iteration)
                traj = jax.device_put(item.trajectory, self.learner.trajectory)
                behaviour = jax.device_put(item.behaviour, self.learner.state)
                learner, metrics = self.learn_step(learner, traj, behaviour, lag)
                self.store.publish((learner.params, learner.obs_stats), iteration + 1)
                sums = metrics if sums is None else jax.tree.map(jnp.add, sums, metrics)
        except AsyncWorkerError as error:
            self.close()
            raise AsyncWorkerError(self.stopped(str(error))) from error
        except Exception as error:
            self.close()
            raise AsyncWorkerError(self.stopped(one_line("learner", error))) from error
        RunFolder(self.run_dir).write_lag_schedule(self.lines, append=True)
        sums = {k: np.asarray(v)[None] for k, v in sums.items()}
        sums["async/dropped"] = np.array([sum(1 - line["used"] for line in self.lines)],
                                         np.float32)
        return jax.tree.map(lambda x: x[None], learner), sums

    def stopped(self, failure: str) -> str:
        return (f"{failure}. Training stopped; the newest checkpoint in {self.run_dir} is "
                "kept (continue with --resume).")

    def rows(self, sums: dict[str, np.ndarray], n: int, info: dict) -> list[dict]:
        """The RL rows, with the chunk's lag distribution: lag/max and lag/histogram
        (counts of lag 0, 1, ... over the trajectories trained on)."""
        rows = super().rows(sums, n, info)
        lags = Counter(line["lag"] for line in self.lines if line["used"])
        top = max(lags, default=0)
        rows[0]["lag/max"] = top
        rows[0]["lag/histogram"] = [lags.get(k, 0) for k in range(top + 1)]
        return rows

    def close(self) -> None:
        """Stop the actor threads (the next chunk starts them again)."""
        if self.supervisor is not None:
            self.supervisor.close()
            self.supervisor = None

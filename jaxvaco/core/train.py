"""The jitted training loop, as stages: `make_train(config)` wires them into pure functions.

One learner iteration (docs/concepts/spec.md §1.1) is the composition of module-level stages,
each a pure function of one static `Setup` record (`jaxvaco.core.train_state`) and arrays:

    behaviour  = select_behaviour(setup, state, hp, key)   # rollout: ring buffer | sync | θ_T
    traj       = collect(setup, state, behaviour.params, key)           # rollout
    view       = learner_view(setup, state.params, traj)   # learner: π_T, V_T where needed
    batch      = estimate(setup, traj, behaviour.params, view, hp)   # critic × estimator
    params,opt = update(setup, state, batch, hp, key)      # learner: E × M minibatches
    metrics    = iteration_metrics(setup, traj, view, params, behaviour.delays, ...)

`train_chunk(state, hp, n)` runs n iterations as one XLA program (a `fori_loop` with a
traced trip count, so every chunk length shares one compilation) and returns summed
metrics; the host loop in `jaxvaco.host.session` owns progress, logging and stopping. Seeds
are a `jax.vmap` over `init` and `train_chunk`; evaluation is `jaxvaco.core.evaluation`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.core import distributed
from jaxvaco.core.algos import Algorithm, make_algorithm
from jaxvaco.core.config import TrainConfig
from jaxvaco.core.envs import VecEnv, make_env
from jaxvaco.core.envs.base import EnvSpec
from jaxvaco.core.evaluation import evaluate
from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.learner import (
    LearnerView,
    estimate,
    learner_view,
    learning_rate,
    make_optimizer,
    update,
)
from jaxvaco.core.networks import ActorCritic, make_network
from jaxvaco.core.normalize import init_running_stats, update_running_stats
from jaxvaco.core.primitives import half_abs_deviation
from jaxvaco.core.rollout import Rollout, collect, lag_model, select_behaviour
from jaxvaco.core.train_state import Setup, TrainState
from jaxvaco.core.validation import validate

__all__ = ["Trainer", "TrainState", "make_train"]


class Trainer(NamedTuple):
    """The pure functions of one run (one seed, one set of hyperparameters), jittable and
    free of files: what `jaxvaco.host.compiled.Compiled` vmaps over a grid's runs."""

    config: TrainConfig
    spec: EnvSpec
    network: ActorCritic
    algorithm: Algorithm
    init: Callable[[jax.Array, Hyperparams], TrainState]
    train_chunk: Callable[[TrainState, Hyperparams, jax.Array], tuple[TrainState, dict]]
    evaluate: Callable[[TrainState, jax.Array, bool], jax.Array]
    setup: Setup | None = None  # what the stages read (the asynchronous learner uses it)


def mean_tv(logp_a: jax.Array, logp_b: jax.Array) -> jax.Array:
    """Sample estimate of TV(a, b): mean ½·|a/b − 1| over actions drawn from b."""
    return half_abs_deviation(logp_a - logp_b).mean()


def iteration_metrics(setup: Setup, traj: Rollout, view: LearnerView, params: Any,
                      delays: jax.Array, lr: jax.Array) -> dict:
    """Lag (docs/concepts/spec.md §1.2), TV backward / forward / total on the subsample, episode
    sums."""
    config, envs = setup.config, setup.metric_envs
    pi_final, _ = setup.network.apply(params, traj.obs[:, envs])
    final_logp = pi_final.log_prob(traj.actions[:, envs])
    behaviour_logp = traj.logp[:, envs]
    mean_delay = delays.mean()
    updates = config.updates_per_iteration
    return {
        "lag/iterations": mean_delay,
        "lag/sgd_steps": mean_delay * updates + (updates - 1) / 2,
        "tv/backward": mean_tv(view.metric_logp, behaviour_logp),
        "tv/forward": mean_tv(final_logp, view.metric_logp),
        "tv/total": mean_tv(final_logp, behaviour_logp),
        "episode/return_sum": traj.completed_return.sum(),
        "episode/length_sum": traj.completed_length.sum().astype(jnp.float32),
        "episode/count": (traj.terminated | traj.truncated).sum().astype(jnp.float32),
        "learning_rate": lr,
    }


def iteration(setup: Setup, state: TrainState, hp: Hyperparams) -> tuple[TrainState, dict]:
    """One learner iteration: the stages above, composed."""
    key, k_delay, k_roll, k_update = jax.random.split(state.key, 4)
    behaviour = select_behaviour(setup, state, hp, k_delay)
    obs, env_state, traj = collect(setup, state, behaviour.params, k_roll)
    state = state.replace(obs=obs, env_state=env_state, lag=behaviour.state, key=key)
    return learn(setup, state, hp, traj, behaviour.params, behaviour.delays, k_update)


def learn(setup: Setup, state: TrainState, hp: Hyperparams, traj: Rollout,
          behaviour_params: Any, delays: jax.Array, key: jax.Array) -> tuple[TrainState, dict]:
    """The learner's stages on a collected batch (acted with θ_{T−delays}): view, estimate,
    update, metrics; θ_{T+1}. The asynchronous learner (`jaxvaco.host.asynchronous`) calls it
    with the trajectories its actors push."""
    view = learner_view(setup, state.params, traj)
    batch = estimate(setup, traj, behaviour_params, view, hp)
    params, opt_state, metrics = update(setup, state, batch, hp, key)
    metrics.update(iteration_metrics(setup, traj, view, params, delays,
                                     learning_rate(setup.config, hp, state.iteration)))
    metrics = distributed.reduce_metrics(metrics, setup.axis)
    obs_stats = state.obs_stats
    if setup.config.normalize_obs:
        obs_stats = update_running_stats(obs_stats,
                                         distributed.gather_envs(traj.raw_obs, setup.axis))
    new_state = state.replace(
        params=params, opt_state=opt_state, obs_stats=obs_stats,
        algo_state=setup.algorithm.update_state(state.algo_state, metrics, hp),
        iteration=state.iteration + 1)
    return new_state, metrics


def train_chunk(setup: Setup, state: TrainState, hp: Hyperparams, num_iterations: jax.Array):
    """Run num_iterations iterations; return the new state and metrics summed over them.

    `iteration` is traced once: as a nested jit, the trace `eval_shape` makes for the
    metrics' structure is the one the loop body reuses (XLA inlines the call)."""
    step = jax.jit(functools.partial(iteration, setup))
    zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(step, state, hp)[1])

    def body(_, carry):
        state, sums = carry
        state, metrics = step(state, hp)
        return state, jax.tree.map(jnp.add, sums, metrics)

    return jax.lax.fori_loop(0, num_iterations, body, (state, zeros))


def init_state(setup: Setup, init_env: VecEnv, key: jax.Array, hp: Hyperparams) -> TrainState:
    """θ_0, the optimizer, the envs reset (all N of them), the lag state."""
    k_params, k_env, key = jax.random.split(key, 3)
    obs, env_state = init_env.reset(k_env)
    params = setup.network.init(k_params, obs[:1])
    return TrainState(
        params=params,
        opt_state=make_optimizer(hp).init(params),
        obs=obs,
        env_state=env_state,
        obs_stats=init_running_stats(init_env.spec.obs_shape),
        lag=setup.lag.init(params),
        algo_state=setup.algorithm.init_state(hp),
        key=key,
        iteration=jnp.zeros((), jnp.int32),
    )


def make_train(config: TrainConfig, layout: distributed.Layout | None = None,
               replay_delays: np.ndarray | None = None) -> Trainer:
    """Build env, network, algorithm and wire the stages into the pure functions of one run
    (shared options left at None take the algorithm's tuned values, `AlgorithmSpec.tuned`).
    `layout`: the run's `distributed.layout(config)`, when the caller has decided it;
    `replay_delays`: with --lag.mode replay, the recorded delays k(T) (`rollout.lag_model`)."""
    config = validate(config)
    layout = distributed.layout(config) if layout is None else layout
    axis = layout.env_axis  # None on one device: every collective is the identity
    devices = config.distributed.num_devices if axis else 1
    make = functools.partial(make_env, config.env, brax_backend=config.brax_backend)
    env: VecEnv = make(config.num_envs // devices)
    network = make_network(env.spec, config.hidden_sizes, config.activation)
    setup = Setup(config, env, network, make_algorithm(config),
                  lag_model(config, axis, replay_delays), axis, layout.minibatch_axis)
    chunk = functools.partial(train_chunk, setup)
    if axis:
        chunk = distributed.shard_envs(chunk, layout.mesh)
    return Trainer(
        config, env.spec, network, setup.algorithm,
        init=functools.partial(init_state, setup, make(config.num_envs) if axis else env),
        train_chunk=chunk,
        evaluate=functools.partial(evaluate, setup,
                                   make(config.eval.num_episodes).first_episodes_only()),
        setup=setup,
    )

"""The actors' side of an iteration (docs/concepts/spec.md §1.1): which parameters act
(`select_behaviour`, the lag stage) and the rollout they collect (`collect`), recording
log β(a|s)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxvaco.core import distributed, lag
from jaxvaco.core.config import ConfigError, TrainConfig
from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.lag import Behaviour, LagModel
from jaxvaco.core.networks import ActorCritic
from jaxvaco.core.normalize import RunningMeanStd, normalize_obs
from jaxvaco.core.train_state import Setup, TrainState


class Rollout(NamedTuple):
    """Per-step collection output, [T, N] after the scan."""

    obs: jax.Array
    raw_obs: jax.Array
    actions: jax.Array
    logp: jax.Array  # log β(a|s), recorded
    values: jax.Array  # V_β(s), recorded
    rewards: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    completed_return: jax.Array
    completed_length: jax.Array


def lag_model(config: TrainConfig, axis: str | None,
              replay_delays: np.ndarray | None = None) -> LagModel:
    """The lag implementation of this config, chosen once: the ring buffer (`--lag.*`),
    delayed sync of the devices' actors (`--distributed.*` over envs), the recorded schedule
    `replay_delays` (`--lag.mode replay`: the host reads it from the run folder), or none."""
    if config.lag.mode == "replay":
        if replay_delays is None:
            raise ConfigError("--lag.mode replay needs the recorded delays: pass "
                              "replay_delays=jaxvaco.host.asynchronous.schedule.read_delays("
                              "config.lag.replay) to make_train (jaxvaco.run does).")
        return lag.replay(replay_delays, lag.ring_capacity(config.lag.max_delay, replay_delays))
    if config.lag.max_delay > 0:
        return lag.ring_buffer(lag.ring_capacity(config.lag.max_delay), config.lag.mode,
                               config.lag.num_groups)
    if axis:
        return distributed.delayed_sync(config.distributed, axis)
    return lag.NO_LAG


def select_behaviour(setup: Setup, state: TrainState, hp: Hyperparams,
                     key: jax.Array) -> Behaviour:
    """Lag stage: the actors' θ_{T−k_g} and k_g from `setup.lag`, and its next state."""
    return setup.lag.behaviour(state.lag, state.params, state.iteration, key, hp.lag_delay)


def split_groups(x: jax.Array, num_groups: int) -> jax.Array:
    """[N, ...] -> [G, N/G, ...] (groups are contiguous blocks of envs)."""
    return x.reshape((num_groups, x.shape[0] // num_groups) + x.shape[1:])


def merge_groups(x: jax.Array) -> jax.Array:
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def per_group(fn: Callable, grouped: bool, num_groups: int) -> Callable:
    """fn(params, x, *rest) with params stacked per group [G, ...] and x split into groups.

    `rest` must already carry the group axis. Without lag the learner's params are used
    directly (no group axis), which keeps K = 0 numerically identical to synchronous training.
    """
    if not grouped:
        return fn

    def apply(params, x, *rest):
        out = jax.vmap(fn)(params, split_groups(x, num_groups), *rest)
        return jax.tree.map(merge_groups, out)

    return apply


def act(network: ActorCritic, params: Any, obs: jax.Array, key: jax.Array):
    """One env: a ~ π(·|s) drawn with the env's own key, log π(a|s), V(s)."""
    pi, value = network.apply(params, obs[None])
    action = pi.sample(seed=key)
    return action[0], pi.log_prob(action)[0], value[0]


def behaviour_act(setup: Setup, params: Any, obs: jax.Array, keys: jax.Array):
    """Actions, log β and V_β for [N] envs, each actor group with its own parameters."""
    policy_step = jax.vmap(functools.partial(act, setup.network), in_axes=(None, 0, 0))
    if not setup.lagged:
        return policy_step(params, obs, keys)
    return per_group(policy_step, True, setup.num_groups)(
        params, obs, split_groups(keys, setup.num_groups))


def maybe_normalize(config: TrainConfig, stats: RunningMeanStd, obs: jax.Array) -> jax.Array:
    return normalize_obs(stats, obs) if config.normalize_obs else obs


def collect(setup: Setup, state: TrainState, behaviour_params: Any, key: jax.Array):
    """Rollout stage: `lax.scan` over L steps of the vmapped envs; log β(a|s) recorded.

    Returns the next observations, env state and the [L, N] `Rollout`."""
    config = setup.config
    normalize = functools.partial(maybe_normalize, config, state.obs_stats)

    def step(carry, step_key):
        obs, env_state = carry
        k_act, k_env = (distributed.env_keys(k, config.num_envs, setup.axis)
                        for k in jax.random.split(step_key))
        norm_obs = normalize(obs)
        action, logp, value = behaviour_act(setup, behaviour_params, norm_obs, k_act)
        env_state, out = setup.env.step_envs(k_env, env_state, action)
        record = Rollout(norm_obs, obs if config.normalize_obs else None, action, logp,
                         value, out.reward, out.terminated, out.truncated,
                         normalize(out.final_obs), out.completed_return, out.completed_length)
        return (out.obs, env_state), record

    keys = jax.random.split(key, config.num_steps)
    (obs, env_state), traj = jax.lax.scan(step, (state.obs, state.env_state), keys)
    return obs, env_state, traj

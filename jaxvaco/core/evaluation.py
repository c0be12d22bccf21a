"""Evaluation: the return of one episode in each of a set of parallel envs, greedy or
sampled, for the trainer's state (`evaluate`) or any parameters (`evaluate_episodes`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from jaxvaco.core.config import TrainConfig
from jaxvaco.core.envs import VecEnv
from jaxvaco.core.envs.base import VecEnvState
from jaxvaco.core.networks import ActorCritic, greedy_action
from jaxvaco.core.normalize import RunningMeanStd
from jaxvaco.core.rollout import maybe_normalize
from jaxvaco.core.train_state import Setup, TrainState


def evaluate(setup: Setup, eval_env: VecEnv, state: TrainState, key: jax.Array,
             greedy: bool | jax.Array) -> jax.Array:
    """Return of the first episode in each of `eval.num_episodes` parallel envs.

    `greedy` may be traced: one compiled program serves both modes (the same keys)."""
    return evaluate_episodes(setup.config, setup.network, eval_env, state.params,
                             state.obs_stats, key, greedy)[0]


def evaluate_episodes(config: TrainConfig, network: ActorCritic, eval_env: VecEnv, params: Any,
                      obs_stats: RunningMeanStd, key: jax.Array, greedy: bool | jax.Array,
                      record: Callable[[VecEnvState, Any], Any] | None = None
                      ) -> tuple[jax.Array, Any]:
    """`evaluate` for any parameters: the return of the first episode in each of
    `eval_env.num_envs` parallel envs, and `record(env_state, step_result)` of every step
    (stacked; None without `record`), e.g. env 0's states to render the episode
    (`jaxvaco.host.policy_eval.record_episode`). The env state is the one the step acted on."""
    k_reset, k_run = jax.random.split(key)
    obs, env_state = eval_env.reset(k_reset)

    def step(carry, step_key):
        obs, env_state, returns, finished = carry
        k_act, k_env = jax.random.split(step_key)
        pi, _ = network.apply(params, maybe_normalize(config, obs_stats, obs))
        action = jnp.where(greedy, greedy_action(pi), pi.sample(seed=k_act))
        next_state, out = eval_env.step(k_env, env_state, action)
        returns = returns + jnp.where(finished, 0.0, out.reward)
        finished = finished | out.terminated | out.truncated
        kept = None if record is None else record(env_state, out)
        return (out.obs, next_state, returns, finished), kept

    zeros = jnp.zeros(eval_env.num_envs)
    carry = (obs, env_state, zeros, zeros.astype(bool))
    keys = jax.random.split(k_run, eval_env.spec.max_episode_steps)
    (_, _, returns, _), recorded = jax.lax.scan(step, carry, keys)
    return returns, recorded

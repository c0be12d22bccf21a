"""Common types of the environment adapter layer.

Every adapter exposes a batch of ``num_envs`` independent environments that auto-reset, behind a
single interface (:class:`VecEnv`) that is jittable and vmappable: the trainer vmaps over seeds
and scans over time.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Static (hashable) description of an environment.

    Attributes:
        name: canonical name of the environment (gymnax id or bare brax name).
        family: ``"gymnax"`` or ``"brax"``.
        obs_shape: shape of one observation.
        discrete: whether the action space is discrete.
        num_actions: number of actions (discrete) or action dimension (continuous).
        action_low: per-dimension lower bounds (continuous only, ``None`` for discrete).
        action_high: per-dimension upper bounds (continuous only, ``None`` for discrete).
        max_episode_steps: time limit of one episode.
    """

    name: str
    family: str
    obs_shape: tuple[int, ...]
    discrete: bool
    num_actions: int
    action_low: tuple[float, ...] | None
    action_high: tuple[float, ...] | None
    max_episode_steps: int


@flax.struct.dataclass
class VecEnvState:
    """State of a batch of environments plus running episode statistics."""

    inner: Any
    episode_return: jax.Array
    episode_length: jax.Array


class StepResult(NamedTuple):
    """Outcome of one batched step; every field has leading axis ``[num_envs]``.

    Attributes:
        obs: observation to act on next (already reset if the episode ended).
        reward: float32 reward of the transition.
        terminated: true end of the episode (do not bootstrap).
        truncated: time limit reached and not terminated (bootstrap from ``V(final_obs)``).
        final_obs: pre-reset next observation (equals ``obs`` when the episode did not end).
        completed_return: return of the episode that ended at this step, 0.0 elsewhere.
        completed_length: length (int32) of the episode that ended at this step, 0 elsewhere.
    """

    obs: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    completed_return: jax.Array
    completed_length: jax.Array


class VecEnv(abc.ABC):
    """A batch of ``num_envs`` auto-resetting environments with a pure functional interface.

    Environment i draws its randomness only from its own key ``split(key, num_envs)[i]``, so
    a batch split over devices (each stepping its slice of the keys with ``step_envs``)
    replays exactly the environments of the unsplit batch.
    """

    def __init__(self, spec: EnvSpec, num_envs: int):
        self.spec = spec
        self.num_envs = num_envs

    def reset(self, key: jax.Array) -> tuple[jax.Array, VecEnvState]:
        """Reset all environments; returns float32 obs ``[num_envs, *obs_shape]`` and the state."""
        return self.reset_envs(jax.random.split(key, self.num_envs))

    def step(
        self, key: jax.Array, state: VecEnvState, action: jax.Array
    ) -> tuple[VecEnvState, StepResult]:
        """Step all environments with ``action`` (leading axis ``[num_envs]``), auto-resetting."""
        return self.step_envs(jax.random.split(key, self.num_envs), state, action)

    def first_episodes_only(self) -> VecEnv:
        """This batch for code that uses only each env's first episode (evaluation): an
        adapter may then skip resetting finished envs, which is code the program need not
        compile. Their first episodes are unchanged. By default the batch itself."""
        return self

    @abc.abstractmethod
    def reset_envs(self, keys: jax.Array) -> tuple[jax.Array, VecEnvState]:
        """``reset`` with one key per environment, ``keys`` [num_envs]."""

    @abc.abstractmethod
    def step_envs(
        self, keys: jax.Array, state: VecEnvState, action: jax.Array
    ) -> tuple[VecEnvState, StepResult]:
        """``step`` with one key per environment, ``keys`` [num_envs]."""


def initial_state(inner: Any, num_envs: int) -> VecEnvState:
    """Wrap a freshly reset batched inner state with zeroed episode statistics."""
    return VecEnvState(
        inner=inner,
        episode_return=jnp.zeros(num_envs, jnp.float32),
        episode_length=jnp.zeros(num_envs, jnp.int32),
    )


def finish_step(
    state: VecEnvState,
    inner: Any,
    obs: jax.Array,
    reward: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    final_obs: jax.Array,
) -> tuple[VecEnvState, StepResult]:
    """Update the episode statistics and assemble the step outputs.

    ``truncated`` must already exclude terminated episodes; an episode ends when either is true.
    """
    done = terminated | truncated
    episode_return = state.episode_return + reward
    episode_length = state.episode_length + 1
    new_state = VecEnvState(
        inner=inner,
        episode_return=jnp.where(done, 0.0, episode_return),
        episode_length=jnp.where(done, 0, episode_length),
    )
    result = StepResult(
        obs=obs,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        final_obs=final_obs,
        completed_return=jnp.where(done, episode_return, 0.0),
        completed_length=jnp.where(done, episode_length, 0),
    )
    return new_state, result

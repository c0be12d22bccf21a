"""Adapter for gymnax environments.

gymnax 1.0.1 ``env.step`` auto-resets and returns ``(obs, state, reward, terminated, truncated,
info)`` with ``info["final_observation"]`` the pre-reset next observation. Its ``truncated`` is
``time >= max_steps_in_episode`` regardless of termination, so both can be true at once; we report
``truncated & ~terminated``.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.core.envs.base import EnvSpec, VecEnv, VecEnvState, finish_step, initial_state

RENDER_ONLY_IMPORTS = ("matplotlib", "matplotlib.pyplot", "matplotlib.colors", "seaborn")
"""Imported by gymnax's environment modules at import time but used only by their
`render` methods: seaborn (with scipy and pandas) and pyplot are about 1 s of start-up."""


class _Deferred(types.ModuleType):
    """Stands in for a module until one of its attributes is used, then imports it."""

    __path__: list[str] = []  # looks like a package, so `from matplotlib import colors` works

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(importlib.import_module(self.__name__), attr)


@contextlib.contextmanager
def deferred_imports(names: tuple[str, ...] = RENDER_ONLY_IMPORTS):
    """Within `with`, importing `names` (not imported yet) binds a stand-in that imports
    the real module on first use. The stand-ins leave sys.modules on exit, so any other
    import of these modules, then or later, gets the real one."""
    stubs = {name: _Deferred(name) for name in names if name not in sys.modules}
    for name, stub in stubs.items():
        parent, _, child = name.rpartition(".")
        if parent in stubs:
            setattr(stubs[parent], child, stub)
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for name, stub in stubs.items():
            if sys.modules.get(name) is stub:
                del sys.modules[name]


with deferred_imports():
    import gymnax
    from gymnax.environments import spaces


def _bounds(space: spaces.Box) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-dimension (low, high) bounds of a continuous action space."""
    low = np.broadcast_to(np.asarray(space.low, np.float32), space.shape)
    high = np.broadcast_to(np.asarray(space.high, np.float32), space.shape)
    return tuple(float(x) for x in low.ravel()), tuple(float(x) for x in high.ravel())


def _spec_of(name: str, env, params) -> EnvSpec:
    """Spec of a constructed gymnax environment (shape inference only, no computation)."""
    obs, _ = jax.eval_shape(env.reset, jax.random.key(0), params)
    space = env.action_space(params)
    discrete = isinstance(space, spaces.Discrete)
    if discrete:
        num_actions, low, high = int(space.n), None, None
    else:
        num_actions = int(np.prod(space.shape))
        low, high = _bounds(space)
    return EnvSpec(
        name=name,
        family="gymnax",
        obs_shape=tuple(obs.shape),
        discrete=discrete,
        num_actions=num_actions,
        action_low=low,
        action_high=high,
        max_episode_steps=int(params.max_steps_in_episode),
    )


def gymnax_spec(name: str) -> EnvSpec:
    """Spec of gymnax environment ``name`` with its default parameters."""
    env, params = gymnax.make(name)
    return _spec_of(name, env, params)


class GymnaxVecEnv(VecEnv):
    """Batched gymnax environment: float32 observations, clipped continuous actions.

    ``params`` overrides the default environment parameters (e.g. ``max_steps_in_episode``).
    """

    def __init__(self, name: str, num_envs: int, params: Any = None):
        env, default_params = gymnax.make(name)
        self._env = env
        self._params = default_params if params is None else params
        super().__init__(_spec_of(name, env, self._params), num_envs)

    def _prepare_action(self, action: jax.Array) -> jax.Array:
        """Cast discrete actions to int32; clip continuous ones to the action bounds."""
        if self.spec.discrete:
            return action.astype(jnp.int32)
        low = jnp.asarray(self.spec.action_low, jnp.float32)
        high = jnp.asarray(self.spec.action_high, jnp.float32)
        return jnp.clip(action.astype(jnp.float32), low, high)

    def reset_envs(self, keys: jax.Array) -> tuple[jax.Array, VecEnvState]:
        """Reset all environments, each with its own key."""
        obs, inner = jax.vmap(self._env.reset, in_axes=(0, None))(keys, self._params)
        return obs.astype(jnp.float32), initial_state(inner, self.num_envs)

    def step_envs(self, keys: jax.Array, state: VecEnvState, action: jax.Array):
        """Step all environments, each with its own key (gymnax auto-resets finished ones)."""
        obs, inner, reward, terminated, truncated, info = jax.vmap(
            self._env.step, in_axes=(0, 0, 0, None)
        )(keys, state.inner, self._prepare_action(action), self._params)
        terminated = terminated.astype(bool).reshape(self.num_envs)
        return finish_step(
            state,
            inner,
            obs=obs.astype(jnp.float32),
            reward=reward.astype(jnp.float32).reshape(self.num_envs),
            terminated=terminated,
            truncated=truncated.astype(bool).reshape(self.num_envs) & ~terminated,
            final_obs=info["final_observation"].astype(jnp.float32),
        )

"""Adapter for Brax environments (imported lazily: brax is slow and noisy to import).

We do not use brax's training wrappers (they call ``jax.device_put_replicated``, removed from
JAX); time limit and auto-reset are implemented here. The time-limit counter is the running
``episode_length`` of :class:`~jaxvaco.core.envs.base.VecEnvState`.

Default backend ``"spring"``: the fastest on CPU that still behaves. Timings on a 2-core CPU,
``inverted_pendulum``, 64 envs, jitted ``lax.scan`` of 500 steps with uniform random actions
(best of 5; compile = trace + XLA of the whole rollout):

=============  =================  =========  =========================================
backend        env-steps/s        compile    zero-action episode (steps x dt = seconds)
=============  =================  =========  =========================================
spring         143k               6.6 s      68 x 0.02 = 1.4 s
mjx            98k                6.9 s      25 x 0.04 = 1.0 s
generalized    57k                7.2 s      25 x 0.04 = 1.0 s
positional     53k                9.4 s      67 x 0.02 = 1.3 s
=============  =================  =========  =========================================

All four terminate when the pole falls (``|angle| > 0.2``). ``mjx`` is the reference MuJoCo
physics; ``spring`` is an approximation with half the control period, so use ``mjx`` when
physical fidelity matters more than CPU throughput.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import warnings

import jax
import jax.numpy as jnp

from jaxvaco.core.envs.base import EnvSpec, VecEnv, VecEnvState, finish_step, initial_state

BRAX_ENV_NAMES = (
    "ant",
    "fast",
    "halfcheetah",
    "hopper",
    "humanoid",
    "humanoidstandup",
    "inverted_pendulum",
    "inverted_double_pendulum",
    "pusher",
    "reacher",
    "swimmer",
    "walker2d",
)
"""Names registered in ``brax.envs`` (kept static so listing names does not import brax)."""

BRAX_SHAPES = {
    "ant": (27, 8),
    "fast": (2, 1),
    "halfcheetah": (17, 6),
    "hopper": (11, 3),
    "humanoid": (244, 17),
    "humanoidstandup": (244, 17),
    "inverted_pendulum": (4, 1),
    "inverted_double_pendulum": (8, 1),
    "pusher": (23, 7),
    "reacher": (11, 2),
    "swimmer": (8, 2),
    "walker2d": (17, 6),
}
"""(observation size, action dimension) of each Brax env, kept static for `jaxvaco envs`:
`brax_spec` builds the env (about 10 s for all of them); tests/test_policy.py checks the
table against it."""
BRAX_ONLY_BACKENDS = {"swimmer": "generalized"}
"""Brax envs that accept a single backend (not the default)."""

BRAX_BACKENDS = ("generalized", "positional", "spring", "mjx")
DEFAULT_BRAX_BACKEND = "spring"
DEFAULT_MAX_EPISODE_STEPS = 1000


@contextlib.contextmanager
def _quiet_brax():
    """Silence brax's maintenance warnings and the warp import messages printed to stdout."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.filterwarnings("ignore", message=".*not actively being maintained.*")
        warnings.filterwarnings("ignore", message=".*no longer maintained.*")
        yield


@functools.cache
def brax_envs_module():
    """Import ``brax.envs`` once, quietly."""
    with _quiet_brax():
        import brax.envs

    return brax.envs


def registered_brax_envs() -> list[str]:
    """Names currently registered in brax (imports brax)."""
    return list(brax_envs_module()._envs)


def _make_brax_env(name: str, backend: str):
    """Construct the raw brax environment."""
    if backend not in BRAX_BACKENDS:
        raise ValueError(f"Unknown brax backend {backend!r}; expected one of {BRAX_BACKENDS}.")
    try:
        with _quiet_brax():
            return brax_envs_module().get_environment(name, backend=backend)
    except ValueError as err:  # e.g. swimmer supports only "generalized"
        raise ValueError(
            f"brax env {name!r} cannot use backend {backend!r} ({err}); pass another brax_backend."
        ) from err


def _spec_of(name: str, env, max_episode_steps: int) -> EnvSpec:
    """Spec of a constructed brax environment (shape inference only, no computation)."""
    reset_state = jax.eval_shape(env.reset, jax.random.key(0))
    action_dim = int(env.action_size)
    return EnvSpec(
        name=name,
        family="brax",
        obs_shape=tuple(reset_state.obs.shape),
        discrete=False,
        num_actions=action_dim,
        action_low=(-1.0,) * action_dim,
        action_high=(1.0,) * action_dim,
        max_episode_steps=max_episode_steps,
    )


def brax_spec(
    name: str,
    backend: str = DEFAULT_BRAX_BACKEND,
    max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
) -> EnvSpec:
    """Spec of brax environment ``name`` without building a vectorised adapter."""
    return _spec_of(name, _make_brax_env(name, backend), max_episode_steps)


def _select_tree(mask: jax.Array, on_true, on_false):
    """Per-env ``where`` over two batched pytrees; ``mask`` has shape ``[num_envs]``."""

    def select(a, b):
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree.map(select, on_true, on_false)


class BraxVecEnv(VecEnv):
    """Batched brax environment with time limit, auto-reset and actions clipped to [-1, 1]."""

    def __init__(
        self,
        name: str,
        num_envs: int,
        backend: str = DEFAULT_BRAX_BACKEND,
        max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
    ):
        self._env = _make_brax_env(name, backend)
        self.backend = backend
        self.auto_reset = True
        super().__init__(_spec_of(name, self._env, max_episode_steps), num_envs)

    def first_episodes_only(self) -> BraxVecEnv:
        """This batch without auto-reset: a finished env steps on instead of being reset,
        so an evaluation program traces and compiles brax's reset once, not twice (about
        4 s of XLA on a CPU for inverted_pendulum). The first episodes are the same."""
        batch = copy.copy(self)
        batch.auto_reset = False
        return batch

    def reset_envs(self, keys: jax.Array) -> tuple[jax.Array, VecEnvState]:
        """Reset all environments, each with its own key."""
        inner = jax.vmap(self._env.reset)(keys)
        return inner.obs.astype(jnp.float32), initial_state(inner, self.num_envs)

    def step_envs(self, keys: jax.Array, state: VecEnvState, action: jax.Array):
        """Step all environments; finished ones are replaced by a fresh reset from their key
        (with `auto_reset`)."""
        action = jnp.clip(action, -1.0, 1.0)
        stepped = jax.vmap(self._env.step)(state.inner, action)
        terminated = stepped.done.astype(bool)
        hit_limit = state.episode_length + 1 >= self.spec.max_episode_steps
        truncated = hit_limit & ~terminated
        inner = _select_tree(terminated | truncated, jax.vmap(self._env.reset)(keys),
                             stepped) if self.auto_reset else stepped
        return finish_step(
            state,
            inner,
            obs=inner.obs.astype(jnp.float32),
            reward=stepped.reward.astype(jnp.float32),
            terminated=terminated,
            truncated=truncated,
            final_obs=stepped.obs.astype(jnp.float32),
        )

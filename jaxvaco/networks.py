"""Actor-critic networks: separate MLP torsos for the policy and the value function.

Discrete actions get a categorical head, continuous ones a diagonal Gaussian with a
state-independent log standard deviation (both distrax distributions). Observations of
any shape are flattened, so MinAtar's [10, 10, 4] grids go through the same MLP.
"""

from __future__ import annotations

from collections.abc import Sequence

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.envs.base import EnvSpec

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}


class MLP(nn.Module):
    """Dense layers with orthogonal(√2) initialisation, then a linear head."""

    hidden_sizes: Sequence[int]
    out_dim: int
    activation: str
    head_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """[..., features] -> [..., out_dim]; leading axes are merged into one for the matmuls
        (a plain 2-D GEMM, also under vmap, where XLA's CPU backend is much faster)."""
        act = ACTIVATIONS[self.activation]
        lead = x.shape[:-1]
        x = x.reshape((-1, x.shape[-1]))
        for width in self.hidden_sizes:
            x = act(nn.Dense(width, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(x))
        x = nn.Dense(self.out_dim, kernel_init=nn.initializers.orthogonal(self.head_scale))(x)
        return x.reshape(lead + (self.out_dim,))


class ActorCritic(nn.Module):
    """Policy distribution and value for a batch of observations [..., *obs_shape].

    `__call__` returns both; `value` runs the critic alone (used for V(final obs)).
    """

    num_actions: int
    discrete: bool
    obs_ndim: int
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"

    def setup(self):
        self.actor = MLP(self.hidden_sizes, self.num_actions, self.activation, 0.01)
        self.critic = MLP(self.hidden_sizes, 1, self.activation, 1.0)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_actions,))

    def _flatten(self, obs: jax.Array) -> jax.Array:
        return obs.reshape(obs.shape[: obs.ndim - self.obs_ndim] + (-1,))

    def __call__(self, obs: jax.Array) -> tuple[distrax.Distribution, jax.Array]:
        x = self._flatten(obs)
        out = self.actor(x)
        value = self.critic(x)[..., 0]
        if self.discrete:
            return distrax.Categorical(logits=out), value
        scale = jnp.broadcast_to(jnp.exp(self.log_std), out.shape)
        return distrax.MultivariateNormalDiag(out, scale), value

    def value(self, obs: jax.Array) -> jax.Array:
        return self.critic(self._flatten(obs))[..., 0]


def make_network(spec: EnvSpec, hidden_sizes: Sequence[int], activation: str) -> ActorCritic:
    """The actor-critic for an environment's observation and action spaces."""
    return ActorCritic(
        num_actions=spec.num_actions,
        discrete=spec.discrete,
        obs_ndim=len(spec.obs_shape),
        hidden_sizes=tuple(hidden_sizes),
        activation=activation,
    )


def greedy_action(pi: distrax.Distribution) -> jax.Array:
    """Deterministic action: the arg-max for categorical, the mean for Gaussian."""
    return pi.mode()

"""Actor-critic networks: separate MLP torsos for the policy and the value function.

Discrete actions get a categorical head, continuous ones a diagonal Gaussian with a
state-independent log standard deviation. Observations of any shape are flattened, so
MinAtar's [10, 10, 4] grids go through the same MLP.

The categorical head is `Categorical` below, the operations of `distrax.Categorical`
written out (the same primitives in the same order, so the same numbers); the Gaussian is
distrax's `MultivariateNormalDiag`. distrax (with TensorFlow Probability) takes about
0.7 s to import, so it is imported only for a continuous action space.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from jaxvaco.core.envs.base import EnvSpec

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}


@jax.custom_jvp
def multiply_no_nan(x: jax.Array, y: jax.Array) -> jax.Array:
    """x·y, and 0 where y is 0 even if x is not finite (`distrax.utils.multiply_no_nan`)."""
    dtype = jnp.result_type(x, y)
    return jnp.where(y == 0, jnp.zeros((), dtype=dtype), x * y)


def _scale_tangent(aval, tangent, scale):
    return SymbolicZero(aval) if isinstance(tangent, SymbolicZero) else tangent * scale


def _add_tangents(a, b):
    if isinstance(a, SymbolicZero):
        return b
    return a if isinstance(b, SymbolicZero) else a + b


@functools.partial(multiply_no_nan.defjvp, symbolic_zeros=True)
def _multiply_no_nan_jvp(primals, tangents):
    """distrax's rule: a zero tangent (the one-hot actions') adds no operation."""
    x, y = primals
    x_dot, y_dot = tangents
    out = multiply_no_nan(x, y)
    aval = jax.typeof(out).at_least_vspace()
    return out, _add_tangents(_scale_tangent(aval, x_dot, y), _scale_tangent(aval, y_dot, x))


def _mul_exp(x: jax.Array, logp: jax.Array) -> jax.Array:
    """x·exp(logp), 0 where exp(logp) is 0 (`distrax.utils.mul_exp`)."""
    p = jnp.exp(logp)
    x = jnp.where(p == 0, 0.0, x)
    return x * p


class Categorical:
    """A categorical distribution over the last axis of `logits` (int actions): the
    operations of `distrax.Categorical(logits=...)` for the methods jaxvaco calls."""

    def __init__(self, logits: jax.Array):
        self.logits = jax.nn.log_softmax(jnp.asarray(logits), axis=-1)  # normalised

    @property
    def num_categories(self) -> int:
        return self.logits.shape[-1]

    @property
    def probs(self) -> jax.Array:
        return jax.nn.softmax(self.logits, axis=-1)

    def sample(self, *, seed: jax.Array) -> jax.Array:
        """One draw per batch element; -1 where the probabilities are not valid."""
        shape = (1,) + self.logits.shape[:-1]
        probs = self.probs
        is_valid = jnp.logical_and(jnp.all(jnp.isfinite(probs), axis=-1),
                                   jnp.all(probs >= 0, axis=-1))
        draws = jax.random.categorical(key=seed, logits=self.logits, axis=-1,
                                       shape=shape).astype(int)
        draws = jnp.where(is_valid, draws, jnp.ones_like(draws) * -1)
        return draws.reshape(draws.shape[1:])

    def log_prob(self, value: jax.Array) -> jax.Array:
        one_hot = jax.nn.one_hot(value, self.num_categories, dtype=self.logits.dtype)
        outside = jnp.logical_or(value < 0, value > self.num_categories - 1)
        return jnp.where(outside, -jnp.inf,
                         jnp.sum(multiply_no_nan(self.logits, one_hot), axis=-1))

    def entropy(self) -> jax.Array:
        log_probs = jax.nn.log_softmax(self.logits)
        return -jnp.sum(_mul_exp(log_probs, log_probs), axis=-1)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1).astype(int)


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

    def __call__(self, obs: jax.Array) -> tuple[Any, jax.Array]:
        x = self._flatten(obs)
        out = self.actor(x)
        value = self.critic(x)[..., 0]
        if self.discrete:
            return Categorical(out), value
        import distrax  # only for continuous actions (see the module docstring)

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


def greedy_action(pi: Any) -> jax.Array:
    """Deterministic action: the arg-max for categorical, the mean for Gaussian."""
    return pi.mode()

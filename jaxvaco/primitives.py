"""Primitives shared by the RL trainer and algorithms (`jaxvaco.train`, `jaxvaco.algos`) and
the LLM setting (`jaxvaco.llm`): per-sample loss pieces with the equation in each docstring,
so that every objective is written once, and the minibatch shuffle. Arrays are any shape;
nothing here reduces unless its name says so (`masked_mean`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def truncated_importance_weight(log_ratio: jax.Array, rho_bar: jax.Array) -> jax.Array:
    """ρ = min(ρ̄, exp(log_ratio)), e.g. log_ratio = log π_T − log β."""
    return jnp.minimum(rho_bar, jnp.exp(log_ratio))


def half_abs_deviation(log_ratio: jax.Array) -> jax.Array:
    """Per-sample TV estimate ½·|r − 1| with r = exp(log_ratio)."""
    return 0.5 * jnp.abs(jnp.exp(log_ratio) - 1.0)


def removed_gradient(ratio: jax.Array, advantages: jax.Array, band_exceeded: jax.Array):
    """Samples whose gradient a trust-region rule drops: outside the band and moving away.

    The gradient of r·Â pushes r further from 1 exactly when Â·(r − 1) > 0.
    """
    return band_exceeded & (advantages * (ratio - 1.0) > 0)


def clipped_surrogate(
    logp: jax.Array, logp_anchor: jax.Array, advantages: jax.Array, clip_coef: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Per-sample −min(r·Â, clip(r, 1 − ε, 1 + ε)·Â), r = exp(logp − logp_anchor), and
    whether the clip removed the sample's gradient (PPO, GRPO)."""
    ratio = jnp.exp(logp - logp_anchor)
    surrogate = jnp.minimum(ratio * advantages,
                            jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages)
    clipped = removed_gradient(ratio, advantages, jnp.abs(ratio - 1.0) > clip_coef)
    return -surrogate, clipped


def k3(log_ratio: jax.Array) -> jax.Array:
    """Per-sample k3 estimate exp(u) − 1 − u, u = log_ratio: unbiased for KL(q‖p) and ≥ 0
    when u = log p(x) − log q(x) and x ~ q (Schulman's "approximating KL")."""
    return jnp.expm1(log_ratio) - log_ratio


def masked_mean(x: jax.Array, valid: jax.Array) -> jax.Array:
    """Σ valid·x / Σ valid: the mean over the valid entries (0 if there are none)."""
    return jnp.sum(jnp.where(valid, x, 0.0)) / jnp.maximum(valid.sum(), 1)


def shuffled_minibatches(tree, key: jax.Array, num_minibatches: int, axis: int = 0):
    """Permute the units along `axis` (one permutation for every leaf) and split them into
    `num_minibatches` equal parts, stacked on a new leading axis:
    [..., U, ...] -> [M, ..., U/M, ...]. A unit (an env's trajectory, a prompt's group of
    completions) stays whole."""
    units = jax.tree.leaves(tree)[0].shape[axis]
    perm = jax.random.permutation(key, units)

    def split(x):
        x = jnp.take(x, perm, axis=axis)
        x = x.reshape(x.shape[:axis] + (num_minibatches, units // num_minibatches)
                      + x.shape[axis + 1:])
        return jnp.moveaxis(x, axis, 0)

    return jax.tree.map(split, tree)

"""Primitives shared by the RL trainer and algorithms (`jaxvaco.core.train`, `jaxvaco.core.algos`)
and the LLM setting (`jaxvaco.llm`): per-sample loss pieces with the equation in each docstring,
so that every objective is written once, the anchor / importance-weight rule, and the minibatch
shuffle. Arrays are any shape; nothing here reduces unless its name says so (`masked_mean`, the
minibatch-wide D of `tv_filter_mask`). Each primitive checks the shapes of its inputs at entry
(chex, at trace time: no cost in the compiled program).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

# ----------------------------------------------------------------- anchor and weight


WEIGHT_PLACEMENTS = ("none", "inside", "after_normalization")


def weight_placement(anchor: str, rho_in_advantages: bool, corrected: bool = True) -> str:
    """Where ρ_t = min(ρ̄, π_T/β) enters an objective whose ratio is r = π_θ/anchor, so
    that the correction from the behaviour β to π_θ is applied exactly once:

        anchor β ("behaviour")                            -> "none": r = π_θ/β carries it all
        anchor π_T ("learner"), Â already ρ_t-weighted    -> "inside": V-trace's
            Â_t = ρ_t·(q_t − V(s_t)), normalised as it is
        anchor π_T, otherwise                             -> "after_normalization":
            Â normalised (per minibatch; per group of completions in the LLM setting),
            then multiplied by ρ_t [decoupled PPO, Hilton et al. 2021;
            w·min(r·Â, clip(r)·Â) = min(r·wÂ, clip(r)·wÂ) for w ≥ 0]

    `corrected=False` leaves ρ_t out with anchor π_T ("none"): π_θ/π_T alone, whose
    gradient at θ = π_T is β's samples' gradient uncorrected (token-level VACO's
    `vaco.weight = "none"`, its default).
    """
    if anchor not in ("behaviour", "learner"):
        raise ValueError(f"unknown anchor {anchor!r}")
    if anchor == "behaviour" or not corrected:
        return "none"
    return "inside" if rho_in_advantages else "after_normalization"


class AnchorTerms(NamedTuple):
    """The denominator of an objective's ratio and the weights applied after
    normalisation, as `anchor_terms` chose them."""

    logp: jax.Array  # log π_T(a|s) or log β(a|s)
    weights: jax.Array | None  # ρ_t = min(ρ̄, π_T/β) ("after_normalization"), else None


def anchor_terms(anchor: str, placement: str, logp_behaviour: jax.Array,
                 logp_learner: jax.Array | None, rho_bar) -> AnchorTerms:
    """(log anchor, weights): log π_T for anchor "learner", else the recorded log β; and
    ρ_t = min(ρ̄, π_T/β) where `placement` (`weight_placement`) is "after_normalization",
    else None. `logp_learner` may be None with anchor β and no weights."""
    if placement not in WEIGHT_PLACEMENTS:
        raise ValueError(f"unknown weight placement {placement!r}")
    if anchor == "behaviour":
        return AnchorTerms(logp_behaviour, None)
    chex.assert_equal_shape([logp_learner, logp_behaviour])
    weights = (truncated_importance_weight(logp_learner - logp_behaviour, rho_bar)
               if placement == "after_normalization" else None)
    return AnchorTerms(logp_learner, weights)


def truncated_importance_weight(log_ratio: jax.Array, rho_bar: jax.Array) -> jax.Array:
    """ρ = min(ρ̄, exp(log_ratio)), e.g. log_ratio = log π_T − log β."""
    chex.assert_type(log_ratio, float)
    return jnp.minimum(rho_bar, jnp.exp(log_ratio))


# ----------------------------------------------------------------- per-sample objectives


def half_abs_deviation(log_ratio: jax.Array) -> jax.Array:
    """Per-sample TV estimate ½·|r − 1| with r = exp(log_ratio)."""
    chex.assert_type(log_ratio, float)
    return 0.5 * jnp.abs(jnp.exp(log_ratio) - 1.0)


def removed_gradient(ratio: jax.Array, advantages: jax.Array, band_exceeded: jax.Array):
    """Samples whose gradient a trust-region rule drops: outside the band and moving away.

    The gradient of r·Â pushes r further from 1 exactly when Â·(r − 1) > 0.
    """
    chex.assert_equal_shape([ratio, advantages, band_exceeded])
    return band_exceeded & (advantages * (ratio - 1.0) > 0)


def clipped_surrogate(
    logp: jax.Array, logp_anchor: jax.Array, advantages: jax.Array, clip_coef: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Per-sample −min(r·Â, clip(r, 1 − ε, 1 + ε)·Â), r = exp(logp − logp_anchor), and
    whether the clip removed the sample's gradient (PPO, GRPO)."""
    chex.assert_equal_shape([logp, logp_anchor, advantages])
    ratio = jnp.exp(logp - logp_anchor)
    surrogate = jnp.minimum(ratio * advantages,
                            jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages)
    clipped = removed_gradient(ratio, advantages, jnp.abs(ratio - 1.0) > clip_coef)
    return -surrogate, clipped


BatchMean = Callable[[jax.Array], jax.Array]
"""The mean of a per-sample array over the whole minibatch: `jnp.mean` on one device; when
a minibatch is spread over devices, the trainer passes the mean over all of them. The
losses' only collective: a loss's own `jnp.mean` is this device's, whose gradient the
trainer averages over the devices."""


def tv_filter_mask(
    log_ratio: jax.Array, advantages: jax.Array, delta: jax.Array, kind: str,
    batch_mean: BatchMean = jnp.mean,
) -> jax.Array:
    """VACO's filter (docs/concepts/spec.md §3.1) [ours]: m_i ∈ {0, 1}, 0 where the sample's
    gradient would push TV beyond δ. With r_i = exp(log_ratio_i), tv_i = ½·|r_i − 1|,
    D = mean_i tv_i:

        m_i = 0  if  exceeded_i and Â_i·(r_i − 1) > 0,  else 1
        exceeded_i = D ≥ δ ("batch"),  tv_i ≥ δ ("sample"),  false ("none")

    `batch_mean` makes D minibatch-wide when the minibatch is spread over devices.
    """
    chex.assert_equal_shape([log_ratio, advantages])
    tv = half_abs_deviation(log_ratio)
    if kind == "batch":
        exceeded = jnp.broadcast_to(batch_mean(tv) >= delta, tv.shape)
    elif kind == "sample":
        exceeded = tv >= delta
    else:
        exceeded = jnp.zeros(tv.shape, bool)
    return ~removed_gradient(jnp.exp(log_ratio), advantages, exceeded)


def k3(log_ratio: jax.Array) -> jax.Array:
    """Per-sample k3 estimate exp(u) − 1 − u, u = log_ratio: unbiased for KL(q‖p) and ≥ 0
    when u = log p(x) − log q(x) and x ~ q (Schulman's "approximating KL")."""
    chex.assert_type(log_ratio, float)
    return jnp.expm1(log_ratio) - log_ratio


def masked_mean(x: jax.Array, valid: jax.Array) -> jax.Array:
    """Σ valid·x / Σ valid: the mean over the valid entries (0 if there are none)."""
    chex.assert_equal_shape([x, valid])
    return jnp.sum(jnp.where(valid, x, 0.0)) / jnp.maximum(valid.sum(), 1)


# ----------------------------------------------------------------- minibatches


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

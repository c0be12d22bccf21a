"""Simple Policy Optimization [paper: Xie et al. 2024]: a quadratic penalty instead of the
clip (spec §3).

    r = π_θ(a|s) / β(a|s)
    L_pg = −mean(r·Â − |Â|/(2ε)·(r − 1)²)

The per-sample objective is maximised at r = 1 + ε·sign(Â), so the ratio is pulled back
toward the ε band without zeroing any gradient. `spo/outside_fraction` is the fraction of
samples whose ratio lies outside [1 − ε, 1 + ε] (penalised, not removed).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from jaxvaco.algos.common import Algorithm, Batch, check_policy_inputs, from_options
from jaxvaco.config import TrainConfig
from jaxvaco.hparams import Hyperparams


def spo_surrogate(
    logp: jax.Array, logp_behaviour: jax.Array, advantages: jax.Array, clip_coef: jax.Array
) -> jax.Array:
    """−mean(r·Â − |Â|/(2ε)·(r − 1)²)."""
    chex.assert_equal_shape([logp, logp_behaviour, advantages])
    ratio = jnp.exp(logp - logp_behaviour)
    penalty = jnp.abs(advantages) / (2.0 * clip_coef) * (ratio - 1.0) ** 2
    return -jnp.mean(ratio * advantages - penalty)


def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state, batch_mean):
    check_policy_inputs(logp, advantages, batch)
    outside = jnp.abs(jnp.exp(logp - batch.logp_behaviour) - 1.0) > hp.clip_coef
    return spo_surrogate(logp, batch.logp_behaviour, advantages, hp.clip_coef), {
        "spo/outside_fraction": outside.mean()}


def make(config: TrainConfig) -> Algorithm:
    return from_options("spo", policy_loss, config.spo)

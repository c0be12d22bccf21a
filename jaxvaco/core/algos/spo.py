"""Simple Policy Optimization [paper: Xie et al. 2024]: a quadratic penalty instead of the
clip (docs/concepts/spec.md §3).

    r = π_θ(a|s) / β(a|s)
    L_pg = −mean(r·Â − |Â|/(2ε)·(r − 1)²)

The per-sample objective is maximised at r = 1 + ε·sign(Â), so the ratio is pulled back
toward the ε band without zeroing any gradient. ε is the shared `--clip-coef`.
`spo/outside_fraction` is the fraction of samples whose ratio lies outside [1 − ε, 1 + ε]
(penalised, not removed).
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp

from jaxvaco.core.algos.common import (
    TRUNCATIONS,
    Algorithm,
    Batch,
    EstimateConfig,
    check_policy_inputs,
    from_options,
    truncation_problems,
)
from jaxvaco.core.algos.spec import AlgorithmSpec
from jaxvaco.core.algos.tuning import EQUAL_BUDGET_SEARCH
from jaxvaco.core.hparams import Hyperparams


@dataclasses.dataclass(frozen=True)
class SPOConfig(EstimateConfig):
    """Options of `spo` (Xie et al. 2024); its ε is --clip-coef."""


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


def build(options: SPOConfig) -> Algorithm:
    return from_options("spo", policy_loss, options)


SPEC = AlgorithmSpec(
    name="spo", options=SPOConfig, build=build, traced=TRUNCATIONS,
    tuned={"learning_rate": 2.89e-3, "ent_coef": 0.0113, "update_epochs": 8,
           "num_minibatches": 8, "clip_coef": 0.168},
    provenance=EQUAL_BUDGET_SEARCH + " Tuned with the recorded critic, run with the learner's.",
    fraction="spo/outside_fraction", check=truncation_problems)

"""PPO with a KL penalty instead of the clip [paper: Schulman et al. 2017, §4] (spec §3).

    r = π_θ(a|s) / β(a|s)
    L_pg = −mean(r·Â) + c_kl·KL̂(β‖π_θ),   KL̂ = mean((r − 1) − log r)

KL̂ is the unbiased, non-negative "k3" estimator from samples a ~ β: only log β(a|s) of
the taken action is logged, so the exact KL over all actions is not available.
Adaptive c_kl (spec §3): after each iteration, with d the target and KL the iteration's
mean estimate, c_kl ← c_kl/2 if KL < d/1.5 and c_kl ← 2·c_kl if KL > 1.5·d.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from jaxvaco.algos.common import Algorithm, Batch, check_policy_inputs, from_options
from jaxvaco.config import TrainConfig
from jaxvaco.hparams import Hyperparams
from jaxvaco.primitives import k3


def kl_penalized_surrogate(
    logp: jax.Array, logp_behaviour: jax.Array, advantages: jax.Array, kl_coef: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(−mean(r·Â) + c_kl·KL̂, KL̂)."""
    chex.assert_equal_shape([logp, logp_behaviour, advantages])
    log_ratio = logp - logp_behaviour
    kl = jnp.mean(k3(log_ratio))
    return -jnp.mean(jnp.exp(log_ratio) * advantages) + kl_coef * kl, kl


def adapt_kl_coef(kl_coef: jax.Array, kl: jax.Array, target_kl: jax.Array) -> jax.Array:
    """Halve below d/1.5, double above 1.5·d, keep otherwise."""
    return jnp.where(kl < target_kl / 1.5, kl_coef / 2,
                     jnp.where(kl > 1.5 * target_kl, kl_coef * 2, kl_coef))


def make(config: TrainConfig) -> Algorithm:
    initial_coef = config.ppo_kl.kl_coef
    adaptive = config.ppo_kl.adaptive

    def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state,
                    batch_mean):
        check_policy_inputs(logp, advantages, batch)
        loss, kl = kl_penalized_surrogate(logp, batch.logp_behaviour, advantages,
                                          algo_state["kl_coef"])
        return loss, {"kl/estimate": kl, "kl/coef": algo_state["kl_coef"]}

    def update_state(algo_state, metrics, hp: Hyperparams):
        if not adaptive:
            return algo_state
        return {"kl_coef": adapt_kl_coef(algo_state["kl_coef"], metrics["kl/estimate"],
                                         hp.target_kl)}

    return from_options(
        "ppo_kl", policy_loss, config.ppo_kl,
        init_state=lambda hp: {"kl_coef": jnp.asarray(initial_coef, jnp.float32)},
        update_state=update_state,
    )

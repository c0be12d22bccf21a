"""PPO with a KL penalty instead of the clip [paper: Schulman et al. 2017, §4]
(docs/concepts/spec.md §3).

    r = π_θ(a|s) / β(a|s)
    L_pg = −mean(r·Â) + c_kl·KL̂(β‖π_θ),   KL̂ = mean((r − 1) − log r)

KL̂ is the unbiased, non-negative "k3" estimator from samples a ~ β: only log β(a|s) of
the taken action is logged, so the exact KL over all actions is not available.
Adaptive c_kl: after each iteration, with d the target and KL the iteration's mean
estimate, c_kl ← c_kl/2 if KL < d/1.5 and c_kl ← 2·c_kl if KL > 1.5·d.
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
    unchanged_state,
)
from jaxvaco.core.algos.spec import AlgorithmSpec
from jaxvaco.core.algos.tuning import EQUAL_BUDGET_SEARCH
from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.primitives import k3


@dataclasses.dataclass(frozen=True)
class PPOKLConfig(EstimateConfig):
    """Options of `ppo_kl`: −E[r Â] + c_kl·KL(β‖π_θ) (Schulman et al. 2017)."""

    kl_coef: float = 1.0
    """Initial (or fixed) KL penalty coefficient c_kl."""
    target_kl: float = 0.0271
    """d: adaptive mode halves c_kl when KL < d/1.5 and doubles it when KL > 1.5·d. Default:
    the tuned value [ours]."""
    adaptive: bool = True
    """False keeps c_kl fixed."""


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


def initial_kl_state(kl_coef: float):
    """The algorithm state of an adaptive penalty: {"kl_coef": c_kl} from its start."""
    return lambda hp: {"kl_coef": jnp.asarray(kl_coef, jnp.float32)}


def adapted_kl_state(algo_state: dict, metrics: dict, hp: Hyperparams) -> dict:
    """The state after an iteration: c_kl adapted towards the traced target d."""
    return {"kl_coef": adapt_kl_coef(algo_state["kl_coef"], metrics["kl/estimate"],
                                     hp.algo["target_kl"])}


def kl_problems(options, flag) -> list[str]:
    """c_kl must be >= 0 and d > 0."""
    out = [] if options.kl_coef >= 0 else [f"{flag('kl_coef')} must be >= 0."]
    return out + ([] if options.target_kl > 0 else [f"{flag('target_kl')} must be > 0."])


def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state, batch_mean):
    check_policy_inputs(logp, advantages, batch)
    loss, kl = kl_penalized_surrogate(logp, batch.logp_behaviour, advantages,
                                      algo_state["kl_coef"])
    return loss, {"kl/estimate": kl, "kl/coef": algo_state["kl_coef"]}


def build(options: PPOKLConfig) -> Algorithm:
    update = adapted_kl_state if options.adaptive else unchanged_state
    return from_options("ppo_kl", policy_loss, options,
                        init_state=initial_kl_state(options.kl_coef), update_state=update)


SPEC = AlgorithmSpec(
    name="ppo_kl", options=PPOKLConfig, build=build, traced=(*TRUNCATIONS, "target_kl"),
    tuned={"learning_rate": 6.65e-4, "ent_coef": 0.0152, "update_epochs": 4,
           "num_minibatches": 8},
    tuned_options=("target_kl",),
    provenance=EQUAL_BUDGET_SEARCH + " Tuned with the recorded critic, run with the learner's.",
    check=lambda options, flag: truncation_problems(options, flag) + kl_problems(options, flag))

"""VACO: total-Variation-based Advantage aligned Constrained policy Optimization.

From "Align and Filter: Improving Performance in Asynchronous On-Policy RL" (Honari et
al., arXiv 2603.01365); docs/concepts/spec.md §3.1. [paper] marks what the paper states,
[ours] our reconstruction, each a config switch.

Align [paper]: once per iteration, recompute advantages and value targets with V-trace
using the learner's π_T and V_T against the logged β; they stay frozen for all E×M
updates (`--vaco.critic learner --vaco.advantages vtrace`). `--vaco.advantages gae` [ours,
default] recomputes only the critic (GAE with V_T); `--vaco.critic behaviour` turns
alignment off (filter only). The alignment itself is the trainer's per-iteration estimate
step, as for every algorithm; the importance weight ρ_t = min(ρ̄, π_T/β) enters once, and
only with anchor π_T (`primitives.weight_placement`).

Filter [paper: drop per-sample gradients predicted to increase TV beyond δ = 0.2]; our
form [ours] (`primitives.tv_filter_mask`):

    r_i = π_θ(a_i|s_i) / anchor(a_i|s_i)      anchor = π_T ("learner") or β ("behaviour")
    tv_i = ½·|r_i − 1|,   D = mean_i tv_i   (over the whole minibatch: `batch_mean`)
    m_i = 0  if  exceeded_i and Â_i·(r_i − 1) > 0,  else 1
        exceeded_i = D ≥ δ ("batch"),  tv_i ≥ δ ("sample"),  false ("none")
    L_pg = −mean_i(stop_gradient(m_i)·r_i·Â_i)

No clip and no min(): a kept sample contributes its full importance-weighted gradient.
`vaco/filtered_fraction` is the fraction of samples the filter drops, 1 − mean_i m_i.

KL penalty [ours, `--vaco.kl-penalty`]: PPO-KL's adaptive penalty (`jaxvaco.core.algos.ppo_kl`)
added to the filtered surrogate,

    L_pg = −mean_i(sg(m_i)·r_i·Â_i) + c_kl·KL̂(β‖π_θ),   KL̂ = mean((ρ − 1) − log ρ),
    ρ = π_θ/β,

with c_kl adapted after each iteration towards `--vaco.target-kl` from `--vaco.kl-coef`
(halved below d/1.5, doubled above 1.5·d). Off by default: VACO as tuned and studied.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import chex
import jax
import jax.numpy as jnp

from jaxvaco.core.algos.common import (
    TRUNCATIONS,
    AdvantageForm,
    Algorithm,
    Anchor,
    Batch,
    Critic,
    EstimateConfig,
    check_policy_inputs,
    from_options,
    truncation_problems,
)
from jaxvaco.core.algos.ppo_kl import adapted_kl_state, initial_kl_state, kl_problems
from jaxvaco.core.algos.spec import AlgorithmSpec
from jaxvaco.core.algos.tuning import EQUAL_BUDGET_SEARCH
from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.primitives import BatchMean, k3, tv_filter_mask


@dataclasses.dataclass(frozen=True)
class VacoConfig(EstimateConfig):
    """Options of `vaco` (which parts are [paper] and which [ours]: `jaxvaco.core.algos.vaco`).
    Defaults [ours]: anchor β, the learner's critic with GAE, batch filter at the tuned δ.
    The paper's recipe is `--vaco.anchor learner --vaco.critic learner --vaco.advantages
    vtrace --vaco.advantage-form weighted --vaco.delta 0.2`."""

    critic: Critic = "learner"
    """Alignment of the critic: learner [paper, ours default] recomputes V_T once per
    iteration; behaviour keeps the recorded values (filter only)."""
    advantage_form: AdvantageForm = "normalize_then_weight"
    """With anchor π_T and V-trace: weighted = ρ_t inside Â_t [paper];
    normalize_then_weight [ours] = normalise the unweighted Â, then multiply by ρ_t."""
    delta: float = 0.0669
    """δ: TV threshold of the filter. Default: the tuned value [ours]; the paper's is 0.2."""
    filter: Literal["batch", "sample", "none"] = "batch"
    """batch: filter when the minibatch TV estimate D ≥ δ; sample: when ½|r_i − 1| ≥ δ;
    none: keep every sample (a plain importance-weighted policy gradient)."""
    anchor: Anchor = "behaviour"
    """Denominator of r: β (behaviour, default: the constraint covers backward and forward
    lag) or π_T (learner: forward lag only [paper])."""
    kl_penalty: bool = False
    """[ours] Add PPO-KL's adaptive penalty c_kl·KL(β‖π_θ) to the filtered objective."""
    kl_coef: float = 1.0
    """With --vaco.kl-penalty: the penalty's initial coefficient c_kl."""
    target_kl: float = 0.0271
    """With --vaco.kl-penalty: d, the KL the coefficient is adapted towards."""


def filtered_surrogate(
    logp: jax.Array, logp_anchor: jax.Array, advantages: jax.Array, delta: jax.Array, kind: str,
    batch_mean: BatchMean = jnp.mean,
) -> tuple[jax.Array, jax.Array]:
    """(−mean(sg(m)·r·Â), m), r = exp(logp − logp_anchor), m = `tv_filter_mask`."""
    chex.assert_equal_shape([logp, logp_anchor, advantages])
    log_ratio = logp - logp_anchor
    mask = jax.lax.stop_gradient(tv_filter_mask(log_ratio, advantages, delta, kind,
                                                batch_mean))
    return -jnp.mean(mask * jnp.exp(log_ratio) * advantages), mask


def build(options: VacoConfig) -> Algorithm:
    def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state, batch_mean):
        check_policy_inputs(logp, advantages, batch)
        loss, mask = filtered_surrogate(logp, batch.logp_anchor, advantages, hp.algo["delta"],
                                        options.filter, batch_mean)
        metrics = {"vaco/filtered_fraction": 1.0 - mask.mean()}
        if not options.kl_penalty:
            return loss, metrics
        kl = jnp.mean(k3(logp - batch.logp_behaviour))
        return loss + algo_state["kl_coef"] * kl, {
            **metrics, "kl/estimate": kl, "kl/coef": algo_state["kl_coef"]}

    if not options.kl_penalty:
        return from_options("vaco", policy_loss, options, anchor=options.anchor)
    return from_options("vaco", policy_loss, options, anchor=options.anchor,
                        init_state=initial_kl_state(options.kl_coef),
                        update_state=adapted_kl_state)


def vaco_problems(options: VacoConfig, flag) -> list[str]:
    """0 < δ ≤ 1 (a TV estimate never exceeds 1), ρ̄, c̄ > 0, and the penalty's c_kl, d."""
    out = truncation_problems(options, flag) + kl_problems(options, flag)
    if not options.delta > 0:
        out.append(f"{flag('delta')} must be > 0, got {options.delta}.")
    if options.delta > 1:
        out.append(f"{flag('delta')} must be at most 1, got {options.delta}: a TV estimate "
                   "never exceeds 1, so the filter could never fire (use --vaco.filter none for "
                   "no filter).")
    return out


SPEC = AlgorithmSpec(
    name="vaco", options=VacoConfig, build=build, traced=(*TRUNCATIONS, "delta", "target_kl"),
    tuned={"learning_rate": 2.28e-3, "ent_coef": 0.00273, "update_epochs": 8,
           "num_minibatches": 4},
    tuned_options=("delta",), provenance=EQUAL_BUDGET_SEARCH + " δ too; the paper's δ is 0.2.",
    fraction="vaco/filtered_fraction", check=vaco_problems)

"""IMPALA's actor-critic loss (Espeholt et al. 2018) (docs/concepts/spec.md §3).

[paper: Espeholt et al.] V-trace is recomputed at every minibatch with the *current* π_θ
and V_θ against the logged β, as constants (stop-gradient), so the targets follow the
learner through the epochs (`current_vtrace`, the record's `minibatch_targets`):

    ρ_t = min(ρ̄, π_θ/β),   c_t = λ·min(c̄, π_θ/β)     (V-trace, `jaxvaco.core.estimators.vtrace`)
    L_pg = −mean(log π_θ(a|s) · Â),   value target v_t from the same V-trace.

The per-iteration estimate computes nothing for IMPALA (`estimator = "none"`): every Â and
v_t it would compute is replaced at the first minibatch. ρ_t is inside Â (IMPALA's own
weighting) and the objective's log π_θ has no anchor. No constraint, so no fraction metric.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxvaco.core.algos.common import (
    TRUNCATIONS,
    Algorithm,
    Batch,
    check_policy_inputs,
    truncation_problems,
)
from jaxvaco.core.algos.spec import AlgorithmSpec
from jaxvaco.core.algos.tuning import EQUAL_BUDGET_SEARCH
from jaxvaco.core.estimators import Targets, vtrace
from jaxvaco.core.hparams import Hyperparams


@dataclasses.dataclass(frozen=True)
class VtraceConfig:
    """V-trace truncation levels for `impala`, recomputed at every minibatch."""

    rho_bar: float = 1.0
    """ρ̄: truncation of the importance weight in δ_t and the advantage."""
    c_bar: float = 1.0
    """c̄: truncation of the trace coefficient c_t = λ·min(c̄, π/β)."""


def current_vtrace(logp: jax.Array, values: jax.Array, next_values: jax.Array, batch: Batch,
                   hp: Hyperparams) -> Targets:
    """(Â, v_t) of V-trace with π = π_θ, V = V_θ (log π_θ, V_θ(s), V_θ(s') of the
    minibatch) against the recorded β, without gradient."""
    sg = jax.lax.stop_gradient
    return vtrace(batch.rewards, sg(values), sg(next_values), batch.terminated,
                  batch.truncated, sg(logp) - batch.logp_behaviour, hp.gamma, hp.gae_lambda,
                  hp.algo["rho_bar"], hp.algo["c_bar"])


def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state, batch_mean):
    """−mean(log π_θ(a|s)·Â)."""
    check_policy_inputs(logp, advantages, batch)
    return -jnp.mean(logp * advantages), {}


def build(options: VtraceConfig) -> Algorithm:
    return Algorithm(name="impala", policy_loss=policy_loss, critic="current",
                     estimator="none", minibatch_targets=current_vtrace)


SPEC = AlgorithmSpec(
    name="impala", options=VtraceConfig, build=build, traced=TRUNCATIONS,
    tuned={"learning_rate": 1.28e-4, "ent_coef": 0.00241, "update_epochs": 2,
           "num_minibatches": 4},
    provenance=EQUAL_BUDGET_SEARCH, check=truncation_problems)

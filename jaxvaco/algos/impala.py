"""IMPALA's actor-critic loss (Espeholt et al. 2018) (spec §3).

[paper: Espeholt et al.] V-trace is recomputed at every minibatch with the *current* π_θ
and V_θ against the logged β, as constants (stop-gradient), so the targets follow the
learner through the epochs (`current_vtrace`, the record's `minibatch_targets`):

    ρ_t = min(ρ̄, π_θ/β),   c_t = λ·min(c̄, π_θ/β)     (V-trace, `jaxvaco.estimators.vtrace`)
    L_pg = −mean(log π_θ(a|s) · Â),   value target v_t from the same V-trace.

The per-iteration estimate computes nothing for IMPALA (`estimator = "none"`): every Â and
v_t it would compute is replaced at the first minibatch. ρ_t is inside Â (IMPALA's own
weighting) and the objective's log π_θ has no anchor. No constraint, so no fraction metric
(PPO: ppo/clipped_fraction, SPO: spo/outside_fraction, VACO: vaco/filtered_fraction).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxvaco.algos.common import Algorithm, Batch, check_policy_inputs
from jaxvaco.config import TrainConfig
from jaxvaco.estimators import Targets, vtrace
from jaxvaco.hparams import Hyperparams


def current_vtrace(logp: jax.Array, values: jax.Array, next_values: jax.Array, batch: Batch,
                   hp: Hyperparams) -> Targets:
    """(Â, v_t) of V-trace with π = π_θ, V = V_θ (log π_θ, V_θ(s), V_θ(s') of the
    minibatch) against the recorded β, without gradient."""
    sg = jax.lax.stop_gradient
    return vtrace(batch.rewards, sg(values), sg(next_values), batch.terminated,
                  batch.truncated, sg(logp) - batch.logp_behaviour, hp.gamma, hp.gae_lambda,
                  hp.rho_bar, hp.c_bar)


def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state, batch_mean):
    """−mean(log π_θ(a|s)·Â)."""
    check_policy_inputs(logp, advantages, batch)
    return -jnp.mean(logp * advantages), {}


def make(config: TrainConfig) -> Algorithm:
    return Algorithm(name="impala", policy_loss=policy_loss, critic="current",
                     estimator="none", minibatch_targets=current_vtrace)

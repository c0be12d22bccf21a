"""IMPALA's actor-critic loss (Espeholt et al. 2018) (spec §3).

V-trace is recomputed at every minibatch with the *current* π_θ and V_θ against the
logged β (stop-gradient), so the targets follow the learner through the epochs:

    L_pg = −mean(log π_θ(a|s) · Â),   value target v_t from the same V-trace.

The recomputation lives in `common.total_loss` (`recompute_vtrace=True`). No constraint,
so no fraction metric (PPO: ppo/clipped_fraction, SPO: spo/outside_fraction, VACO:
vaco/filtered_fraction).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxvaco.algos.common import Algorithm, Batch
from jaxvaco.config import TrainConfig
from jaxvaco.hparams import Hyperparams


def make(config: TrainConfig) -> Algorithm:
    def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state,
                    batch_mean):
        return -jnp.mean(logp * advantages), {}

    return Algorithm(name="impala", policy_loss=policy_loss, recompute_vtrace=True)

"""PPO-clip (Schulman et al. 2017) with a choice of anchor (spec §3).

    r = π_θ(a|s) / anchor(a|s)
    L_pg = −mean(w · min(r·Â, clip(r, 1 − ε, 1 + ε)·Â))

- anchor "behaviour" [paper: Schulman et al. 2017, as asynchronous PPO runs it with logged
  log-probs]: anchor = β; w = 1.
- anchor "learner" [paper: Hilton et al. 2021, decoupled PPO]: anchor = π_T, the learner at
  the start of the iteration, and w = min(ρ̄, π_T/β) corrects for the behaviour policy.
  w is applied once, by the trainer's estimate step (`primitives.weight_placement`):
  after normalisation with GAE (w·min(r·Â, clip(r)·Â) = min(r·wÂ, clip(r)·wÂ) for w ≥ 0),
  or inside V-trace's Â, never both.

The anchor's log-prob is `Batch.logp_anchor`. `ppo/clipped_fraction` is the fraction of
samples whose gradient the clip removes.
"""

from __future__ import annotations

from jaxvaco.algos.common import Algorithm, Batch, check_policy_inputs, from_options
from jaxvaco.config import TrainConfig
from jaxvaco.hparams import Hyperparams
from jaxvaco.primitives import clipped_surrogate


def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state, batch_mean):
    """−mean(min(r·Â, clip(r, 1 ± ε)·Â)), r = π_θ/anchor (w is already in Â)."""
    check_policy_inputs(logp, advantages, batch)
    per_sample, clipped = clipped_surrogate(logp, batch.logp_anchor, advantages, hp.clip_coef)
    return per_sample.mean(), {"ppo/clipped_fraction": clipped.mean()}


def make(config: TrainConfig) -> Algorithm:
    return from_options("ppo", policy_loss, config.ppo, anchor=config.ppo.anchor)

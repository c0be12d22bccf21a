"""PPO-clip (Schulman et al. 2017) with a choice of anchor (spec §3).

    r = π_θ(a|s) / anchor(a|s)
    L_pg = −mean(w · min(r·Â, clip(r, 1 − ε, 1 + ε)·Â))

- anchor "behaviour" [standard]: anchor = β, the logged log-probs; w = 1.
- anchor "learner" [Hilton et al. 2021, decoupled PPO]: anchor = π_T, the learner at the
  start of the iteration, and w = min(ρ̄, π_T/β) corrects for the behaviour policy. w is
  applied once, by the trainer's estimate step (`Algorithm.importance_weight`): after
  normalisation with GAE (w·min(r·Â, clip(r)·Â) = min(r·wÂ, clip(r)·wÂ) for w ≥ 0), or
  inside V-trace's Â, never both.

`ppo/clipped_fraction` is the fraction of samples whose gradient the clip removes.
"""

from __future__ import annotations

from jaxvaco.algos.common import Algorithm, Batch, anchor_logp, from_options
from jaxvaco.config import TrainConfig
from jaxvaco.hparams import Hyperparams
from jaxvaco.primitives import clipped_surrogate


def make(config: TrainConfig) -> Algorithm:
    anchor = config.ppo.anchor

    def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state,
                    batch_mean):
        per_sample, clipped = clipped_surrogate(logp, anchor_logp(batch, anchor), advantages,
                                                hp.clip_coef)
        return per_sample.mean(), {"ppo/clipped_fraction": clipped.mean()}

    return from_options("ppo", policy_loss, config.ppo, anchor=anchor)

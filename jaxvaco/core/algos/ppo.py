"""PPO-clip (Schulman et al. 2017) with a choice of anchor (docs/concepts/spec.md §3).

    r = π_θ(a|s) / anchor(a|s)
    L_pg = −mean(w · min(r·Â, clip(r, 1 − ε, 1 + ε)·Â))

- anchor "behaviour" [paper: Schulman et al. 2017, as asynchronous PPO runs it with logged
  log-probs]: anchor = β; w = 1.
- anchor "learner" [paper: Hilton et al. 2021, decoupled PPO]: anchor = π_T, the learner at
  the start of the iteration, and w = min(ρ̄, π_T/β) corrects for the behaviour policy.
  w is applied once, by the trainer's estimate step (`primitives.weight_placement`):
  after normalisation with GAE (w·min(r·Â, clip(r)·Â) = min(r·wÂ, clip(r)·wÂ) for w ≥ 0),
  or inside V-trace's Â, never both.

ε is the shared `--clip-coef` (CleanRL's flag; SPO reads it too). The anchor's log-prob is
`Batch.logp_anchor`. `ppo/clipped_fraction` is the fraction of samples whose gradient the
clip removes.
"""

from __future__ import annotations

import dataclasses

from jaxvaco.core.algos.common import (
    TRUNCATIONS,
    Algorithm,
    Anchor,
    Batch,
    EstimateConfig,
    check_policy_inputs,
    from_options,
    truncation_problems,
)
from jaxvaco.core.algos.spec import AlgorithmSpec
from jaxvaco.core.algos.tuning import EQUAL_BUDGET_SEARCH
from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.primitives import clipped_surrogate


@dataclasses.dataclass(frozen=True)
class PPOConfig(EstimateConfig):
    """Options of `ppo`: the clipped surrogate on the chosen anchor."""

    anchor: Anchor = "behaviour"
    """behaviour: r = π_θ/β (logged log-probs); learner: r = π_θ/π_T, the sample weighted once
    by min(rho_bar, π_T/β) (decoupled PPO, Hilton et al. 2021)."""


def policy_loss(logp, advantages, batch: Batch, hp: Hyperparams, algo_state, batch_mean):
    """−mean(min(r·Â, clip(r, 1 ± ε)·Â)), r = π_θ/anchor (w is already in Â)."""
    check_policy_inputs(logp, advantages, batch)
    per_sample, clipped = clipped_surrogate(logp, batch.logp_anchor, advantages, hp.clip_coef)
    return per_sample.mean(), {"ppo/clipped_fraction": clipped.mean()}


def build(options: PPOConfig) -> Algorithm:
    return from_options("ppo", policy_loss, options, anchor=options.anchor)


SPEC = AlgorithmSpec(
    name="ppo", options=PPOConfig, build=build, traced=TRUNCATIONS,
    tuned={"learning_rate": 2.95e-3, "ent_coef": 0.0252, "update_epochs": 8,
           "num_minibatches": 4, "clip_coef": 0.166},
    provenance=EQUAL_BUDGET_SEARCH + " Tuned with the learner's critic.",
    fraction="ppo/clipped_fraction", check=truncation_problems)

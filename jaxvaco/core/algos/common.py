"""What every algorithm shares: the batch layout, the algorithm record, the total loss.

An algorithm is a small record: which critic and estimator its per-iteration estimate
uses, the anchor of its ratio, and a pure policy-loss function with one signature,

    policy_loss(logp, advantages, batch, hp, algo_state, batch_mean) -> (loss, metrics)

where `logp` = log π_θ(a|s) of the parameters being optimised and `batch_mean` the mean
over the whole minibatch, for any statistic that must be minibatch-wide (`BatchMean`).
The value loss and the entropy bonus are common to all:

    L = L_pg + c_v·½·mean((V_θ(s) − v_t)²) − c_e·mean(H[π_θ(·|s)])

(the ½ is the CleanRL/PureJaxRL convention; the c_v of docs/concepts/spec.md §3 absorbs it).

`EstimateConfig` is the option group every algorithm with a per-iteration estimate
extends (`--NAME.critic`, `--NAME.advantages`, ρ̄, c̄).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import chex
import jax
import jax.numpy as jnp
from flax import struct

from jaxvaco.core.estimators import Targets
from jaxvaco.core.hparams import Hyperparams
from jaxvaco.core.primitives import BatchMean, k3, weight_placement

Critic = Literal["behaviour", "learner"]
Estimator = Literal["gae", "vtrace"]
AdvantageForm = Literal["weighted", "normalize_then_weight"]
Anchor = Literal["behaviour", "learner"]


@dataclasses.dataclass(frozen=True)
class EstimateConfig:
    """The per-iteration estimate of an algorithm: which critic and which estimator
    give the advantages Â and value targets, frozen for the iteration's E × M updates.

    The importance correction from β to the learner enters once (`Algorithm.importance_weight`):
    with anchor β the objective's ratio π_θ/β carries it, so Â holds no ρ; with anchor π_T,
    ρ_t = min(ρ̄, π_T/β) multiplies Â once (inside V-trace, or after normalisation).
    """

    critic: Critic = "learner"
    """learner: V_T(s), V_T(s') recomputed with the learner's critic once per iteration;
    behaviour: the values V_β(s) recorded at collection time, which collapse under lag
    [ours] (for ablations)."""
    advantages: Estimator = "gae"
    """gae: GAE(γ, λ); vtrace: V-trace(γ, λ, ρ̄, c̄) with ratios π_T/β (value targets with
    truncated traces; Â_t = q_t − V(s_t), times ρ_t only with anchor π_T)."""
    rho_bar: float = 1.0
    """ρ̄: truncation of V-trace's ρ and of the anchor-π_T importance weight."""
    c_bar: float = 1.0
    """c̄: truncation of V-trace's trace coefficient c."""
    advantage_form: AdvantageForm = "weighted"
    """With anchor π_T and V-trace: weighted = ρ_t inside Â_t, then per-minibatch
    normalisation; normalize_then_weight = normalise the unweighted Â, then multiply by ρ_t.
    With anchor π_T and GAE the weight always comes after normalisation."""


TRUNCATIONS = ("rho_bar", "c_bar")
"""The traced options of `EstimateConfig` (V-trace's and the importance weight's ρ̄, c̄)."""


def truncation_problems(options, flag: Callable[[str], str]) -> list[str]:
    """ρ̄ and c̄ must be > 0."""
    return [f"{flag(name)} must be > 0, got {getattr(options, name)}."
            for name in TRUNCATIONS if not getattr(options, name) > 0]


@struct.dataclass
class Batch:
    """One iteration's data, every field [T, N, ...] (a minibatch is [T, N/M, ...])."""

    obs: jax.Array  # observations the actors acted on (normalised if enabled)
    actions: jax.Array
    logp_behaviour: jax.Array  # log β(a|s), recorded at collection time
    logp_anchor: jax.Array  # log of the ratio's denominator: log π_T or log β (`anchor`)
    rewards: jax.Array  # scaled by `reward_scale`
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array  # s', the observation after the step (before any reset)
    advantages: jax.Array | None  # per-iteration Â (frozen for the epochs); None: no estimate
    targets: jax.Array | None  # per-iteration value targets v_t; None: no estimate
    pg_weights: jax.Array | None = None  # ρ_t applied after normalisation; None = 1


PolicyLoss = Callable[
    [jax.Array, jax.Array, Batch, Hyperparams, dict, BatchMean],
    tuple[jax.Array, dict[str, jax.Array]],
]

MinibatchTargets = Callable[[jax.Array, jax.Array, jax.Array, Batch, Hyperparams], Targets]
"""(log π_θ(a|s), V_θ(s), V_θ(s'), minibatch, hp) -> (Â, v_t) from the parameters being
optimised, recomputed at every minibatch (IMPALA)."""


def unchanged_state(algo_state: dict, metrics: dict, hp: Hyperparams) -> dict:
    """The update of an algorithm without state, or whose state stays fixed."""
    return algo_state


class Algorithm(NamedTuple):
    """An algorithm as a composition: critic × estimator × anchor × policy objective.

    The first three are read by the trainer's per-iteration estimate step
    (`jaxvaco.core.learner.estimate`); the objective is `policy_loss`. PPO, VACO and every cell
    of the lag ablation are such records (`from_options`), not separate code paths.
    """

    name: str
    policy_loss: PolicyLoss
    critic: str = "behaviour"
    """Values behind Â and v_t: "behaviour" (recorded V_β), "learner" (V_T, recomputed once
    per iteration) or "current" (V_θ at every minibatch, by `minibatch_targets`)."""
    estimator: str = "gae"
    """"gae", "vtrace" (ratios π_T/β), or "none": no per-iteration estimate, the
    algorithm's `minibatch_targets` supplies Â and v_t."""
    anchor: str = "behaviour"
    """Denominator of the objective's ratio: "behaviour" (β) or "learner" (π_T)."""
    advantage_form: str = "weighted"
    """Anchor π_T with V-trace: "weighted" (ρ inside Â) or "normalize_then_weight"."""
    minibatch_targets: MinibatchTargets | None = None
    """Per-minibatch hook replacing the batch's Â and v_t (IMPALA's V-trace with π_θ, V_θ)."""
    init_state: Callable[[Hyperparams], dict] = lambda hp: {}
    update_state: Callable[[dict, dict, Hyperparams], dict] = unchanged_state

    @property
    def needs_learner_batch(self) -> bool:
        """True when the estimate or the loss reads π_T or V_T over the whole batch."""
        return "learner" in (self.critic, self.anchor) or self.estimator == "vtrace"

    @property
    def importance_weight(self) -> str:
        """Where ρ_t = min(ρ̄, π_T/β) enters (`primitives.weight_placement`): "none" with
        anchor β, "inside" V-trace's weighted Â with anchor π_T, else
        "after_normalization" (`Batch.pg_weights`): with GAE decoupled PPO's weight
        (Hilton et al. 2021), with V-trace the normalise-then-weight form [ours]."""
        weighted_vtrace = self.estimator == "vtrace" and self.advantage_form == "weighted"
        return weight_placement(self.anchor, rho_in_advantages=weighted_vtrace)


def from_options(name: str, policy_loss: PolicyLoss, options: EstimateConfig,
                 anchor: str = "behaviour", **rest) -> Algorithm:
    """The record of an algorithm whose estimate is set by an `EstimateConfig` group."""
    return Algorithm(name=name, policy_loss=policy_loss, critic=options.critic,
                     estimator=options.advantages, anchor=anchor,
                     advantage_form=options.advantage_form, **rest)


def check_policy_inputs(logp: jax.Array, advantages: jax.Array, batch: Batch) -> None:
    """A policy loss's entry check: log π_θ, Â and the batch's log-probs are [T, N]."""
    chex.assert_rank(logp, 2)
    chex.assert_equal_shape([logp, advantages, batch.logp_behaviour, batch.logp_anchor])


def normalize_advantages(advantages: jax.Array, batch_mean: BatchMean = jnp.mean
                         ) -> jax.Array:
    """(Â − mean Â) / (std Â + 1e-8) over the whole minibatch."""
    mean = batch_mean(advantages)
    std = jnp.sqrt(batch_mean(jnp.square(advantages - mean)))
    return (advantages - mean) / (std + 1e-8)


def total_loss(
    params: Any,
    apply_fn: Callable,
    batch: Batch,
    hp: Hyperparams,
    algo_state: dict,
    algo: Algorithm,
    norm_adv: bool,
    batch_mean: BatchMean = jnp.mean,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The loss of one minibatch and its metrics.

    Â and v_t are the batch's (the per-iteration estimate), or the algorithm's
    `minibatch_targets` of the current π_θ, V_θ. `batch_mean` (`BatchMean`) serves the
    minibatch-wide advantage normalisation and the policy loss; the loss itself is this
    device's mean, whose gradient the trainer averages over the devices.
    """
    chex.assert_equal_shape([batch.rewards, batch.logp_behaviour, batch.logp_anchor])
    pi, values = apply_fn(params, batch.obs)
    logp = pi.log_prob(batch.actions)
    if algo.minibatch_targets is None:
        advantages, targets = batch.advantages, batch.targets
    else:
        next_values = apply_fn(params, batch.final_obs, method="value")
        advantages, targets = algo.minibatch_targets(logp, values, next_values, batch, hp)
    chex.assert_equal_shape([batch.rewards, values, advantages, targets])
    if norm_adv:
        advantages = normalize_advantages(advantages, batch_mean)
    if batch.pg_weights is not None:
        advantages = advantages * batch.pg_weights
    pg_loss, metrics = algo.policy_loss(logp, advantages, batch, hp, algo_state, batch_mean)
    value_loss = 0.5 * jnp.mean((values - targets) ** 2)
    entropy = pi.entropy().mean()
    loss = pg_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    log_ratio = logp - batch.logp_behaviour  # k3 estimate of KL(β‖π_θ) from actions a ~ β
    approx_kl = jnp.mean(k3(log_ratio))
    metrics = {
        **metrics,
        "loss/policy": pg_loss,
        "loss/value": value_loss,
        "loss/entropy": entropy,
        "loss/approx_kl": approx_kl,
    }
    return loss, metrics

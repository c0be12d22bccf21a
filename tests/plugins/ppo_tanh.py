"""A third-party algorithm in one file, as a researcher would write it outside jaxvaco:
PPO whose clip is replaced by a smooth tanh trust region (tests/test_plugin_algorithm.py).

    r = π_θ(a|s) / β(a|s)
    L_pg = −mean(Â · (1 + s·tanh((r − 1)/s)))

s (`--ppo-tanh.scale`) is a traced option: sweepable in a grid, changeable on resume. The
surrogate's slope in r is 1 at r = 1 and falls to 0 far from it, like a soft clip at ±s.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from jaxvaco.core.algos.common import (
    TRUNCATIONS,
    EstimateConfig,
    check_policy_inputs,
    from_options,
    truncation_problems,
)
from jaxvaco.core.algos.spec import AlgorithmSpec


@dataclasses.dataclass(frozen=True)
class PPOTanhConfig(EstimateConfig):
    """Options of `ppo_tanh`: PPO with a tanh trust region."""

    scale: float = 0.2
    """s: the width of the soft trust region around r = 1."""


def policy_loss(logp, advantages, batch, hp, algo_state, batch_mean):
    """−mean(Â·(1 + s·tanh((r − 1)/s)))."""
    check_policy_inputs(logp, advantages, batch)
    scale = hp.algo["scale"]
    ratio = jnp.exp(logp - batch.logp_behaviour)
    squashed = 1.0 + scale * jnp.tanh((ratio - 1.0) / scale)
    saturated = jnp.abs(ratio - 1.0) > scale
    return -jnp.mean(advantages * squashed), {"ppo_tanh/saturated_fraction": saturated.mean()}


def problems(options, flag):
    out = truncation_problems(options, flag)
    return out + ([] if options.scale > 0 else [f"{flag('scale')} must be > 0."])


SPEC = AlgorithmSpec(
    name="ppo_tanh", options=PPOTanhConfig,
    build=lambda options: from_options("ppo_tanh", policy_loss, options),
    tuned={"learning_rate": 2.5e-3, "ent_coef": 0.01, "update_epochs": 4,
           "num_minibatches": 4},
    provenance="untuned: a test algorithm", traced=(*TRUNCATIONS, "scale"),
    fraction="ppo_tanh/saturated_fraction", check=problems)

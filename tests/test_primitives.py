"""The anchor / importance-weight rule stated once (`primitives.weight_placement`,
`primitives.anchor_terms`), read by the RL trainer and the LLM losses alike, and the shape
checks at the entry of every shared primitive and policy loss (issue 36).

Expected values: the rule as docs/concepts/spec.md §3 and §5 state it, and float64 NumPy.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from references import close, f32

from jaxvaco.core import primitives
from jaxvaco.core.algos import algorithms, make_algorithm
from jaxvaco.core.algos.common import Batch
from jaxvaco.core.config import TrainConfig
from jaxvaco.host.grid import hyperparams_from_config
from jaxvaco.llm import losses

T, N = 6, 4
RHO_BAR = 1.3


def log_probs(seed: int):
    """log π_T, log β [T, N], far enough apart for ρ to be truncated somewhere."""
    rng = np.random.default_rng(seed)
    logp_behaviour = np.log(rng.uniform(0.1, 0.9, (T, N)))
    return logp_behaviour + rng.normal(size=(T, N)) * 0.6, logp_behaviour


# (anchor, ρ already inside Â, corrected) -> where ρ_t enters (the table of
# docs/concepts/spec.md §3 and ppo's decoupled anchor; §5: group advantages carry no ρ;
# VACO's uncorrected π_T anchor)
RULE = {
    ("behaviour", False, True): "none",
    ("behaviour", True, True): "none",
    ("behaviour", False, False): "none",
    ("learner", True, True): "inside",
    ("learner", False, True): "after_normalization",
    ("learner", False, False): "none",
    ("learner", True, False): "none",
}


@pytest.mark.parametrize("case", list(RULE))
def test_weight_placement(case):
    anchor, inside, corrected = case
    assert primitives.weight_placement(anchor, inside, corrected) == RULE[case]


def test_weight_placement_rejects_an_unknown_anchor():
    with pytest.raises(ValueError, match="anchor"):
        primitives.weight_placement("behavior", False)


@pytest.mark.parametrize("anchor,placement", [
    ("behaviour", "none"), ("learner", "inside"), ("learner", "after_normalization"),
    ("learner", "none")])
def test_anchor_terms(anchor, placement):
    logp_learner, logp_behaviour = log_probs(0)
    got = primitives.anchor_terms(anchor, placement, f32(logp_behaviour), f32(logp_learner),
                                  RHO_BAR)
    expected = logp_learner if anchor == "learner" else logp_behaviour
    close(got.logp, expected)
    if placement != "after_normalization":
        assert got.weights is None
        return
    weights = np.minimum(RHO_BAR, np.exp(logp_learner - logp_behaviour))
    assert (weights == RHO_BAR).any() and (weights < 1).any()
    close(got.weights, weights)


def test_anchor_beta_needs_no_learner_log_probs():
    logp_behaviour = f32(log_probs(1)[1])
    got = primitives.anchor_terms("behaviour", "none", logp_behaviour, None, RHO_BAR)
    assert got.logp is logp_behaviour and got.weights is None


@pytest.mark.parametrize("algo", sorted(algorithms()))
def test_rl_algorithms_follow_the_rule(algo):
    """Every RL record's placement is the rule's on its anchor and estimator."""
    for anchor in ("behaviour", "learner"):
        for advantages, form in (("gae", "weighted"), ("vtrace", "weighted"),
                                 ("vtrace", "normalize_then_weight")):
            config = dataclasses.replace(TrainConfig(), algo=algo)
            if algo != "impala":
                options = dataclasses.replace(getattr(config, algo), advantages=advantages,
                                              advantage_form=form)
                if hasattr(options, "anchor"):
                    options = dataclasses.replace(options, anchor=anchor)
                config = dataclasses.replace(config, **{algo: options})
            record = make_algorithm(config)
            inside = record.estimator == "vtrace" and record.advantage_form == "weighted"
            assert record.importance_weight == RULE[(record.anchor, inside, True)]


@pytest.mark.parametrize("anchor,corrected", [("behaviour", True), ("learner", True),
                                              ("learner", False)])
def test_llm_token_anchor_follows_the_rule(anchor, corrected):
    """Group advantages carry no ρ: anchor π_T gets w after the normalisation (or none,
    uncorrected); anchor β never."""
    logp_learner, logp_behaviour = log_probs(2)
    got = losses.token_anchor(anchor, corrected, f32(logp_behaviour), f32(logp_learner),
                              RHO_BAR)
    close(got.logp, logp_learner if anchor == "learner" else logp_behaviour)
    if RULE[(anchor, False, corrected)] == "after_normalization":
        close(got.weights, np.minimum(RHO_BAR, np.exp(logp_learner - logp_behaviour)))
    else:
        assert got.weights is None


# ------------------------------------------------------------------- entry checks

FULL, COLUMN = jnp.zeros((T, N)), jnp.zeros((T, 1))  # broadcastable, but not one shape


@pytest.mark.parametrize("call", [
    lambda: primitives.removed_gradient(FULL, COLUMN, FULL > 0),
    lambda: primitives.clipped_surrogate(FULL, FULL, COLUMN, 0.2),
    lambda: primitives.clipped_surrogate(FULL, COLUMN, FULL, 0.2),
    lambda: primitives.tv_filter_mask(FULL, COLUMN, 0.2, "batch"),
    lambda: primitives.masked_mean(FULL, COLUMN > 0),
    lambda: primitives.anchor_terms("learner", "after_normalization", FULL, COLUMN, 1.0),
    lambda: primitives.truncated_importance_weight(jnp.zeros((T, N), jnp.int32), 1.0),
    lambda: primitives.half_abs_deviation(jnp.zeros((T, N), jnp.int32)),
    lambda: primitives.k3(jnp.zeros((T, N), jnp.int32)),
], ids=["removed_gradient", "clipped_surrogate adv", "clipped_surrogate anchor",
        "tv_filter_mask", "masked_mean", "anchor_terms", "truncated_importance_weight",
        "half_abs_deviation", "k3"])
def test_shared_primitives_check_shapes_at_entry(call):
    with pytest.raises(AssertionError):
        call()


def rl_batch(logp_anchor=FULL) -> Batch:
    return Batch(obs=jnp.zeros((T, N, 4)), actions=jnp.zeros((T, N), jnp.int32),
                 logp_behaviour=FULL, logp_anchor=logp_anchor, rewards=FULL,
                 terminated=FULL > 0, truncated=FULL > 0, final_obs=jnp.zeros((T, N, 4)),
                 advantages=FULL, targets=FULL)


@pytest.mark.parametrize("algo", sorted(algorithms()))
def test_rl_policy_losses_check_shapes_at_entry(algo):
    config = dataclasses.replace(TrainConfig(), algo=algo)
    hp = hyperparams_from_config(config)
    record = make_algorithm(config)
    state = record.init_state(hp)
    record.policy_loss(FULL, FULL, rl_batch(), hp, state, jnp.mean)  # the right shapes pass
    for logp, advantages, batch in ((FULL, COLUMN, rl_batch()), (COLUMN, FULL, rl_batch()),
                                    (FULL, FULL, rl_batch(COLUMN)),
                                    (FULL[None], FULL[None], rl_batch())):
        with pytest.raises(AssertionError):
            record.policy_loss(logp, advantages, batch, hp, state, jnp.mean)


@pytest.mark.parametrize("loss", [
    lambda *a: losses.grpo_policy_loss(*a, 0.2),
    lambda *a: losses.vaco_policy_loss(*a, 0.2, "batch"),
], ids=["grpo", "vaco"])
def test_llm_policy_losses_check_shapes_at_entry(loss):
    B, L = 4, 5
    tokens, per_completion = jnp.zeros((B, L)), jnp.zeros(B)
    valid = jnp.ones((B, L), bool)
    loss(tokens, tokens, per_completion, valid)  # the right shapes pass
    for args in ((tokens, tokens[:, :1], per_completion, valid),
                 (tokens, tokens, tokens, valid),
                 (tokens, tokens, per_completion, valid[:, :1])):
        with pytest.raises(AssertionError):
            loss(*args)

"""GRPO and token-level VACO policy losses (docs/concepts/spec.md §5), over a batch of completions.

Shapes: a batch holds B completions; per-token arrays are [B, T−1] (position t scores
token y_{t+1}) with `valid` marking generated tokens; per-completion arrays are [B].
Every token mean is over the valid tokens of the (mini)batch [ours: the token-level
mean of DAPO/Dr. GRPO, so each token weighs the same whatever its completion's length]:

    mean_v(x) = Σ_{b,t} valid·x / Σ_{b,t} valid

The policy losses take `agg`, how the per-token surrogate is reduced (`aggregate`):
"token" is mean_v above (the default); "sequence" is GRPO's original mean over each
completion's tokens, then over completions; "constant" is Dr. GRPO's Σ valid·x / (B·(T−1)),
a fixed normaliser, so neither a completion's length nor the batch's scales a token.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from jaxvaco.core.primitives import (
    AnchorTerms,
    anchor_terms,
    clipped_surrogate,
    half_abs_deviation,
    k3,
    masked_mean,
    truncated_importance_weight,
    tv_filter_mask,
    weight_placement,
)


def group_advantages(rewards: jax.Array, group_size: int, eps: float = 1e-6,
                     scale: str = "std") -> jax.Array:
    """Â_i = (R_i − mean_g R) / (std_g R + ε) within each group of `group_size` consecutive
    completions of one prompt [paper: GRPO, Shao et al. 2024; population std, ours]. [B]

    scale = "none" keeps Â_i = R_i − mean_g R [paper: Dr. GRPO, Liu et al. 2025]: no
    division by a group's std, which makes a group with one success in G weigh as much as
    an evenly split one.

    A group whose rewards are all equal gets Â = 0. In VACO this is the whole alignment
    step: with no critic, the group-normalised reward is the advantage.
    """
    groups = rewards.reshape(-1, group_size)
    centred = groups - groups.mean(axis=1, keepdims=True)
    if scale == "std":
        centred = centred / (groups.std(axis=1, keepdims=True) + eps)
    elif scale != "none":
        raise ValueError(f"unknown advantage scale {scale!r}")
    return centred.reshape(rewards.shape)


def aggregate(x: jax.Array, valid: jax.Array, how: str = "token") -> jax.Array:
    """Reduce per-token x [B, T−1] to a scalar over the valid tokens:

        token:     Σ_{b,t} valid·x / Σ_{b,t} valid                     (mean_v)
        sequence:  mean_b (Σ_t valid·x / Σ_t valid)                     (GRPO)
        constant:  Σ_{b,t} valid·x / (B·(T−1))                          (Dr. GRPO)

    A completion with no valid token contributes 0 to "sequence".
    """
    if how == "token":
        return masked_mean(x, valid)
    x = jnp.where(valid, x, 0.0)
    if how == "sequence":
        return jnp.mean(x.sum(-1) / jnp.maximum(valid.sum(-1), 1))
    if how == "constant":
        return x.sum() / x.size
    raise ValueError(f"unknown loss aggregation {how!r}")


def token_advantages(advantages: jax.Array, shape: tuple[int, ...],
                     weights: jax.Array | None = None) -> jax.Array:
    """Each completion's Â [B] on its tokens [B, T−1], times the per-token importance
    weights w ≥ 0 when given (`is_weight`): w·Â, the weighted advantage."""
    adv = jnp.broadcast_to(advantages[:, None], shape)
    return adv if weights is None else adv * jax.lax.stop_gradient(weights)


def is_weight(logp_learner: jax.Array, logp_behaviour: jax.Array,
              rho_bar: float) -> jax.Array:
    """w_t = min(ρ̄, π_T(y_t)/β(y_t)) per token: the truncated importance weight that a
    π_T-anchored objective applies once, after group normalisation, so that its gradient
    at θ = π_T is the policy gradient of π_T from β's completions [paper: decoupled PPO,
    Hilton et al. 2021; per token, ours]. [B, T−1]"""
    return truncated_importance_weight(logp_learner - logp_behaviour, rho_bar)


def token_anchor(anchor: str, corrected: bool, logp_behaviour: jax.Array,
                 logp_learner: jax.Array, rho_bar: float) -> AnchorTerms:
    """(log of the ratio's denominator, per-token weights or None) [B, T−1]: the RL
    trainer's rule (`primitives.weight_placement`, `primitives.anchor_terms`) with the
    group-normalised Â, which carries no ρ: anchor β without weights; anchor π_T with
    w_t = min(ρ̄, π_T/β) after the group normalisation (`is_weight`), or without it where
    `corrected` is False (token-level VACO's `vaco.weight = "none"`)."""
    placement = weight_placement(anchor, rho_in_advantages=False, corrected=corrected)
    return anchor_terms(anchor, placement, logp_behaviour, logp_learner, rho_bar)


def grpo_policy_loss(logp: jax.Array, logp_anchor: jax.Array, advantages: jax.Array,
                     valid: jax.Array, clip_eps: float, agg: str = "token",
                     weights: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """GRPO's clipped surrogate on the token ratio to an anchor:

        r_t = π_θ(y_t)/anchor(y_t),   L = −mean_v(min(r_t·A_t, clip(r_t, 1−ε, 1+ε)·A_t))

    with A_t = Â, the completion's advantage on each of its tokens, or A_t = w_t·Â with
    `weights` (mean_v, or `aggregate(·, agg)`). Anchor β (GRPO), no weights; or anchor π_T
    with w_t = min(ρ̄, π_T/β) (`token_anchor`): decoupled clip [paper: Hilton et al. 2021],
    w·min(r·Â, clip(r)·Â) = min(r·wÂ, clip(r)·wÂ) for w ≥ 0, as the RL trainer's anchor-π_T
    PPO (`primitives.weight_placement`, "after_normalization").
    Returns (L, clip fraction): the share of valid tokens whose gradient the clip removes.
    """
    chex.assert_rank([logp, advantages], [2, 1])
    chex.assert_equal_shape([logp, logp_anchor, valid])
    adv = token_advantages(advantages, logp.shape, weights)
    per_token, clipped = clipped_surrogate(logp, logp_anchor, adv, clip_eps)
    return aggregate(per_token, valid, agg), masked_mean(clipped, valid)


def token_filter_mask(log_ratio: jax.Array, advantages: jax.Array, valid: jax.Array,
                      delta: float, kind: str) -> jax.Array:
    """VACO's filter (docs/concepts/spec.md §3.1) per token: m_t = 0 where the token's gradient
    would push TV beyond δ. [B, T−1] bool, False at invalid tokens. `advantages` per
    completion [B] or per token [B, T−1].

    `primitives.tv_filter_mask` averages tv over every entry it is given; the
    invalid tokens get log-ratio 0 (tv 0), so its "batch" test D_all ≥ δ·n_valid/n_all is
    exactly the test over the valid tokens, mean_v(tv) ≥ δ.
    """
    log_ratio = jnp.where(valid, log_ratio, 0.0)
    threshold = delta * valid.mean() if kind == "batch" else delta
    adv = (jnp.broadcast_to(advantages[:, None], log_ratio.shape) if advantages.ndim == 1
           else advantages)
    return tv_filter_mask(log_ratio, adv, threshold, kind) & valid


def vaco_policy_loss(logp: jax.Array, logp_anchor: jax.Array, advantages: jax.Array,
                     valid: jax.Array, delta: float, kind: str, agg: str = "token",
                     weights: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """Token-level VACO (docs/concepts/spec.md §5) [paper: filter per token with r = π_θ/π_T;
    form ours]:

        r_t = π_θ(y_t)/anchor(y_t)        anchor = π_T (default) or β
        A_t = Â, or w_t·Â with `weights` (anchor π_T: w_t = min(ρ̄, π_T/β), `token_anchor`)
        tv_t = ½·|r_t − 1|,   D = mean_v(tv_t)   (the minibatch's TV estimate)
        m_t = 0 if D ≥ δ and A_t·(r_t − 1) > 0, else 1   ("batch"; "sample": tv_t ≥ δ)
        L = −mean_v(sg(m_t)·r_t·A_t)

    No clip and no min(); mean_v, or `aggregate(·, agg)`. Returns (L, filter fraction over
    the valid tokens).
    """
    chex.assert_rank([logp, advantages], [2, 1])
    chex.assert_equal_shape([logp, logp_anchor, valid])
    log_ratio = logp - logp_anchor
    adv = token_advantages(advantages, logp.shape, weights)
    mask = jax.lax.stop_gradient(token_filter_mask(log_ratio, adv, valid, delta, kind))
    surrogate = mask * jnp.exp(log_ratio) * adv
    return -aggregate(surrogate, valid, agg), 1.0 - masked_mean(mask, valid)


def k3_kl(logp: jax.Array, logp_ref: jax.Array, valid: jax.Array) -> jax.Array:
    """mean_v(exp(u) − u − 1), u = log π_ref − log π_θ: the k3 estimate of KL(π_θ‖π_ref)
    from tokens of π_θ [paper: GRPO's KL penalty to the reference policy]."""
    return masked_mean(k3(logp_ref - logp), valid)


def token_tv(log_ratio: jax.Array, valid: jax.Array) -> jax.Array:
    """mean_v(½·|r − 1|): the sample estimate of the token-level TV (docs/concepts/spec.md §1.2)."""
    return masked_mean(half_abs_deviation(log_ratio), valid)

"""GRPO and token-level VACO policy losses (spec §5), over a batch of completions.

Shapes: a batch holds B completions; per-token arrays are [B, T−1] (position t scores
token y_{t+1}) with `valid` marking generated tokens; per-completion arrays are [B].
Every token mean is over the valid tokens of the (mini)batch [ours: the token-level
mean of DAPO/Dr. GRPO, so each token weighs the same whatever its completion's length]:

    mean_v(x) = Σ_{b,t} valid·x / Σ_{b,t} valid
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxvaco.algos.common import half_abs_deviation, removed_gradient
from jaxvaco.algos.vaco import tv_filter_mask


def masked_mean(x: jax.Array, valid: jax.Array) -> jax.Array:
    """mean_v(x): mean of x over the valid entries (0 if there are none)."""
    return jnp.sum(jnp.where(valid, x, 0.0)) / jnp.maximum(valid.sum(), 1)


def group_advantages(rewards: jax.Array, group_size: int, eps: float = 1e-6) -> jax.Array:
    """Â_i = (R_i − mean_g R) / (std_g R + ε) within each group of `group_size` consecutive
    completions of one prompt [paper: GRPO, Shao et al. 2024; population std, ours]. [B]

    A group whose rewards are all equal gets Â = 0. In VACO this is the whole alignment
    step: with no critic, the group-normalised reward is the advantage (spec §5).
    """
    groups = rewards.reshape(-1, group_size)
    centred = groups - groups.mean(axis=1, keepdims=True)
    return (centred / (groups.std(axis=1, keepdims=True) + eps)).reshape(rewards.shape)


def grpo_policy_loss(logp: jax.Array, logp_behavior: jax.Array, advantages: jax.Array,
                     valid: jax.Array, clip_eps: float) -> tuple[jax.Array, jax.Array]:
    """GRPO's clipped surrogate on the token ratio to the generating policy β:

        r_t = π_θ(y_t)/β(y_t),   L = −mean_v(min(r_t·Â, clip(r_t, 1−ε, 1+ε)·Â))

    with the completion's Â on each of its tokens. Returns (L, clip fraction): the share
    of valid tokens whose gradient the clip removes.
    """
    ratio = jnp.exp(logp - logp_behavior)
    adv = jnp.broadcast_to(advantages[:, None], ratio.shape)
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
    clipped = removed_gradient(ratio, adv, jnp.abs(ratio - 1) > clip_eps)
    return -masked_mean(surrogate, valid), masked_mean(clipped, valid)


def token_filter_mask(log_ratio: jax.Array, advantages: jax.Array, valid: jax.Array,
                      delta: float, kind: str) -> jax.Array:
    """VACO's filter (spec §3.1) per token: m_t = 0 where the token's gradient would push
    TV beyond δ. [B, T−1] bool, False at invalid tokens.

    `jaxvaco.algos.vaco.tv_filter_mask` averages tv over every entry it is given; the
    invalid tokens get log-ratio 0 (tv 0), so its "batch" test D_all ≥ δ·n_valid/n_all is
    exactly the test over the valid tokens, mean_v(tv) ≥ δ.
    """
    log_ratio = jnp.where(valid, log_ratio, 0.0)
    threshold = delta * valid.mean() if kind == "batch" else delta
    adv = jnp.broadcast_to(advantages[:, None], log_ratio.shape)
    return tv_filter_mask(log_ratio, adv, threshold, kind) & valid


def vaco_policy_loss(logp: jax.Array, logp_anchor: jax.Array, advantages: jax.Array,
                     valid: jax.Array, delta: float, kind: str) -> tuple[jax.Array, jax.Array]:
    """Token-level VACO (spec §5) [paper: filter per token with r = π_θ/π_T; form ours]:

        r_t = π_θ(y_t)/anchor(y_t)        anchor = π_T (default) or β
        tv_t = ½·|r_t − 1|,   D = mean_v(tv_t)   (the minibatch's TV estimate)
        m_t = 0 if D ≥ δ and Â·(r_t − 1) > 0, else 1   ("batch"; "sample": tv_t ≥ δ)
        L = −mean_v(sg(m_t)·r_t·Â)

    No clip and no min(). Returns (L, filter fraction over the valid tokens).
    """
    log_ratio = logp - logp_anchor
    mask = jax.lax.stop_gradient(token_filter_mask(log_ratio, advantages, valid, delta, kind))
    surrogate = mask * jnp.exp(log_ratio) * advantages[:, None]
    return -masked_mean(surrogate, valid), 1.0 - masked_mean(mask, valid)


def k3_kl(logp: jax.Array, logp_ref: jax.Array, valid: jax.Array) -> jax.Array:
    """mean_v(exp(u) − u − 1), u = log π_ref − log π_θ: the k3 estimate of KL(π_θ‖π_ref)
    from tokens of π_θ [paper: GRPO's KL penalty to the reference policy]."""
    u = logp_ref - logp
    return masked_mean(jnp.expm1(u) - u, valid)


def token_tv(log_ratio: jax.Array, valid: jax.Array) -> jax.Array:
    """mean_v(½·|r − 1|): the sample estimate of the token-level TV of spec §1.2."""
    return masked_mean(half_abs_deviation(log_ratio), valid)

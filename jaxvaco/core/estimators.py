"""Advantage estimators on [time, env] arrays: GAE(γ, λ) and V-trace(γ, λ, ρ̄, c̄)
(docs/concepts/spec.md §2).

Both share the time-limit convention: `next_values[t]` is V(s'_t), the value of the
observation that actually followed step t (before any reset), so

- on termination the bootstrap is zero:     γ·(1 − terminated_t)·V(s'_t) = 0;
- on truncation it bootstraps from V(s'_t), the final observation;
- a trace never crosses an episode end:     the recursion is multiplied by (1 − done_t),
  done_t = terminated_t ∨ truncated_t.

All inputs are [T, N]; the last step of the batch bootstraps from `next_values[T−1]`.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp


class Targets(NamedTuple):
    advantages: jax.Array  # [T, N] policy-gradient advantages Â_t
    targets: jax.Array  # [T, N] value targets v_t


def _check_time_env(*arrays: jax.Array) -> None:
    """Every input is [T, N] and they agree (rlax's habit: shapes checked at entry)."""
    chex.assert_rank(arrays, 2)
    chex.assert_equal_shape(arrays)


def _reverse_discounted_scan(deltas: jax.Array, decay: jax.Array) -> jax.Array:
    """acc_t = deltas_t + decay_t · acc_{t+1}, acc_T = 0, scanned backwards over axis 0."""

    def step(acc, inputs):
        delta, dec = inputs
        acc = delta + dec * acc
        return acc, acc

    _, out = jax.lax.scan(step, jnp.zeros_like(deltas[0]), (deltas, decay), reverse=True)
    return out


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    lam: float,
) -> Targets:
    """Generalised advantage estimation (Schulman et al. 2016).

        δ_t = r_t + γ·(1 − term_t)·V(s'_t) − V(s_t)
        Â_t = δ_t + γλ·(1 − done_t)·Â_{t+1}
        v_t = Â_t + V(s_t)
    """
    _check_time_env(rewards, values, next_values, terminated, truncated)
    not_term = 1.0 - terminated.astype(rewards.dtype)
    not_done = 1.0 - (terminated | truncated).astype(rewards.dtype)
    deltas = rewards + gamma * not_term * next_values - values
    advantages = _reverse_discounted_scan(deltas, gamma * lam * not_done)
    return Targets(advantages, advantages + values)


def vtrace(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    log_ratio: jax.Array,
    gamma: float,
    lam: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    weight_advantages: bool = True,
) -> Targets:
    """V-trace (Espeholt et al. 2018) with λ as in rlax; `log_ratio` = log π(a|s) − log β(a|s).

        ρ_t = min(ρ̄, π/β),   c_t = λ·min(c̄, π/β)
        δ_t = ρ_t·(r_t + γ·(1 − term_t)·V(s'_t) − V(s_t))
        v_t = V(s_t) + δ_t + γ·(1 − done_t)·c_t·(v_{t+1} − V(s_{t+1}))
        Â_t = ρ_t·(r_t + γ·(1 − term_t)·[λ·v'_{t+1} + (1 − λ)·V(s'_t)] − V(s_t))

    where v'_{t+1} is v_{t+1} inside an episode and V(s'_t) after its end or at the batch's
    last step. With π = β and ρ̄ = c̄ = 1, v_t is the GAE(λ) return and Â_t the GAE advantage.
    `weight_advantages=False` returns Â_t/ρ_t (the bracket minus V(s_t)), for callers that
    normalise advantages before applying ρ_t. Outputs carry no gradient.
    """
    _check_time_env(rewards, values, next_values, terminated, truncated, log_ratio)
    ratio = jnp.exp(log_ratio)
    rho = jnp.minimum(rho_bar, ratio)
    c = lam * jnp.minimum(c_bar, ratio)
    not_term = 1.0 - terminated.astype(rewards.dtype)
    not_done = 1.0 - (terminated | truncated).astype(rewards.dtype)
    deltas = rho * (rewards + gamma * not_term * next_values - values)
    corrections = _reverse_discounted_scan(deltas, gamma * not_done * c)  # v_t − V(s_t)
    next_corrections = jnp.concatenate([corrections[1:], jnp.zeros_like(corrections[:1])])
    next_targets = next_values + not_done * next_corrections
    q = rewards + gamma * not_term * (lam * next_targets + (1.0 - lam) * next_values)
    advantages = rho * (q - values) if weight_advantages else q - values
    return jax.lax.stop_gradient(Targets(advantages, values + corrections))

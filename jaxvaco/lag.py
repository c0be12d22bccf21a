"""The simulated policy-lag model (spec §1.1, [ours]): a ring buffer of past parameters.

The buffer holds B = max_delay + 1 snapshots in the jitted loop's carry, stacked on a
leading axis; at the start of iteration T the learner's θ_T is written to slot T mod B,
so slots hold θ_T, θ_{T−1}, ..., θ_{T−B+1}. Actor group g then acts with
θ_{T−d_g}, d_g = min(k_g(T), T): the clamp gives θ_0 early in training. Memory is
B × (parameter count), independent of the batch.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def init_history(params: Any, max_delay: int) -> Any:
    """B = max_delay + 1 copies of θ_0, stacked on a new leading axis."""
    return jax.tree.map(lambda p: jnp.broadcast_to(p, (max_delay + 1,) + p.shape), params)


def buffer_size(history: Any) -> int:
    return jax.tree.leaves(history)[0].shape[0]


def push(history: Any, params: Any, iteration: jax.Array) -> Any:
    """Write θ_T into slot T mod B."""
    slot = iteration % buffer_size(history)
    return jax.tree.map(lambda h, p: h.at[slot].set(p), history, params)


def gather(history: Any, iteration: jax.Array, delays: jax.Array) -> Any:
    """Parameters θ_{T−d_g} for each group, stacked on a leading axis [G]."""
    slots = (iteration - delays) % buffer_size(history)
    return jax.tree.map(lambda h: h[slots], history)


def sample_delays(
    key: jax.Array, mode: str, num_groups: int, max_delay: jax.Array, iteration: jax.Array
) -> jax.Array:
    """k_g(T) for each group, clamped at T (so θ_{T−k} never precedes θ_0). int32 [G].

    fixed:   k_g = K
    uniform: k_g ~ U{0, ..., K}, fresh for each group and iteration
    spread:  k_g = round(g·K / (G − 1))
    """
    groups = jnp.arange(num_groups)
    if mode == "fixed":
        delays = jnp.full((num_groups,), max_delay)
    elif mode == "uniform":
        delays = jax.random.randint(key, (num_groups,), 0, max_delay + 1)
    elif mode == "spread":
        delays = jnp.round(groups * max_delay / max(num_groups - 1, 1))
    else:
        raise ValueError(f"unknown lag mode {mode!r}")
    return jnp.minimum(delays.astype(jnp.int32), iteration)

"""Running observation normalisation as a pure pytree.

Statistics are merged batch by batch with the parallel variance algorithm (Chan et al.), so the
result equals the mean and (population) variance of all observations seen so far.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class RunningMeanStd:
    """Running mean, population variance and sample count of observations.

    ``count`` is float32: it is only used as a merge weight, where rounding is harmless.
    """

    mean: jax.Array
    var: jax.Array
    count: jax.Array


def init_running_stats(shape: tuple[int, ...]) -> RunningMeanStd:
    """Empty statistics for observations of ``shape`` (normalising with them only clips)."""
    return RunningMeanStd(
        mean=jnp.zeros(shape, jnp.float32),
        var=jnp.ones(shape, jnp.float32),
        count=jnp.zeros((), jnp.float32),
    )


def update_running_stats(stats: RunningMeanStd, batch: jax.Array) -> RunningMeanStd:
    """Merge a non-empty ``batch`` of shape ``[..., *obs_shape]`` (leading axes flattened)."""
    obs_ndim = stats.mean.ndim
    flat = batch.reshape((-1,) + batch.shape[batch.ndim - obs_ndim :]).astype(jnp.float32)
    batch_count = jnp.float32(flat.shape[0])
    batch_mean = flat.mean(axis=0)
    batch_var = jnp.square(flat - batch_mean).mean(axis=0)

    total = stats.count + batch_count
    delta = batch_mean - stats.mean
    mean = stats.mean + delta * (batch_count / total)
    sum_sq = (
        stats.var * stats.count
        + batch_var * batch_count
        + jnp.square(delta) * (stats.count * batch_count / total)
    )
    return RunningMeanStd(mean=mean, var=sum_sq / total, count=total)


def normalize_obs(
    stats: RunningMeanStd, obs: jax.Array, clip: float = 10.0, eps: float = 1e-8
) -> jax.Array:
    """Standardise ``obs`` (any leading axes) with ``stats`` and clip to ``[-clip, clip]``."""
    scaled = (obs - stats.mean) / jnp.sqrt(stats.var + eps)
    return jnp.clip(scaled, -clip, clip)

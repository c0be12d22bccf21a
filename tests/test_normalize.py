"""Tests for running observation normalisation against numpy statistics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxvaco.core.normalize import (
    RunningMeanStd,
    init_running_stats,
    normalize_obs,
    update_running_stats,
)


@pytest.mark.parametrize("obs_shape", [(3,), (2, 2), ()])
def test_matches_numpy_over_several_updates(obs_shape):
    rng = np.random.default_rng(0)
    batch_leading = [(5, 3), (7,), (2, 4), (1,), (6, 2)]
    stats = init_running_stats(obs_shape)
    seen = []
    for i, leading in enumerate(batch_leading):
        batch = rng.normal(loc=5.0 + i, scale=3.0, size=leading + obs_shape).astype(np.float32)
        stats = update_running_stats(stats, jnp.asarray(batch))
        seen.append(batch.reshape((-1,) + obs_shape))
        data = np.concatenate(seen).astype(np.float64)
        np.testing.assert_allclose(stats.mean, data.mean(axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(stats.var, data.var(axis=0), rtol=1e-4)
        assert float(stats.count) == data.shape[0]
    assert stats.mean.shape == obs_shape and stats.var.shape == obs_shape


def test_init_is_empty():
    stats = init_running_stats((4,))
    assert isinstance(stats, RunningMeanStd)
    assert float(stats.count) == 0.0
    np.testing.assert_array_equal(stats.mean, np.zeros(4))
    np.testing.assert_array_equal(stats.var, np.ones(4))


def test_update_is_jittable_and_scannable():
    batches = jax.random.normal(jax.random.key(1), (6, 8, 3)) * 2.0 + 1.0
    stats, _ = jax.lax.scan(
        lambda s, b: (update_running_stats(s, b), None), init_running_stats((3,)), batches
    )
    data = np.asarray(batches, np.float64).reshape(-1, 3)
    np.testing.assert_allclose(stats.mean, data.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.var, data.var(axis=0), rtol=1e-4)


def test_normalize_obs_standardises_and_clips():
    stats = RunningMeanStd(
        mean=jnp.array([1.0, -2.0]), var=jnp.array([4.0, 0.25]), count=jnp.array(10.0)
    )
    obs = jnp.array([[3.0, -2.5], [1.0, 100.0]])
    out = normalize_obs(stats, obs, clip=10.0)
    expected = np.array([[1.0, -1.0], [0.0, 10.0]])  # (obs - mean) / std, last one clipped
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_allclose(normalize_obs(stats, obs, clip=3.0)[1, 1], 3.0)

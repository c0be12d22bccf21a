"""Unit tests of the policy-lag ring buffer, delay sampler and `LagModel` implementations
(`jaxvaco.core.lag`, docs/concepts/spec.md §1.1).

References are plain Python: a list of every parameter snapshot pushed so far, and the
delay rules of the spec written out with Python integers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxvaco.core import lag


def snapshot(t: int) -> dict:
    """A small params pytree whose every value identifies iteration t."""
    return {"dense": {"kernel": jnp.full((3, 2), float(t)), "bias": jnp.full((2,), t + 0.5)},
            "scale": jnp.asarray(-float(t))}


def assert_tree_equal(actual, expected):
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


def test_init_history_holds_b_copies_of_theta0():
    params = snapshot(7)
    history = lag.init_history(params, 3)
    assert lag.buffer_size(history) == 4
    for leaf, p in zip(jax.tree.leaves(history), jax.tree.leaves(params), strict=True):
        assert leaf.shape == (4,) + p.shape
        for b in range(4):
            np.testing.assert_array_equal(leaf[b], p)


@pytest.mark.parametrize("max_delay", [1, 3])
def test_push_gather_match_list_reference(max_delay):
    """After pushing θ_0..θ_T, gather(T, d) returns θ_{T−d} for every d ≤ min(K, T), and
    the buffer holds exactly the last K+1 snapshots (older ones are overwritten)."""
    history = lag.init_history(snapshot(0), max_delay)
    pushed = []  # reference: every θ_t ever pushed, in order
    push = jax.jit(lag.push)
    gather = jax.jit(lag.gather)
    for t in range(20):
        history = push(history, snapshot(t), jnp.int32(t))
        pushed.append(t)
        for d in range(min(max_delay, t) + 1):
            got = gather(history, jnp.int32(t), jnp.array([d], jnp.int32))
            assert_tree_equal(jax.tree.map(lambda x: x[0], got), snapshot(pushed[t - d]))
        # every group at once, with different delays
        delays = np.array([min(k, t) for k in range(max_delay + 1)][::-1], np.int32)
        got = gather(history, jnp.int32(t), jnp.asarray(delays))
        for g, d in enumerate(delays):
            assert_tree_equal(jax.tree.map(lambda x, g=g: x[g], got), snapshot(t - d))
        # the buffer's contents as a set: the last min(K, t) + 1 snapshots, plus copies of
        # θ_0 in the slots not yet written
        kernels = sorted(float(v) for v in history["dense"]["kernel"][:, 0, 0])
        expected = sorted(pushed[-(max_delay + 1):] + [0] * max(0, max_delay - t))
        assert kernels == expected


def test_gather_stacks_groups_on_leading_axis():
    history = lag.init_history(snapshot(0), 2)
    for t in range(5):
        history = lag.push(history, snapshot(t), jnp.int32(t))
    got = lag.gather(history, jnp.int32(4), jnp.array([0, 2, 1, 0], jnp.int32))
    assert got["dense"]["kernel"].shape == (4, 3, 2)
    np.testing.assert_array_equal(got["dense"]["kernel"][:, 0, 0], [4.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(got["scale"], [-4.0, -2.0, -3.0, -4.0])


KEYS = jax.random.split(jax.random.PRNGKey(123), 400)


@pytest.mark.parametrize("max_delay", [0, 1, 3])
def test_fixed_delays_are_k_clamped_at_t(max_delay):
    for t in range(6):
        for key in KEYS[:3]:
            d = lag.sample_delays(key, "fixed", 4, jnp.int32(max_delay), jnp.int32(t))
            assert d.dtype == jnp.int32 and d.shape == (4,)
            np.testing.assert_array_equal(d, [min(max_delay, t)] * 4)


@pytest.mark.parametrize("max_delay", [1, 3])
def test_uniform_delays_cover_0_to_min_k_t(max_delay):
    sample = jax.jit(jax.vmap(lambda k, t: lag.sample_delays(k, "uniform", 3, max_delay, t),
                              in_axes=(0, None)))
    for t in (0, 1, 2, 5):
        delays = np.asarray(sample(KEYS, jnp.int32(t)))
        assert delays.shape == (len(KEYS), 3) and delays.dtype == np.int32
        bound = min(max_delay, t)
        assert delays.min() >= 0 and delays.max() <= bound
        # with 1200 draws every value in {0..bound} appears, in every group
        for g in range(3):
            assert set(delays[:, g].tolist()) == set(range(bound + 1))
    # fresh per group: groups do not all get the same draw
    delays = np.asarray(sample(KEYS, jnp.int32(10)))
    assert (delays != delays[:, :1]).any(axis=1).mean() > 0.3
    # and fresh per key (iteration): draws vary across keys
    assert len({tuple(row) for row in delays.tolist()}) > 1


def test_uniform_delays_depend_only_on_key():
    a = lag.sample_delays(KEYS[0], "uniform", 4, jnp.int32(3), jnp.int32(9))
    b = lag.sample_delays(KEYS[0], "uniform", 4, jnp.int32(3), jnp.int32(9))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("num_groups,max_delay", [(2, 3), (3, 4), (4, 6), (5, 2), (3, 1)])
def test_spread_delays(num_groups, max_delay):
    """Group g lags round(g·K/(G−1)), clamped at T (ties as Python's round)."""
    for t in (0, 1, 2, 3, 100):
        d = lag.sample_delays(KEYS[0], "spread", num_groups, jnp.int32(max_delay), jnp.int32(t))
        expected = [min(round(g * max_delay / (num_groups - 1)), t) for g in range(num_groups)]
        np.testing.assert_array_equal(d, expected)
    # first group is synchronous, last group has the full delay K
    d = lag.sample_delays(KEYS[0], "spread", num_groups, jnp.int32(max_delay), jnp.int32(100))
    assert int(d[0]) == 0 and int(d[-1]) == max_delay


def test_unknown_mode_raises():
    with pytest.raises(ValueError, match="unknown lag mode"):
        lag.sample_delays(KEYS[0], "bogus", 2, jnp.int32(1), jnp.int32(3))


# ------------------------------------------------------------- the LagModel interface
# Each implementation driven through init/behaviour with θ_T = T on a toy pytree, so the
# parameters an actor group gets name the iteration they are from. The device-sync one,
# which needs a device axis, is tested the same way in tests/test_distributed.py.


def theta(t) -> dict:
    """A toy parameter pytree whose every value is t: θ_t, the learner after t iterations."""
    return {"w": jnp.full((2,), t, jnp.float32), "b": jnp.asarray(t, jnp.float32)}


def drive(model: lag.LagModel, steps: int, lag_delay: int) -> list[tuple]:
    """(behaviour params, delays) for T = 0..steps−1, the learner's θ_T = T."""
    behaviour = jax.jit(model.behaviour)
    state, out = model.init(theta(0)), []
    for t in range(steps):
        got = behaviour(state, theta(t), jnp.int32(t), KEYS[t], jnp.int32(lag_delay))
        state = got.state
        out.append((got.params, np.asarray(got.delays)))
    return out


def test_no_lag_acts_with_the_learner():
    for t, (params, delays) in enumerate(drive(lag.NO_LAG, 4, lag_delay=3)):
        assert_tree_equal(params, theta(t))
        np.testing.assert_array_equal(delays, [0])


@pytest.mark.parametrize("mode", ["fixed", "uniform", "spread"])
@pytest.mark.parametrize("lag_delay", [0, 2, 3])
def test_ring_buffer_acts_with_the_params_of_delay_iterations_ago(mode, lag_delay):
    """Group g gets θ_{T−k_g}; with the fixed schedule that is θ_{max(T − K, 0)}."""
    groups = 3
    model = lag.ring_buffer(capacity=3, mode=mode, num_groups=groups)
    for t, (params, delays) in enumerate(drive(model, 9, lag_delay)):
        assert delays.shape == (groups,) and ((0 <= delays) & (delays <= min(lag_delay, t))).all()
        if mode == "fixed":
            np.testing.assert_array_equal(delays, [min(lag_delay, t)] * groups)
        if mode == "spread":
            expected = [min(round(g * lag_delay / (groups - 1)), t) for g in range(groups)]
            np.testing.assert_array_equal(delays, expected)
        for g in range(groups):
            assert_tree_equal(jax.tree.map(lambda x, g=g: x[g], params), theta(t - delays[g]))
        if mode == "fixed":
            np.testing.assert_array_equal(params["b"], [max(t - lag_delay, 0)] * groups)


def test_replay_acts_with_the_recorded_delays():
    """k(T) = schedule[T] clamped at T (the last entry past the end); θ_{T−k(T)} acts."""
    schedule = [2, 0, 3, 1, 3, 2]  # T = 0 asks for 2: clamped to 0
    model = lag.replay(np.asarray(schedule), capacity=3)
    expected = [min(schedule[min(t, len(schedule) - 1)], t) for t in range(8)]
    for t, (params, delays) in enumerate(drive(model, 8, lag_delay=0)):
        np.testing.assert_array_equal(delays, [expected[t]])
        assert_tree_equal(jax.tree.map(lambda x: x[0], params), theta(t - expected[t]))

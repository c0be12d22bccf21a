"""GAE and V-trace (docs/concepts/spec.md §2) against plain-NumPy loop references and rlax.

The references below are written from the spec's equations, one env column and one time
step at a time, in float64; the code under test runs in float32 on [T, N] arrays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from references import close, f32, gae_reference, vtrace_reference

from jaxvaco.core.estimators import gae, vtrace

T, N = 24, 6
GAMMA, LAM = 0.97, 0.9
TOL = 2e-4  # close()'s tolerance: float32 recursions over T steps


# --------------------------------------------------------------------------- inputs


def random_trajectories(seed, episode_ends=True, consistent=True):
    """Random [T, N] float64 inputs. Terminations and truncations (disjoint) at random.

    With `consistent`, next_values[t] = values[t + 1] inside an episode (the same state),
    and the value of a fresh final observation after an episode end or at the last step.
    """
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N)) * 2.0
    next_values = rng.normal(size=(T, N)) * 2.0
    if episode_ends:
        terminated = rng.random((T, N)) < 0.12
        truncated = (rng.random((T, N)) < 0.12) & ~terminated
        # make sure both kinds occur
        terminated[3, 0], truncated[3, 0] = True, False
        terminated[5, 1], truncated[5, 1] = False, True
    else:
        terminated = np.zeros((T, N), bool)
        truncated = np.zeros((T, N), bool)
    if consistent:
        done = terminated | truncated
        inside = ~done[:-1]
        next_values[:-1][inside] = values[1:][inside]
    log_ratio = rng.normal(size=(T, N)) * 0.6
    return rewards, values, next_values, terminated, truncated, log_ratio


def to_jax(*arrays):
    return [f32(a) if a.dtype != bool else jnp.asarray(a) for a in arrays]


# --------------------------------------------------------------------------- GAE


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("consistent", [True, False])
def test_gae_matches_numpy_reference(seed, consistent):
    r, v, nv, term, trunc, _ = random_trajectories(seed, consistent=consistent)
    assert term.any() and trunc.any()
    adv, targets = gae(*to_jax(r, v, nv, term, trunc), GAMMA, LAM)
    ref_adv, ref_targets = gae_reference(r, v, nv, term, trunc, GAMMA, LAM)
    assert adv.shape == (T, N) and targets.shape == (T, N)
    close(adv, ref_adv, TOL)
    close(targets, ref_targets, TOL)


def test_gae_truncation_bootstraps_termination_does_not():
    # Two envs, 3 steps; the episode ends at t = 1: env 0 terminates, env 1 is truncated.
    rewards = np.array([[0.5, 0.5], [1.0, 1.0], [7.0, 7.0]])
    values = np.array([[0.3, 0.3], [2.0, 2.0], [-4.0, -4.0]])
    next_values = np.array([[2.0, 2.0], [5.0, 5.0], [9.0, 9.0]])  # V(s'_1) = 5 (final obs)
    terminated = np.array([[False, False], [True, False], [False, False]])
    truncated = np.array([[False, False], [False, True], [False, False]])
    gamma, lam = 0.9, 0.8
    adv, targets = gae(*to_jax(rewards, values, next_values, terminated, truncated), gamma, lam)
    adv = np.asarray(adv)
    # terminated: no bootstrap, and nothing after the episode end leaks in
    np.testing.assert_allclose(adv[1, 0], 1.0 - 2.0, atol=1e-6)
    # truncated: bootstrap from V(final observation), trace still cut
    np.testing.assert_allclose(adv[1, 1], 1.0 + gamma * 5.0 - 2.0, atol=1e-6)
    # the step before the end carries the end's advantage back
    for n, a1 in enumerate([1.0 - 2.0, 1.0 + gamma * 5.0 - 2.0]):
        delta0 = 0.5 + gamma * 2.0 - 0.3
        np.testing.assert_allclose(adv[0, n], delta0 + gamma * lam * a1, atol=1e-5)
    np.testing.assert_allclose(np.asarray(targets), adv + values, atol=1e-6)
    # V-trace on-policy behaves the same way at both ends
    vt = vtrace(*to_jax(rewards, values, next_values, terminated, truncated,
                        np.zeros_like(rewards)), gamma, lam)
    np.testing.assert_allclose(np.asarray(vt.advantages)[1], adv[1], atol=1e-6)
    np.testing.assert_allclose(np.asarray(vt.targets)[1], adv[1] + values[1], atol=1e-6)


# --------------------------------------------------------------------------- V-trace


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (1.5, 0.8), (0.7, 2.0), (1e6, 1e6)])
def test_vtrace_matches_numpy_reference(seed, rho_bar, c_bar):
    r, v, nv, term, trunc, lr = random_trajectories(seed)
    ratio = np.exp(lr)
    # the truncation levels actually bite on these inputs
    assert (ratio > max(rho_bar, c_bar)).any() or rho_bar > 100
    assert (ratio < min(rho_bar, c_bar)).any()
    out = vtrace(*to_jax(r, v, nv, term, trunc, lr), GAMMA, LAM, rho_bar, c_bar)
    ref_adv, ref_vs = vtrace_reference(r, v, nv, term, trunc, lr, GAMMA, LAM, rho_bar, c_bar)
    close(out.targets, ref_vs, TOL)
    close(out.advantages, ref_adv, TOL)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("rho_bar", [1.0, 1.5, 0.7])
def test_vtrace_matches_rlax_without_episode_end(seed, rho_bar):
    r, v, nv, term, trunc, lr = random_trajectories(seed, episode_ends=False)
    out = vtrace(*to_jax(r, v, nv, term, trunc, lr), GAMMA, LAM, rho_bar, 1.0)

    def column(v_tm1, v_t, r_t, rho_tm1):
        discount = jnp.full_like(r_t, GAMMA)
        return rlax.vtrace_td_error_and_advantage(
            v_tm1, v_t, r_t, discount, rho_tm1, lambda_=LAM,
            clip_rho_threshold=rho_bar, clip_pg_rho_threshold=rho_bar)

    rl = jax.vmap(column, in_axes=1, out_axes=1)(*to_jax(v, nv, r, np.exp(lr)))
    rl_targets = np.asarray(rl.errors, np.float64) + v
    close(out.targets, rl_targets, TOL)
    close(out.advantages, np.asarray(rl.pg_advantage, np.float64), TOL)
    # and rlax agrees with our NumPy reference (a check of the reference itself)
    ref_adv, ref_vs = vtrace_reference(r, v, nv, term, trunc, lr, GAMMA, LAM, rho_bar, 1.0)
    close(rl_targets, ref_vs, TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lam", [0.0, 0.95, 1.0])
def test_vtrace_on_policy_equals_gae(seed, lam):
    r, v, nv, term, trunc, _ = random_trajectories(seed)
    zeros = np.zeros_like(r)
    out = vtrace(*to_jax(r, v, nv, term, trunc, zeros), GAMMA, lam, 1.0, 1.0)
    ref = gae(*to_jax(r, v, nv, term, trunc), GAMMA, lam)
    ref_adv, ref_targets = gae_reference(r, v, nv, term, trunc, GAMMA, lam)
    close(out.advantages, ref_adv, TOL)
    close(out.targets, ref_targets, TOL)
    np.testing.assert_allclose(np.asarray(out.advantages), np.asarray(ref.advantages),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(out.targets), np.asarray(ref.targets),
                               rtol=1e-5, atol=1e-4)


def test_vtrace_outputs_carry_no_gradient():
    r, v, nv, term, trunc, lr = random_trajectories(0)
    rj, vj, nvj, tj, trj, lrj = to_jax(r, v, nv, term, trunc, lr)

    def f(values, log_ratio):
        out = vtrace(rj, values, nvj, tj, trj, log_ratio, GAMMA, LAM)
        return out.advantages.sum() + out.targets.sum()

    gv, glr = jax.grad(f, argnums=(0, 1))(vj, lrj)
    assert not np.asarray(gv).any() and not np.asarray(glr).any()


@pytest.mark.parametrize("estimator", ["gae", "vtrace"])
def test_estimators_reject_mismatched_shapes(estimator):
    """Shapes are checked at entry (chex): a [T] or transposed input is an error, not a
    silent broadcast."""
    rewards, values, next_values, terminated, truncated, log_ratio = to_jax(
        *random_trajectories(0))
    extra = (log_ratio,) if estimator == "vtrace" else ()
    fn = gae if estimator == "gae" else vtrace
    with pytest.raises(AssertionError):
        fn(rewards, values[:, 0], next_values, terminated, truncated, *extra, GAMMA, LAM)
    with pytest.raises(AssertionError):
        fn(rewards, values.T, next_values, terminated, truncated, *extra, GAMMA, LAM)

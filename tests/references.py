"""Plain NumPy references shared by the estimator, stage and loss tests, and the helpers
that compare the trainer's float32 results with them."""

import jax.numpy as jnp
import numpy as np


def f32(x):
    """`x` as a float32 JAX array, the dtype the trainer computes in."""
    return jnp.asarray(x, jnp.float32)


def close(actual, expected, tol=1e-5):
    """assert_allclose with relative tolerance `tol` and absolute `tol` × max(1, max |expected|)."""
    actual = np.asarray(actual, np.float64)
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale)


def gae_reference(rewards, values, next_values, terminated, truncated, gamma, lam):
    """δ_t = r_t + γ·V(s'_t)·[not terminated] − V(s_t); Â_t = δ_t + γλ·Â_{t+1} inside an
    episode (the trace is cut at termination and at truncation)."""
    steps, envs = rewards.shape
    adv = np.zeros((steps, envs))
    for n in range(envs):
        acc = 0.0
        for t in reversed(range(steps)):
            bootstrap = 0.0 if terminated[t, n] else next_values[t, n]
            delta = rewards[t, n] + gamma * bootstrap - values[t, n]
            if terminated[t, n] or truncated[t, n] or t == steps - 1:
                acc = delta
            else:
                acc = delta + gamma * lam * acc
            adv[t, n] = acc
    return adv, adv + values


def vtrace_reference(rewards, values, next_values, terminated, truncated, log_ratio,
                     gamma, lam, rho_bar, c_bar):
    """Spec §2, per step:
        ρ_t = min(ρ̄, π/β), c_t = λ·min(c̄, π/β)
        δ_t = ρ_t (r_t + γ V(s_{t+1}) − V(s_t))            (V(s_{t+1}) = 0 on termination)
        v_t = V(s_t) + δ_t + γ c_t (v_{t+1} − V(s_{t+1}))   (no trace across an episode end
                                                            or past the batch's last step)
        Â_t = ρ_t (r_t + γ [λ v_{t+1} + (1 − λ) V(s_{t+1})] − V(s_t))
    Inside an episode V(s_{t+1}) is values[t + 1]; after an episode end or at the last
    step it is next_values[t] (the final observation) and v_{t+1} := V(s_{t+1}).
    """
    steps, envs = rewards.shape
    vs = np.zeros((steps, envs))
    adv = np.zeros((steps, envs))
    for n in range(envs):
        for t in reversed(range(steps)):
            ratio = np.exp(log_ratio[t, n])
            rho = min(rho_bar, ratio)
            c = lam * min(c_bar, ratio)
            cut = terminated[t, n] or truncated[t, n] or t == steps - 1
            if terminated[t, n]:
                v_next, vs_next = 0.0, 0.0
            elif cut:
                v_next, vs_next = next_values[t, n], next_values[t, n]
            else:
                v_next, vs_next = values[t + 1, n], vs[t + 1, n]
            delta = rho * (rewards[t, n] + gamma * v_next - values[t, n])
            vs[t, n] = values[t, n] + delta + gamma * c * (vs_next - v_next)
            q = rewards[t, n] + gamma * (lam * vs_next + (1 - lam) * v_next)
            adv[t, n] = rho * (q - values[t, n])
    return adv, vs

"""Tests for the gymnax and brax adapters: shapes, episode boundaries and bookkeeping."""

import os
import subprocess
import sys

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxvaco.core.envs import UnknownEnvError, available_envs, env_spec, make_env
from jaxvaco.core.envs.brax_env import BRAX_ENV_NAMES, BraxVecEnv, registered_brax_envs
from jaxvaco.core.envs.gymnax_env import GymnaxVecEnv

CARTPOLE_X_LIMIT = 2.4
CARTPOLE_THETA_LIMIT = 12 * 2 * np.pi / 360
PENDULUM_ANGLE_LIMIT = 0.2  # brax inverted_pendulum terminates when |angle| > 0.2


def constant_policy(value, shape, dtype):
    """Policy ignoring its inputs and always returning ``value``."""
    return lambda key, obs: jnp.full(shape, value, dtype)


def rollout(env, key, num_steps, policy):
    """Reset and run ``num_steps`` jitted steps; returns (reset obs, per-step dict of numpy)."""

    def run(key):
        reset_key, scan_key = jax.random.split(key)
        obs, state = env.reset(reset_key)

        def body(carry, step_key):
            state, obs = carry
            act_key, env_key = jax.random.split(step_key)
            state, res = env.step(env_key, state, policy(act_key, obs))
            return (state, res.obs), res

        _, results = jax.lax.scan(body, (state, obs), jax.random.split(scan_key, num_steps))
        return obs, results

    obs, results = jax.jit(run)(key)
    return np.asarray(obs), {k: np.asarray(v) for k, v in results._asdict().items()}


def check_bookkeeping(reset_obs, res):
    """Check episode ends, completed returns/lengths and final_obs against a numpy recount."""
    num_steps, num_envs = res["reward"].shape
    done = res["terminated"] | res["truncated"]
    assert not np.any(res["terminated"] & res["truncated"])
    prev_obs = np.concatenate([reset_obs[None], res["obs"][:-1]])
    for env_i in range(num_envs):
        ret, length = 0.0, 0
        for t in range(num_steps):
            ret += float(res["reward"][t, env_i])
            length += 1
            if done[t, env_i]:
                assert res["completed_return"][t, env_i] == pytest.approx(ret, rel=1e-5, abs=1e-4)
                assert res["completed_length"][t, env_i] == length
                assert not np.array_equal(res["final_obs"][t, env_i], res["obs"][t, env_i])
                ret, length = 0.0, 0
            else:
                assert res["completed_return"][t, env_i] == 0.0
                assert res["completed_length"][t, env_i] == 0
                np.testing.assert_array_equal(res["final_obs"][t, env_i], res["obs"][t, env_i])
            assert not np.array_equal(res["obs"][t, env_i], prev_obs[t, env_i])
    return done


def check_result_types(res, spec, num_envs, num_steps):
    """Shapes and dtypes of a scanned rollout."""
    assert res["obs"].shape == (num_steps, num_envs, *spec.obs_shape)
    assert res["final_obs"].shape == res["obs"].shape
    assert res["obs"].dtype == res["final_obs"].dtype == np.float32
    assert res["reward"].shape == (num_steps, num_envs) and res["reward"].dtype == np.float32
    for flag in ("terminated", "truncated"):
        assert res[flag].shape == (num_steps, num_envs) and res[flag].dtype == np.bool_
    assert res["completed_return"].dtype == np.float32
    assert res["completed_length"].dtype == np.int32


def first_end(done):
    """Step index of the first episode end of each env (axis 0 is time)."""
    assert done.any(axis=0).all(), "every env must finish an episode"
    return done.argmax(axis=0)


def test_cartpole_spec_and_falling_pole_terminates():
    env = make_env("CartPole-v1", 8)
    spec = env.spec
    assert (spec.name, spec.family, spec.obs_shape) == ("CartPole-v1", "gymnax", (4,))
    assert spec.discrete and spec.num_actions == 2
    assert spec.action_low is None and spec.action_high is None
    assert spec.max_episode_steps == 500
    assert env_spec("CartPole-v1") == spec

    reset_obs, res = rollout(env, jax.random.key(0), 60, constant_policy(0, (8,), jnp.int32))
    check_result_types(res, spec, 8, 60)
    assert reset_obs.shape == (8, 4) and reset_obs.dtype == np.float32
    done = check_bookkeeping(reset_obs, res)
    assert done.sum() >= 8 and not res["truncated"].any()
    # Independent check: terminated exactly when the pre-reset state leaves the bounds.
    final = res["final_obs"]
    out = (np.abs(final[..., 0]) > CARTPOLE_X_LIMIT) | (
        np.abs(final[..., 2]) > CARTPOLE_THETA_LIMIT
    )
    np.testing.assert_array_equal(res["terminated"], out)
    assert np.all(np.abs(res["obs"][done]) <= 0.05)  # the next obs is a fresh reset
    np.testing.assert_array_equal(res["reward"], 1.0)


def test_cartpole_time_limit_truncates_and_overlap_counts_as_terminated():
    key = jax.random.key(3)
    policy = constant_policy(0, (8,), jnp.int32)
    _, free = rollout(make_env("CartPole-v1", 8), key, 40, policy)
    fall_step = first_end(free["terminated"])  # time limit 500 is never reached here
    limit = int(fall_step.min()) + 1  # the earliest fall happens exactly at the time limit
    assert (fall_step + 1 > limit).any(), "need envs that would fall after the limit"

    env_cls, default_params = gymnax.make("CartPole-v1")
    params = default_params.replace(max_steps_in_episode=limit)
    env = GymnaxVecEnv("CartPole-v1", 8, params=params)
    assert env.spec.max_episode_steps == limit
    reset_obs, res = rollout(env, key, 40, policy)
    check_bookkeeping(reset_obs, res)
    first = limit - 1
    falls_at_limit = fall_step == first
    np.testing.assert_array_equal(res["terminated"][first], falls_at_limit)
    np.testing.assert_array_equal(res["truncated"][first], ~falls_at_limit)
    assert not (res["terminated"] | res["truncated"])[:first].any()

    # The overlap case is real: raw gymnax flags both at once for the env falling at the limit.
    env_i = int(np.argmax(falls_at_limit))
    inner = jax.tree.map(lambda x: x[env_i], env.reset(jax.random.split(key)[0])[1].inner)
    for _ in range(limit):
        _, inner, _, raw_term, raw_trunc, _ = env_cls.step(key, inner, 0, params)
    assert bool(raw_term) and bool(raw_trunc)


def test_cartpole_vmaps_over_seeds():
    env = make_env("CartPole-v1", 4)

    def first_step(key):
        _, state = env.reset(key)
        return env.step(key, state, jnp.ones(4, jnp.int32))[1]

    res = jax.jit(jax.vmap(first_step))(jax.random.split(jax.random.key(0), 3))
    assert res.obs.shape == (3, 4, 4) and res.reward.shape == (3, 4)
    assert not np.allclose(res.obs[0], res.obs[1])


def test_breakout_minatar_random_play():
    env = make_env("Breakout-MinAtar", 4)
    spec = env.spec
    assert spec.obs_shape == (10, 10, 4) and spec.discrete and spec.num_actions == 3

    def policy(key, obs):
        return jax.random.randint(key, (4,), 0, 3)

    reset_obs, res = rollout(env, jax.random.key(1), 300, policy)
    check_result_types(res, spec, 4, 300)
    assert reset_obs.shape == (4, 10, 10, 4) and reset_obs.dtype == np.float32
    assert set(np.unique(res["obs"])) <= {0.0, 1.0}
    done = check_bookkeeping(reset_obs, res)
    assert res["terminated"].sum() >= 4 and not res["truncated"].any()
    assert res["completed_return"][done].max() > 0


def test_pendulum_truncates_at_time_limit_and_clips_actions():
    env = make_env("Pendulum-v1", 3)
    spec = env.spec
    assert spec.obs_shape == (3,) and not spec.discrete and spec.num_actions == 1
    assert spec.action_low == (-2.0,) and spec.action_high == (2.0,)
    assert spec.max_episode_steps == 200

    def policy(key, obs):
        return jax.random.uniform(key, (3, 1), minval=-3.0, maxval=3.0)

    reset_obs, res = rollout(env, jax.random.key(2), 450, policy)
    check_result_types(res, spec, 3, 450)
    check_bookkeeping(reset_obs, res)
    assert not res["terminated"].any()
    expected = np.zeros((450, 3), bool)
    expected[[199, 399]] = True
    np.testing.assert_array_equal(res["truncated"], expected)
    assert np.all(res["reward"] <= 0.0) and np.ptp(res["completed_return"][expected]) > 0

    clipped = env._prepare_action(jnp.array([[5.0], [-5.0], [0.5]]))
    np.testing.assert_array_equal(clipped, [[2.0], [-2.0], [0.5]])


def test_brax_inverted_pendulum():
    key = jax.random.key(4)
    zero = constant_policy(0.0, (6, 1), jnp.float32)
    env = make_env("brax/inverted_pendulum", 6)
    spec = env.spec
    assert (spec.name, spec.family, spec.obs_shape) == ("inverted_pendulum", "brax", (4,))
    assert not spec.discrete and spec.num_actions == 1 and spec.max_episode_steps == 1000
    assert spec.action_low == (-1.0,) and spec.action_high == (1.0,)

    reset_obs, free = rollout(env, key, 150, zero)
    check_result_types(free, spec, 6, 150)
    check_bookkeeping(reset_obs, free)
    assert np.all(np.abs(reset_obs) <= 0.01)
    assert not free["truncated"].any()
    # Independent check: terminated exactly when the pole angle exceeds the limit.
    np.testing.assert_array_equal(
        free["terminated"], np.abs(free["final_obs"][..., 1]) > PENDULUM_ANGLE_LIMIT
    )

    # Time limit at the earliest fall: that env terminates, the others are truncated there.
    fall_step = first_end(free["terminated"])
    limit = int(fall_step.min()) + 1
    assert (fall_step + 1 > limit).any()
    limited = BraxVecEnv("inverted_pendulum", 6, max_episode_steps=limit)
    reset_obs, res = rollout(limited, key, 2 * limit + 1, zero)
    check_bookkeeping(reset_obs, res)
    first = limit - 1
    np.testing.assert_array_equal(res["terminated"][first], fall_step == first)
    np.testing.assert_array_equal(res["truncated"][first], fall_step != first)
    assert not (res["terminated"] | res["truncated"])[:first].any()
    np.testing.assert_array_equal(free["final_obs"][:limit], res["final_obs"][:limit])


def test_brax_batch_for_first_episodes_keeps_them_and_does_not_reset():
    """`first_episodes_only` (evaluation's batch): each env's first episode is the auto-
    resetting batch's, bit for bit; after it ends the env steps on from where it fell."""
    key = jax.random.key(6)
    policy = lambda k, obs: jax.random.uniform(k, (6, 1), minval=-1.0, maxval=1.0)  # noqa: E731
    env = make_env("inverted_pendulum", 6)
    once = env.first_episodes_only()
    assert env.auto_reset and not once.auto_reset  # the original batch is unchanged
    reset_obs, resetting = rollout(env, key, 150, policy)
    reset_obs_once, stepping_on = rollout(once, key, 150, policy)
    np.testing.assert_array_equal(reset_obs, reset_obs_once)
    end = first_end(resetting["terminated"] | resetting["truncated"])
    for i, last in enumerate(end):
        for name in ("reward", "terminated", "truncated", "final_obs"):
            np.testing.assert_array_equal(resetting[name][: last + 1, i],
                                          stepping_on[name][: last + 1, i], err_msg=name)
        np.testing.assert_array_equal(resetting["obs"][:last, i], stepping_on["obs"][:last, i])
        # Reset: the observation after the end is near the upright start; stepping on: it is
        # the fallen pole's own next state.
        assert np.all(np.abs(resetting["obs"][last, i]) <= 0.01)
        np.testing.assert_array_equal(stepping_on["obs"][last, i],
                                      stepping_on["final_obs"][last, i])


class EchoEnv:
    """Minimal brax-like environment whose observation is the action it last received.

    Brax itself clips controls inside its actuators, so only a stub can show our clipping.
    """

    def reset(self, rng):
        from brax.envs.base import State

        zero = jnp.zeros(())
        return State(pipeline_state=None, obs=jnp.zeros(1), reward=zero, done=zero)

    def step(self, state, action):
        return state.replace(obs=action)


def test_brax_clips_actions():
    env = BraxVecEnv("inverted_pendulum", 3)
    env._env = EchoEnv()
    key = jax.random.key(5)
    _, state = env.reset(key)
    _, res = env.step(key, state, jnp.array([[5.0], [-7.0], [0.25]]))
    np.testing.assert_array_equal(res.final_obs, [[1.0], [-1.0], [0.25]])


def test_unknown_env_suggests_close_matches():
    with pytest.raises(UnknownEnvError, match="CartPole-v1") as info:
        make_env("CartPole-v0", 2)
    assert isinstance(info.value, ValueError)
    assert "available_envs()" in str(info.value)
    with pytest.raises(UnknownEnvError, match="inverted_pendulum"):
        env_spec("brax/inverted_pendulm")
    with pytest.raises(UnknownEnvError) as info:
        env_spec("xyzzy-v9")
    assert "Did you mean" not in str(info.value)


def test_available_envs_lists_every_gymnax_and_brax_name():
    names = available_envs()
    assert set(gymnax.registered_envs) <= set(names)
    assert sorted(BRAX_ENV_NAMES) == sorted(registered_brax_envs())
    assert set(BRAX_ENV_NAMES) <= set(names)


def test_import_does_not_import_brax():
    code = ("import sys, jaxvaco.core.envs; "
            "assert 'brax' not in sys.modules, 'brax imported eagerly'")
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": repo_root}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)

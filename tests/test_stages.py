"""The trainer's stages, each tested alone (issue 12), and the importance weight of the
estimate stage applied exactly once (issue 11), against plain NumPy.

Expected values come from `tests/references.py` (GAE and V-trace written out per step)
and from the formulas in the docstrings of `jaxvaco.core.algos.common.Algorithm` and
`jaxvaco.core.algos.ppo`, on random seeded inputs.
"""

from __future__ import annotations

import dataclasses

import distrax
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from references import close, f32, gae_reference, vtrace_reference

from jaxvaco.core import lag
from jaxvaco.core.algos import make_algorithm
from jaxvaco.core.algos.common import total_loss
from jaxvaco.core.config import LagConfig, PPOConfig, TrainConfig, VacoConfig
from jaxvaco.core.envs import make_env
from jaxvaco.core.learner import LearnerView, estimate, learner_view
from jaxvaco.core.networks import make_network
from jaxvaco.core.rollout import Rollout, collect, lag_model, select_behaviour
from jaxvaco.core.train import init_state
from jaxvaco.core.train_state import Setup
from jaxvaco.host.grid import hyperparams_from_config

T, N, OBS = 12, 6, 4
RHO_BAR = 1.2
TOL = 2e-5


def setup_for(config: TrainConfig, env=None) -> Setup:
    network = make_network(make_env(config.env, 1).spec, (8,), "tanh")
    return Setup(config, env, network, make_algorithm(config), lag_model(config, None), None,
                 None)


@pytest.fixture(scope="module")
def inputs():
    """A random [T, N] rollout, the learner's view of it and the network's parameters."""
    rng = np.random.default_rng(7)
    config = TrainConfig(num_envs=N, num_steps=T, clip_coef=0.2)
    setup = setup_for(config)
    params = setup.network.init(jax.random.PRNGKey(0), jnp.zeros((1, OBS)))
    terminated = rng.random((T, N)) < 0.1
    truncated = (rng.random((T, N)) < 0.1) & ~terminated
    logp_behaviour = np.log(rng.uniform(0.2, 0.8, (T, N)))
    logp_learner = logp_behaviour + rng.normal(size=(T, N)) * 0.5
    traj = Rollout(
        obs=f32(rng.normal(size=(T, N, OBS))), raw_obs=None,
        actions=jnp.asarray(rng.integers(0, 2, (T, N))), logp=f32(logp_behaviour),
        values=f32(rng.normal(size=(T, N))), rewards=f32(rng.normal(size=(T, N))),
        terminated=jnp.asarray(terminated), truncated=jnp.asarray(truncated),
        final_obs=f32(rng.normal(size=(T, N, OBS))), completed_return=None,
        completed_length=None)
    values, next_values = rng.normal(size=(T, N)), rng.normal(size=(T, N))
    inside = ~(terminated | truncated)[:-1]
    next_values[:-1][inside] = values[1:][inside]  # V_T(s'_t) = V_T(s_{t+1}) in an episode
    view = LearnerView(f32(logp_learner), f32(values), f32(next_values), None)
    behaviour_next = np.asarray(setup.network.apply(params, traj.final_obs, method="value"))
    return params, traj, view, behaviour_next


def reference_estimate(traj, view, behaviour_next, critic, estimator, placement):
    """(Â, v, ρ-weights-after-normalisation or None) in float64 NumPy."""
    np64 = lambda x: np.asarray(x, np.float64)  # noqa: E731
    if critic == "learner":
        values, next_values = np64(view.values), np64(view.next_values)
    else:
        values, next_values = np64(traj.values), np64(behaviour_next)
    ends = (np.asarray(traj.terminated), np.asarray(traj.truncated))
    log_ratio = np64(view.logp_learner) - np64(traj.logp)
    rho = np.minimum(RHO_BAR, np.exp(log_ratio))
    gamma, lam = 0.99, 0.95
    if estimator == "gae":
        adv, targets = gae_reference(np64(traj.rewards), values, next_values, *ends, gamma, lam)
    else:
        adv, targets = vtrace_reference(np64(traj.rewards), values, next_values, *ends,
                                        log_ratio, gamma, lam, RHO_BAR, 1.0)
        if placement != "inside":
            adv = adv / rho  # the reference's Â carries ρ_t: take it out
    return adv, targets, (rho if placement == "after_normalization" else None)


CASES = {  # name: (algo, options, where ρ must enter)
    "ppo": ("ppo", PPOConfig(), "none"),
    "ppo, learner critic": ("ppo", PPOConfig(critic="learner"), "none"),
    "ppo, V-trace on β": ("ppo", PPOConfig(critic="learner", advantages="vtrace"), "none"),
    "decoupled ppo, GAE": ("ppo", PPOConfig(anchor="learner"), "after_normalization"),
    "decoupled ppo, V-trace": ("ppo", PPOConfig(anchor="learner", critic="learner",
                                                advantages="vtrace"), "inside"),
    "vaco default": ("vaco", VacoConfig(), "none"),
    "vaco spec": ("vaco", VacoConfig(anchor="learner", advantages="vtrace",
                                     advantage_form="weighted"), "inside"),
    "vaco π_T, V-trace ntw": ("vaco", VacoConfig(anchor="learner", advantages="vtrace"),
                              "after_normalization"),
    "vaco π_T, GAE": ("vaco", VacoConfig(anchor="learner"), "after_normalization"),
}


def config_for(algo, options) -> TrainConfig:
    options = dataclasses.replace(options, rho_bar=RHO_BAR)
    return dataclasses.replace(TrainConfig(num_envs=N, num_steps=T, clip_coef=0.2), algo=algo,
                               **{algo: options})


@pytest.mark.parametrize("name", list(CASES))
def test_estimate_applies_the_importance_weight_once(inputs, name):
    params, traj, view, behaviour_next = inputs
    algo, options, placement = CASES[name]
    config = config_for(algo, options)
    setup = setup_for(config)
    assert setup.algorithm.importance_weight == placement
    batch = estimate(setup, traj, params, view, hyperparams_from_config(config))
    adv, targets, weights = reference_estimate(traj, view, behaviour_next, options.critic,
                                               options.advantages, placement)
    close(batch.advantages, adv, TOL)
    close(batch.targets, targets, TOL)
    anchor = view.logp_learner if options.anchor == "learner" else traj.logp
    np.testing.assert_array_equal(batch.logp_anchor, anchor)
    np.testing.assert_array_equal(batch.logp_behaviour, traj.logp)
    assert (batch.pg_weights is None) == (weights is None)
    if weights is not None:
        close(batch.pg_weights, weights, TOL)
        assert (weights == RHO_BAR).any() and (weights < 1).any()


@pytest.mark.parametrize("name", ["decoupled ppo, GAE", "decoupled ppo, V-trace", "ppo"])
def test_decoupled_ppo_policy_loss_matches_numpy(inputs, name):
    """L = −mean(w·min(r·Â_n, clip(r, 1 ± ε)·Â_n)), r = π_θ/anchor, Â_n the minibatch-
    normalised advantage, w = min(ρ̄, π_T/β) for decoupled PPO with GAE (Hilton et al.
    2021); with V-trace ρ is already inside Â, so w = 1; plain PPO: anchor β, w = 1."""
    params, traj, view, behaviour_next = inputs
    algo, options, placement = CASES[name]
    config = config_for(algo, options)
    setup = setup_for(config)
    batch = estimate(setup, traj, params, view, hyperparams_from_config(config))
    logp = np.log(np.random.default_rng(1).uniform(0.2, 0.8, (T, N)))  # log π_θ(a|s)
    actions = np.asarray(traj.actions)
    logits = np.zeros((T, N, 2))
    logits[np.arange(T)[:, None], np.arange(N)[None], actions] = logp
    logits[np.arange(T)[:, None], np.arange(N)[None], 1 - actions] = np.log1p(-np.exp(logp))

    def apply_fn(params, obs, method=None):
        return distrax.Categorical(logits=f32(logits)), jnp.zeros((T, N))

    hp = hyperparams_from_config(config)
    _, metrics = total_loss(None, apply_fn, batch, hp, {}, setup.algorithm, True)
    adv, _, weights = reference_estimate(traj, view, behaviour_next, options.critic,
                                         options.advantages, placement)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    weights = np.ones_like(adv) if weights is None else weights
    anchor = view.logp_learner if options.anchor == "learner" else traj.logp
    r = np.exp(logp - np.asarray(anchor, np.float64))
    surrogate = np.minimum(r * adv, np.clip(r, 0.8, 1.2) * adv)
    close(metrics["loss/policy"], -np.mean(weights * surrogate), tol=1e-4)


def primitive_names(jaxpr) -> set[str]:
    """The primitives of a jaxpr, nested programs (jit, scan, cond bodies) included."""
    names = {eqn.primitive.name for eqn in jaxpr.eqns}
    for sub in jax.extend.core.subjaxprs(jaxpr):
        names |= primitive_names(sub)
    return names


def test_impala_estimate_computes_nothing_it_would_discard(inputs):
    """IMPALA recomputes Â and v_t at every minibatch (`impala.current_vtrace`), so its
    per-iteration estimate is empty: no advantages, targets or weights, and a program with
    no estimator scan and no network evaluation, where PPO's (GAE on the recorded critic)
    has GAE's backward scan and V_β(s')."""
    params, traj, view, _ = inputs
    programs = {}
    for algo in ("impala", "ppo"):
        config = dataclasses.replace(TrainConfig(num_envs=N, num_steps=T), algo=algo,
                                     ppo=PPOConfig(critic="behaviour"))
        setup, hp = setup_for(config), hyperparams_from_config(config)
        assert not setup.algorithm.needs_learner_batch
        plain_view = LearnerView(None, None, None, view.metric_logp)
        batch = estimate(setup, traj, params, plain_view, hp)
        jaxpr = jax.make_jaxpr(lambda t, s=setup, h=hp, v=plain_view: estimate(s, t, params,
                                                                                v, h))(traj)
        programs[algo] = (batch, primitive_names(jaxpr.jaxpr))
    batch, names = programs["impala"]
    assert batch.advantages is None and batch.targets is None and batch.pg_weights is None
    assert batch.logp_anchor is traj.logp
    close(batch.rewards, np.asarray(traj.rewards), TOL)  # reward_scale 1
    assert names == {"mul"}, names  # the reward scaling alone
    _, ppo_names = programs["ppo"]
    assert {"scan", "dot_general"} <= ppo_names, ppo_names


# ------------------------------------------------------------------- the other stages


def cartpole_setup(**changes) -> tuple[Setup, object]:
    """PPO with the recorded critic unless `changes` say otherwise."""
    base = TrainConfig(num_envs=4, num_steps=5, ppo=PPOConfig(critic="behaviour"))
    config = dataclasses.replace(base, **changes)
    env = make_env(config.env, config.num_envs)
    setup = Setup(config, env, make_network(env.spec, (8,), "tanh"), make_algorithm(config),
                  lag_model(config, None), None, None)
    state = init_state(setup, env, jax.random.PRNGKey(0), hyperparams_from_config(config))
    return setup, state


def test_select_behaviour_without_lag_is_the_learner():
    setup, state = cartpole_setup()
    out = select_behaviour(setup, state, hyperparams_from_config(setup.config),
                           jax.random.PRNGKey(1))
    assert out.params is state.params and out.state is None
    np.testing.assert_array_equal(out.delays, [0])


def test_select_behaviour_reads_the_ring_buffer():
    """Group g acts with θ_{T−k_g}: fill the buffer with known snapshots and check."""
    setup, state = cartpole_setup(lag=LagConfig(max_delay=3, mode="spread", num_groups=4))
    snapshots = [jax.tree.map(lambda p, i=i: jnp.full_like(p, i), state.params)
                 for i in range(6)]
    history = state.lag
    for t in range(5):  # θ_0..θ_4 pushed at T = 0..4; T = 5 is the current iteration
        history = lag.push(history, snapshots[t], jnp.int32(t))
    state = state.replace(lag=history, params=snapshots[5], iteration=jnp.int32(5))
    out = select_behaviour(setup, state, hyperparams_from_config(setup.config),
                           jax.random.PRNGKey(0))
    np.testing.assert_array_equal(out.delays, [0, 1, 2, 3])
    first_leaf = np.asarray(jax.tree.leaves(out.params)[0])
    np.testing.assert_array_equal(first_leaf.reshape(4, -1)[:, 0], [5, 4, 3, 2])


def test_collect_records_the_behaviour_log_probs_and_values():
    setup, state = cartpole_setup()
    obs, _, traj = collect(setup, state, state.params, jax.random.PRNGKey(2))
    assert traj.obs.shape == (5, 4, 4) and traj.actions.shape == (5, 4)
    pi, values = setup.network.apply(state.params, traj.obs)
    close(traj.logp, np.asarray(pi.log_prob(traj.actions)), TOL)
    close(traj.values, np.asarray(values), TOL)
    assert obs.shape == (4, 4)


def test_learner_view_recomputes_only_what_the_algorithm_reads():
    setup, state = cartpole_setup()
    _, _, traj = collect(setup, state, state.params, jax.random.PRNGKey(2))
    plain = learner_view(setup, state.params, traj)
    assert plain.values is None and plain.logp_learner is None  # not read: not computed
    # K = 0: β = π_T exactly, so the TV metrics read the recorded log β
    np.testing.assert_array_equal(plain.metric_logp, traj.logp[:, setup.metric_envs])
    critic_setup, _ = cartpole_setup(ppo=PPOConfig(critic="learner"))
    view = learner_view(critic_setup, state.params, traj)
    _, values = setup.network.apply(state.params, traj.obs)
    close(view.values, np.asarray(values), TOL)
    assert view.next_values.shape == (5, 4)


@pytest.mark.parametrize("axis,minibatches", [(0, 2), (1, 4), (1, 1)])
def test_shuffled_minibatches_keep_units_whole_and_cover_them_once(axis, minibatches):
    """Against NumPy: minibatch m holds units perm[m·U/M : (m+1)·U/M] along `axis`, for
    every leaf with the same permutation."""
    from jaxvaco.core.primitives import shuffled_minibatches

    rng = np.random.default_rng(axis)
    shape = (3, 8, 2) if axis == 1 else (8, 5)
    tree = {"a": rng.normal(size=shape).astype(np.float32),
            "b": rng.integers(0, 100, size=shape[:axis + 1])}
    key = jax.random.key(7)
    out = shuffled_minibatches(jax.tree.map(jnp.asarray, tree), key, minibatches, axis=axis)
    perm = np.asarray(jax.random.permutation(key, 8))
    size = 8 // minibatches
    for name, leaf in tree.items():
        assert out[name].shape[0] == minibatches
        for m in range(minibatches):
            expected = np.take(leaf, perm[m * size:(m + 1) * size], axis=axis)
            np.testing.assert_array_equal(np.asarray(out[name][m]), expected)
    assert sorted(perm) == list(range(8))

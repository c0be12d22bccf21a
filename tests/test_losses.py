"""The policy losses, the total loss and the TV metric (docs/concepts/spec.md §1.2, §3, §3.1).

Every expected value is computed here in float64 NumPy from the spec's formulas, on
random seeded inputs; gradients are compared with the analytic per-sample gradients.
"""

from __future__ import annotations

import dataclasses

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from references import close, f32, vtrace_reference

from jaxvaco.core import primitives
from jaxvaco.core.algos import impala, make_algorithm, ppo_kl, spo, vaco
from jaxvaco.core.algos.common import Batch, normalize_advantages, total_loss
from jaxvaco.core.config import PPOConfig, PPOKLConfig, TrainConfig, VacoConfig, VtraceConfig
from jaxvaco.core.envs.base import EnvSpec
from jaxvaco.core.networks import make_network
from jaxvaco.core.train import mean_tv
from jaxvaco.host.grid import hyperparams_from_config

T, N = 8, 8  # 64 samples
EPS = 0.2


def random_policy_inputs(seed, spread=0.3):
    """log β, log π_T, log π_θ (near each other) and advantages, float64 [T, N]."""
    rng = np.random.default_rng(seed)
    logp_behaviour = np.log(rng.uniform(0.05, 0.9, size=(T, N)))
    logp_learner = logp_behaviour + rng.normal(size=(T, N)) * spread
    logp = logp_learner + rng.normal(size=(T, N)) * spread
    advantages = rng.normal(size=(T, N))
    return logp, logp_learner, logp_behaviour, advantages


def make_batch(logp_anchor, logp_behaviour, **fields):
    """A batch whose ratio's anchor is `logp_anchor` (log π_T or log β, as the estimate
    stage would choose it: tests/test_stages.py)."""
    shape = logp_anchor.shape
    zeros = jnp.zeros(shape, jnp.float32)
    defaults = dict(
        obs=jnp.zeros(shape + (4,), jnp.float32), actions=jnp.zeros(shape, jnp.int32),
        logp_behaviour=f32(logp_behaviour), logp_anchor=f32(logp_anchor), rewards=zeros,
        terminated=jnp.zeros(shape, bool), truncated=jnp.zeros(shape, bool),
        final_obs=jnp.zeros(shape + (4,), jnp.float32), advantages=zeros, targets=zeros)
    defaults.update(fields)
    return Batch(**defaults)


def config_with(**kwargs):
    return dataclasses.replace(TrainConfig(), **kwargs)


def ppo_reference(logp, logp_anchor, adv, eps):
    """Per-sample −min(r Â, clip(r) Â), clipped mask, and d/dlogp of the per-sample loss."""
    r = np.exp(logp - logp_anchor)
    per_sample = -np.minimum(r * adv, np.clip(r, 1 - eps, 1 + eps) * adv)
    clipped = ((r > 1 + eps) & (adv > 0)) | ((r < 1 - eps) & (adv < 0))
    grad = np.where(clipped, 0.0, -r * adv)
    return per_sample, clipped, grad


# --------------------------------------------------------------------------- PPO


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppo_clipped_surrogate_value_mask_and_gradient(seed):
    logp, _, anchor, adv = random_policy_inputs(seed)
    ref, ref_clipped, ref_grad = ppo_reference(logp, anchor, adv, EPS)
    assert 0 < ref_clipped.sum() < ref_clipped.size
    per_sample, clipped = primitives.clipped_surrogate(f32(logp), f32(anchor), f32(adv), f32(EPS))
    close(per_sample, ref)
    np.testing.assert_array_equal(np.asarray(clipped), ref_clipped)
    grad = jax.grad(lambda lp: primitives.clipped_surrogate(lp, f32(anchor), f32(adv),
                                                     f32(EPS))[0].mean())(f32(logp))
    close(grad, ref_grad / logp.size)


@pytest.mark.parametrize("anchor", ["behaviour", "learner"])
def test_ppo_policy_loss_clips_on_its_anchor(anchor):
    """The loss clips r = π_θ/anchor; decoupled PPO's weight π_T/β is not applied here but
    once, by the estimate stage (tests/test_stages.py)."""
    logp, logp_learner, logp_behaviour, adv = random_policy_inputs(3)
    config = config_with(clip_coef=EPS, ppo=PPOConfig(anchor=anchor, rho_bar=1.3,
                                                      critic="behaviour"))
    hp = hyperparams_from_config(config)
    algo = make_algorithm(config)
    assert algo.needs_learner_batch == (anchor == "learner")  # the recorded critic needs none
    logp_anchor = logp_learner if anchor == "learner" else logp_behaviour
    batch = make_batch(logp_anchor, logp_behaviour)
    ref, clipped, grad = ppo_reference(logp, logp_anchor, adv, EPS)
    loss_fn = lambda lp: algo.policy_loss(lp, f32(adv), batch, hp, {}, jnp.mean)
    (loss, metrics), g = jax.value_and_grad(loss_fn, has_aux=True)(f32(logp))
    close(loss, np.mean(ref))
    close(metrics["ppo/clipped_fraction"], clipped.mean())
    close(g, grad / logp.size)


# --------------------------------------------------------------------------- PPO-KL


@pytest.mark.parametrize("seed", [0, 1])
def test_kl_penalized_surrogate(seed):
    logp, _, logp_behaviour, adv = random_policy_inputs(seed)
    coef = 0.7
    r = np.exp(logp - logp_behaviour)
    kl_ref = np.mean((r - 1) - np.log(r))
    loss_ref = -np.mean(r * adv) + coef * kl_ref
    fn = lambda lp: ppo_kl.kl_penalized_surrogate(lp, f32(logp_behaviour), f32(adv), f32(coef))
    loss, kl = fn(f32(logp))
    close(loss, loss_ref)
    close(kl, kl_ref)
    assert kl_ref > 0
    grad = jax.grad(lambda lp: fn(lp)[0])(f32(logp))
    close(grad, (-r * adv + coef * (r - 1)) / logp.size)


def test_adapt_kl_coef():
    d = 0.01
    cases = [(0.001, 0.5), (d / 1.5 - 1e-4, 0.5), (d / 1.5 + 1e-4, 1.0), (d, 1.0),
             (1.5 * d - 1e-4, 1.0), (1.5 * d + 1e-4, 2.0), (0.1, 2.0)]
    for kl, factor in cases:
        new = ppo_kl.adapt_kl_coef(f32(0.8), f32(kl), f32(d))
        close(new, 0.8 * factor)


def test_ppo_kl_algorithm_state():
    logp, _, logp_behaviour, adv = random_policy_inputs(4)
    for adaptive in (True, False):
        config = config_with(algo="ppo_kl",
                             ppo_kl=PPOKLConfig(kl_coef=0.3, target_kl=0.01, adaptive=adaptive))
        hp = hyperparams_from_config(config)
        algo = make_algorithm(config)
        state = algo.init_state(hp)
        close(state["kl_coef"], 0.3)
        batch = make_batch(logp_behaviour, logp_behaviour)
        loss, metrics = algo.policy_loss(f32(logp), f32(adv), batch, hp, state, jnp.mean)
        r = np.exp(logp - logp_behaviour)
        kl = np.mean((r - 1) - np.log(r))
        close(loss, -np.mean(r * adv) + 0.3 * kl)
        assert kl > 1.5 * 0.01  # so the adaptive rule doubles
        new = algo.update_state(state, metrics, hp)
        close(new["kl_coef"], 0.6 if adaptive else 0.3)
        assert set(metrics) == {"kl/estimate", "kl/coef"}  # no constraint, no fraction


# --------------------------------------------------------------------------- SPO


@pytest.mark.parametrize("seed", [0, 1])
def test_spo_surrogate_value_and_gradient(seed):
    logp, _, logp_behaviour, adv = random_policy_inputs(seed, spread=0.4)
    r = np.exp(logp - logp_behaviour)
    ref = -np.mean(r * adv - np.abs(adv) / (2 * EPS) * (r - 1) ** 2)
    fn = lambda lp: spo.spo_surrogate(lp, f32(logp_behaviour), f32(adv), f32(EPS))
    loss, grad = jax.value_and_grad(fn)(f32(logp))
    close(loss, ref)
    ref_grad = -r * (adv - np.abs(adv) / EPS * (r - 1)) / logp.size
    close(grad, ref_grad)
    # outside the band the gradient points back toward r = 1 + ε·sign(Â)
    target = 1 + EPS * np.sign(adv)
    far = np.abs(r - target) > 1e-3
    descent = -np.asarray(grad)  # the direction gradient descent moves logp
    np.testing.assert_array_equal(np.sign(descent[far]), np.sign(target - r)[far])
    # through the algorithm record
    config = config_with(algo="spo", clip_coef=EPS)
    hp = hyperparams_from_config(config)
    loss2, metrics = make_algorithm(config).policy_loss(
        f32(logp), f32(adv), make_batch(logp_behaviour, logp_behaviour), hp, {}, jnp.mean)
    close(loss2, ref)
    close(metrics["spo/outside_fraction"], np.mean(np.abs(r - 1) > EPS))


# --------------------------------------------------------------------------- VACO


def vaco_mask_reference(log_ratio, adv, delta, kind):
    r = np.exp(log_ratio)
    tv = 0.5 * np.abs(r - 1)
    moving_away = adv * (r - 1) > 0
    if kind == "batch":
        exceeded = np.full(r.shape, tv.mean() >= delta)
    elif kind == "sample":
        exceeded = tv >= delta
    else:
        exceeded = np.zeros(r.shape, bool)
    return ~(exceeded & moving_away)


@pytest.mark.parametrize("seed", [0, 1])
def test_tv_filter_mask(seed):
    logp, anchor, _, adv = random_policy_inputs(seed, spread=0.5)
    log_ratio = logp - anchor
    r = np.exp(log_ratio)
    d = np.mean(0.5 * np.abs(r - 1))
    moving_away = adv * (r - 1) > 0
    assert 0 < moving_away.sum() < moving_away.size
    # batch, D ≥ δ: every sample moving away is dropped
    for delta in (0.9 * d, d * (1 - 1e-4)):
        mask = np.asarray(primitives.tv_filter_mask(f32(log_ratio), f32(adv), f32(delta),
                                                    "batch"))
        np.testing.assert_array_equal(mask, ~moving_away)
    # batch, D < δ: nothing is dropped
    mask = np.asarray(primitives.tv_filter_mask(f32(log_ratio), f32(adv), f32(1.1 * d),
                                                "batch"))
    assert mask.all()
    # sample: a per-sample band
    delta = 0.15
    expected = vaco_mask_reference(log_ratio, adv, delta, "sample")
    # some moving-away samples are dropped, others are inside the band and kept
    assert 0 < (~expected).sum() < moving_away.sum()
    mask = np.asarray(primitives.tv_filter_mask(f32(log_ratio), f32(adv), f32(delta),
                                                "sample"))
    np.testing.assert_array_equal(mask, expected)
    # none: keep all
    mask = np.asarray(primitives.tv_filter_mask(f32(log_ratio), f32(adv), f32(1e-6), "none"))
    assert mask.all()


@pytest.mark.parametrize("anchor", ["learner", "behaviour"])
@pytest.mark.parametrize("kind", ["batch", "sample", "none"])
@pytest.mark.parametrize("delta_case", ["above", "below"])
def test_vaco_policy_loss(anchor, kind, delta_case):
    logp, logp_learner, logp_behaviour, adv = random_policy_inputs(5, spread=0.4)
    anchor_logp = logp_learner if anchor == "learner" else logp_behaviour
    r = np.exp(logp - anchor_logp)
    d = np.mean(0.5 * np.abs(r - 1))
    if kind == "batch":
        delta = 0.9 * d if delta_case == "above" else 1.1 * d  # D ≥ δ / D < δ
    else:
        delta = 0.1 if delta_case == "above" else 0.3
    config = config_with(algo="vaco", vaco=VacoConfig(delta=delta, filter=kind, anchor=anchor))
    hp = hyperparams_from_config(config)
    algo = make_algorithm(config)
    assert algo.anchor == anchor
    batch = make_batch(anchor_logp, logp_behaviour)
    m = vaco_mask_reference(logp - anchor_logp, adv, delta, kind)
    if kind == "batch" and delta_case == "above":
        assert not m.all()
    # the other anchor would give a different mask on these inputs (for the nontrivial cases)
    other = logp_behaviour if anchor == "learner" else logp_learner
    if kind == "sample" and delta_case == "above":
        assert (vaco_mask_reference(logp - other, adv, delta, kind) != m).any()
    loss_fn = lambda lp: algo.policy_loss(lp, f32(adv), batch, hp, {}, jnp.mean)
    (loss, metrics), g = jax.value_and_grad(loss_fn, has_aux=True)(f32(logp))
    close(loss, -np.mean(m * r * adv))
    close(metrics["vaco/filtered_fraction"], 1 - m.mean())
    close(g, -(m * r * adv) / logp.size)


@pytest.mark.parametrize("anchor", ["learner", "behaviour"])
def test_vaco_kl_penalty_adds_ppo_kls_adaptive_penalty(anchor):
    """[ours] `--vaco.kl-penalty`: L = −mean(m·r·Â) + c_kl·mean((ρ − 1) − log ρ), with
    r = π_θ/anchor (the filter's) and ρ = π_θ/β (the penalty's, always β); c_kl starts at
    --vaco.kl-coef and doubles when KL̂ > 1.5·d (--vaco.target-kl)."""
    logp, logp_learner, logp_behaviour, adv = random_policy_inputs(7, spread=0.4)
    anchor_logp = logp_learner if anchor == "learner" else logp_behaviour
    r, rho = np.exp(logp - anchor_logp), np.exp(logp - logp_behaviour)
    delta = 0.9 * np.mean(0.5 * np.abs(r - 1))  # D ≥ δ: the filter drops samples
    config = config_with(algo="vaco", vaco=VacoConfig(delta=delta, anchor=anchor,
                                                      kl_penalty=True, kl_coef=0.4,
                                                      target_kl=0.01))
    hp = hyperparams_from_config(config)
    algo = make_algorithm(config)
    state = algo.init_state(hp)
    close(state["kl_coef"], 0.4)
    m = vaco_mask_reference(logp - anchor_logp, adv, delta, "batch")
    assert not m.all()
    kl = np.mean((rho - 1) - np.log(rho))
    assert kl > 1.5 * 0.01  # so the adaptive rule doubles
    batch = make_batch(anchor_logp, logp_behaviour)
    loss_fn = lambda lp: algo.policy_loss(lp, f32(adv), batch, hp, state, jnp.mean)
    (loss, metrics), g = jax.value_and_grad(loss_fn, has_aux=True)(f32(logp))
    close(loss, -np.mean(m * r * adv) + 0.4 * kl)
    close(g, (-(m * r * adv) + 0.4 * (rho - 1)) / logp.size)
    close(metrics["kl/estimate"], kl)
    close(metrics["vaco/filtered_fraction"], 1 - m.mean())
    close(algo.update_state(state, metrics, hp)["kl_coef"], 0.8)
    plain = make_algorithm(config_with(algo="vaco", vaco=VacoConfig(delta=delta, anchor=anchor)))
    assert plain.init_state(hp) == {}  # off by default: VACO as studied


@pytest.mark.parametrize("kind", ["batch", "sample", "none"])
def test_filtered_surrogate_value_and_gradient(kind):
    logp, anchor, _, adv = random_policy_inputs(6, spread=0.5)
    delta = 0.12
    m = vaco_mask_reference(logp - anchor, adv, delta, kind)
    r = np.exp(logp - anchor)
    fn = lambda lp: vaco.filtered_surrogate(lp, f32(anchor), f32(adv), f32(delta), kind)
    (loss, mask), g = jax.value_and_grad(fn, has_aux=True)(f32(logp))
    np.testing.assert_array_equal(np.asarray(mask).astype(bool), m)
    close(loss, -np.mean(m * r * adv))
    close(g, -(m * r * adv) / logp.size)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_vaco_sample_filter_gradient_equals_ppo_clip(seed):
    logp, logp_learner, logp_behaviour, adv = random_policy_inputs(seed, spread=0.3)
    for anchor in (logp_learner, logp_behaviour):
        r = np.exp(logp - anchor)
        assert np.abs(np.abs(r - 1) - EPS).min() > 1e-4  # away from the band's edge
        assert (np.abs(r - 1) > EPS).any()
        g_vaco = jax.grad(lambda lp, a=anchor: vaco.filtered_surrogate(
            lp, f32(a), f32(adv), f32(EPS / 2), "sample")[0])(f32(logp))
        g_ppo = jax.grad(lambda lp, a=anchor: primitives.clipped_surrogate(
            lp, f32(a), f32(adv), f32(EPS))[0].mean())(f32(logp))
        np.testing.assert_allclose(np.asarray(g_vaco), np.asarray(g_ppo), rtol=1e-5, atol=1e-8)
        # and the same samples are filtered / clipped
        _, mask = vaco.filtered_surrogate(f32(logp), f32(anchor), f32(adv), f32(EPS / 2),
                                          "sample")
        _, clipped = primitives.clipped_surrogate(f32(logp), f32(anchor), f32(adv), f32(EPS))
        np.testing.assert_array_equal(~np.asarray(mask).astype(bool), np.asarray(clipped))
    # through the algorithm records, both anchored on β
    ppo_config = config_with(clip_coef=EPS, ppo=PPOConfig(anchor="behaviour"))
    vaco_config = config_with(algo="vaco", vaco=VacoConfig(delta=EPS / 2, filter="sample",
                                                           anchor="behaviour"))
    batch = make_batch(logp_behaviour, logp_behaviour)
    grads = []
    for config in (ppo_config, vaco_config):
        hp = hyperparams_from_config(config)
        algo = make_algorithm(config)
        grads.append(jax.grad(lambda lp, a=algo, h=hp: a.policy_loss(
            lp, f32(adv), batch, h, {}, jnp.mean)[0])(f32(logp)))
    np.testing.assert_allclose(np.asarray(grads[0]), np.asarray(grads[1]), rtol=1e-5, atol=1e-8)


# --------------------------------------------------------------------------- IMPALA


def test_impala_policy_loss():
    logp, _, logp_behaviour, adv = random_policy_inputs(7)
    config = config_with(algo="impala")
    hp = hyperparams_from_config(config)
    algo = make_algorithm(config)
    # no per-iteration estimate: Â and v_t come from the per-minibatch V-trace
    assert algo.estimator == "none" and algo.minibatch_targets is impala.current_vtrace
    assert not algo.needs_learner_batch and algo.importance_weight == "none"
    batch = make_batch(logp_behaviour, logp_behaviour)
    fn = lambda lp: algo.policy_loss(lp, f32(adv), batch, hp, {}, jnp.mean)[0]
    loss, g = jax.value_and_grad(fn)(f32(logp))
    close(loss, -np.mean(logp * adv))
    close(g, -adv / logp.size)
    assert algo.policy_loss(f32(logp), f32(adv), batch, hp, {},
                            jnp.mean)[1] == {}  # no constraint, no fraction metric


# --------------------------------------------------------------------------- total loss

OBS_DIM, NUM_ACTIONS = 4, 3
SPEC = EnvSpec(name="test", family="gymnax", obs_shape=(OBS_DIM,), discrete=True,
               num_actions=NUM_ACTIONS, action_low=None, action_high=None,
               max_episode_steps=100)




@pytest.fixture(scope="module")
def network_setup():
    network = make_network(SPEC, (16, 16), "tanh")
    rng = np.random.default_rng(11)
    obs = rng.normal(size=(T, N, OBS_DIM))
    params = network.init(jax.random.PRNGKey(0), f32(obs[0]))
    # make the policy far from uniform so ratios and entropy are not trivial
    leaves, treedef = jax.tree_util.tree_flatten(params)
    leaves = [x + f32(rng.normal(size=x.shape) * 0.7) for x in leaves]
    params = jax.tree_util.tree_unflatten(treedef, leaves)
    terminated = rng.random((T, N)) < 0.15
    truncated = (rng.random((T, N)) < 0.15) & ~terminated
    done = terminated | truncated
    final_obs = rng.normal(size=(T, N, OBS_DIM))
    final_obs[:-1][~done[:-1]] = obs[1:][~done[:-1]]  # s' is the next state inside episodes
    actions = rng.integers(0, NUM_ACTIONS, size=(T, N))
    pi, values = network.apply(params, f32(obs))
    logits = np.asarray(pi.logits, np.float64)
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    logp = np.take_along_axis(log_probs, actions[..., None], -1)[..., 0]
    entropy = -(np.exp(log_probs) * log_probs).sum(-1)
    next_values = np.asarray(network.apply(params, f32(final_obs), method="value"), np.float64)
    logp_behaviour = logp + rng.normal(size=(T, N)) * 0.4
    return dict(
        network=network, params=params, obs=obs, final_obs=final_obs, actions=actions,
        terminated=terminated, truncated=truncated, rewards=rng.normal(size=(T, N)),
        values=np.asarray(values, np.float64), next_values=next_values, logp=logp,
        entropy=entropy, logp_behaviour=logp_behaviour,
        advantages=rng.normal(size=(T, N)), targets=rng.normal(size=(T, N)) * 2)


def network_batch(s):
    return Batch(
        obs=f32(s["obs"]), actions=jnp.asarray(s["actions"], jnp.int32),
        logp_behaviour=f32(s["logp_behaviour"]), logp_anchor=f32(s["logp_behaviour"]),
        rewards=f32(s["rewards"]), terminated=jnp.asarray(s["terminated"]),
        truncated=jnp.asarray(s["truncated"]), final_obs=f32(s["final_obs"]),
        advantages=f32(s["advantages"]), targets=f32(s["targets"]))


def test_normalize_advantages():
    adv = np.random.default_rng(0).normal(size=(T, N)) * 3 + 1
    close(normalize_advantages(f32(adv)), (adv - adv.mean()) / (adv.std() + 1e-8))


@pytest.mark.parametrize("norm_adv", [False, True])
def test_total_loss_ppo(network_setup, norm_adv):
    s = network_setup
    config = config_with(clip_coef=EPS, vf_coef=0.7, ent_coef=0.05)
    hp = hyperparams_from_config(config)
    algo = make_algorithm(config)
    batch = network_batch(s)
    loss, metrics = total_loss(s["params"], s["network"].apply, batch, hp, {}, algo, norm_adv)
    adv = s["advantages"]
    if norm_adv:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = ppo_reference(s["logp"], s["logp_behaviour"], adv, EPS)[0].mean()
    vl = 0.5 * np.mean((s["values"] - s["targets"]) ** 2)
    ent = s["entropy"].mean()
    assert ent > 0.05 and np.abs(s["entropy"] - np.log(NUM_ACTIONS)).max() > 0.05
    close(metrics["loss/policy"], pg)
    close(metrics["loss/value"], vl)
    close(metrics["loss/entropy"], ent)
    close(loss, pg + 0.7 * vl - 0.05 * ent)


def test_total_loss_approx_kl_estimates_kl_behaviour_to_policy():
    """`loss/approx_kl` over actions logged from β should estimate KL(β‖π_θ), the KL that
    ppo_kl penalises (docs/concepts/spec.md §3), like CleanRL's k3 estimator
    mean((r − 1) − log r), r = π/β.

    Checked by Monte Carlo: a fixed categorical π_θ (through a stand-in apply_fn), 200k
    actions drawn from a known β, compared with the exact KL(β‖π) within 4 standard errors.
    """
    p = np.array([0.6, 0.25, 0.1, 0.05])  # π_θ
    q = np.array([0.1, 0.2, 0.3, 0.4])  # β, the sampling distribution
    exact = float(np.sum(q * np.log(q / p)))
    rng = np.random.default_rng(1)
    shape = (1000, 200)
    actions = rng.choice(len(q), size=shape, p=q)
    logits = jnp.broadcast_to(f32(np.log(p)), shape + (len(p),))

    def apply_fn(params, obs, method=None):
        return distrax.Categorical(logits=logits), jnp.zeros(shape, jnp.float32)

    batch = make_batch(np.log(q[actions]), np.log(q[actions]),
                       actions=jnp.asarray(actions, jnp.int32),
                       obs=jnp.zeros(shape + (1,), jnp.float32))
    config = config_with()
    _, metrics = total_loss({}, apply_fn, batch, hyperparams_from_config(config), {},
                            make_algorithm(config), False)
    r = p[actions] / q[actions]
    per_sample = (r - 1) - np.log(r)
    stderr = per_sample.std() / np.sqrt(per_sample.size)
    assert abs(per_sample.mean() - exact) < 4 * stderr  # the k3 reference itself
    approx_kl = float(metrics["loss/approx_kl"])
    assert abs(approx_kl - exact) < 4 * stderr + 1e-4, (approx_kl, exact, stderr)


def test_total_loss_impala_recomputes_vtrace(network_setup):
    s = network_setup
    rho_bar, c_bar, gamma, lam = 1.2, 0.9, 0.95, 0.9
    config = config_with(algo="impala", vf_coef=0.6, ent_coef=0.02, gamma=gamma,
                         gae_lambda=lam, impala=VtraceConfig(rho_bar=rho_bar, c_bar=c_bar))
    hp = hyperparams_from_config(config)
    algo = make_algorithm(config)
    # no per-iteration Â and v_t, as the estimate stage leaves them for IMPALA
    batch = network_batch(s).replace(advantages=None, targets=None)
    adv, vs = vtrace_reference(s["rewards"], s["values"], s["next_values"], s["terminated"],
                               s["truncated"], s["logp"] - s["logp_behaviour"], gamma, lam,
                               rho_bar, c_bar)
    ratio = np.exp(s["logp"] - s["logp_behaviour"])
    assert (ratio > max(rho_bar, c_bar)).any() and (ratio < min(rho_bar, c_bar)).any()
    pg = -np.mean(s["logp"] * adv)
    vl = 0.5 * np.mean((s["values"] - vs) ** 2)
    ent = s["entropy"].mean()
    loss, metrics = total_loss(s["params"], s["network"].apply, batch, hp, {}, algo, False)
    close(metrics["loss/policy"], pg, tol=1e-4)
    close(metrics["loss/value"], vl, tol=1e-4)
    close(loss, pg + 0.6 * vl - 0.02 * ent, tol=1e-4)

    # the recomputed advantages and targets are constants: the gradient equals that of the
    # loss with the reference targets plugged in as fixed arrays
    network = s["network"]
    adv_c, vs_c = f32(adv), f32(vs)
    actions = jnp.asarray(s["actions"], jnp.int32)

    def fixed_target_loss(params):
        pi, values = network.apply(params, f32(s["obs"]))
        logp = pi.log_prob(actions)
        return (-jnp.mean(logp * adv_c) + 0.6 * 0.5 * jnp.mean((values - vs_c) ** 2)
                - 0.02 * pi.entropy().mean())

    g = jax.grad(lambda p: total_loss(p, network.apply, batch, hp, {}, algo, False)[0])(
        s["params"])
    g_ref = jax.grad(fixed_target_loss)(s["params"])
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(g_ref),
                    strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-3, atol=1e-5)


# --------------------------------------------------------------------------- TV metric


def test_mean_tv_estimates_total_variation():
    p = np.array([0.5, 0.3, 0.15, 0.05])  # a
    q = np.array([0.2, 0.25, 0.25, 0.3])  # b, the sampling distribution
    exact = 0.5 * np.abs(p - q).sum()
    rng = np.random.default_rng(0)
    samples = rng.choice(len(q), size=200_000, p=q)
    logp_a, logp_b = np.log(p[samples]), np.log(q[samples])
    estimate = float(mean_tv(f32(logp_a), f32(logp_b)))
    per_sample = 0.5 * np.abs(np.exp(logp_a - logp_b) - 1)
    stderr = per_sample.std() / np.sqrt(len(samples))
    assert abs(estimate - exact) < 4 * stderr + 1e-4, (estimate, exact, stderr)
    # identical distributions give exactly zero
    assert float(mean_tv(f32(logp_b), f32(logp_b))) == 0.0

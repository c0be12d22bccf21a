"""Tests of the LLM setting (`jaxvaco.llm`, docs/concepts/spec.md §5): task, transformer, losses,
lag, RL.

References are NumPy re-implementations of the loss equations and an explicit
synchronous training loop; the models are tiny so that the module runs in well under a
minute on two CPU cores.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxvaco.llm import losses, task, train
from jaxvaco.llm.config import LLMConfig, LLMLagConfig, TokenVacoConfig
from jaxvaco.llm.evaluation import accuracy, sampled_accuracy
from jaxvaco.llm.model import ModelConfig, Transformer, init_cache, sample, token_logp
from jaxvaco.llm.train import group_minibatches, warm_start

pytestmark = pytest.mark.usefixtures("fast_compile")

TINY = ModelConfig(len(task.VOCAB), task.SEQ_LEN, d_model=32, num_layers=1, num_heads=2)


@pytest.fixture(scope="module")
def problems():
    held_out = task.test_sets(size=16)
    return held_out, task.train_pool(512, 0, held_out)


@pytest.fixture(scope="module")
def tiny():
    model = Transformer(TINY)
    params = model.init(jax.random.key(0), jnp.zeros((1, task.SEQ_LEN), jnp.int32))
    return model, params


@pytest.fixture(scope="module")
def other_params():
    """A reference policy ≠ θ_0: its KL term moves θ even when every reward is 0."""
    return Transformer(TINY).init(jax.random.key(1), jnp.zeros((1, task.SEQ_LEN), jnp.int32))


def rewards_of(prompt: str, completions: list[str], answer: int) -> np.ndarray:
    """Reward of each completion text after `prompt`, via the token-level parser."""
    p = task.encode(prompt)
    rows = np.full((len(completions), task.SEQ_LEN), task.PAD, np.int32)
    for i, c in enumerate(completions):
        ids = p + task.encode(c)
        rows[i, : len(ids)] = ids
    n = len(completions)
    return np.asarray(task.reward(jnp.asarray(rows), jnp.full(n, len(p)), jnp.full(n, answer)))


def test_reward_well_formed_and_malformed():
    prompt = "<bos> ann has 7 pens . gets 5 more . how many pens ?"
    cases = {
        "7 + 5 = 12 . ans 12 <eos>": 1,
        "ans 12 <eos>": 1,  # only the final answer is checked
        "ans 012 <eos>": 1,
        "ans 3 . ans 12 <eos>": 1,  # the last "ans" counts
        "ans 12 <eos> ans 3 <eos>": 1,  # everything after the first <eos> is ignored
        "7 + 5 = 12 . ans 13 <eos>": 0,  # wrong
        "7 + 5 = 12 . ans 12": 0,  # no <eos>
        "7 + 5 = 12 . 12 <eos>": 0,  # no "ans"
        "ans <eos>": 0,  # no digits
        "ans 1 2 . <eos>": 0,  # a non-digit after the number
        "ans pens 12 <eos>": 0,
        "ans 00012 <eos>": 0,  # more than MAX_ANSWER_DIGITS digits
        "<eos> ans 12 <eos>": 0,  # "ans" only after the first <eos>
        "": 0,
        "<eos>": 0,
    }
    np.testing.assert_array_equal(rewards_of(prompt, list(cases), 12), list(cases.values()))


def test_reward_ignores_the_prompt():
    """An "ans" or <eos> in the prompt region is not part of the completion."""
    rows = jnp.asarray([task.encode("<bos> ans 4 <eos> ans 4 <eos>") + [task.PAD] * 58])
    np.testing.assert_array_equal(task.reward(rows, jnp.array([4]), jnp.array([4])), [1.0])
    np.testing.assert_array_equal(task.reward(rows, jnp.array([7]), jnp.array([4])), [0.0])


def test_problems_are_consistent(problems):
    held_out, pool = problems
    for p in (held_out, pool):
        np.testing.assert_array_equal(task.reward(p.sequences, p.prompt_len, p.answers), 1.0)
    seen = {tuple(r) for r in np.asarray(held_out.prompts)}
    assert not any(tuple(r) in seen for r in np.asarray(pool.prompts))
    np.testing.assert_array_equal(np.bincount(np.asarray(held_out.level))[1:], [16, 16, 16])
    text = task.decode(held_out.sequences[0])
    assert text.startswith("<bos>") and text.endswith(f"ans {int(held_out.answers[0])} <eos>")


def test_kv_cache_decode_equals_uncached_forward(tiny, problems):
    model, params = tiny
    tokens = problems[1].sequences[:3]

    def step(cache, t):
        logits, cache = model.apply(params, tokens[:, t], t, cache, method=Transformer.decode)
        return cache, logits

    _, cached = jax.lax.scan(step, init_cache(TINY, 3, task.SEQ_LEN), jnp.arange(task.SEQ_LEN))
    np.testing.assert_allclose(cached.transpose(1, 0, 2), model.apply(params, tokens),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logp_equals_forward_pass(tiny, problems, temperature):
    model, params = tiny
    pool = problems[1]
    out = sample(model, params, pool.prompts[:8], pool.prompt_len[:8], jax.random.key(1),
                 temperature)
    gen, tokens = np.asarray(out.generated), np.asarray(out.tokens)
    for row, n in enumerate(np.asarray(pool.prompt_len[:8])):
        np.testing.assert_array_equal(tokens[row, :n], pool.prompts[row, :n])
        eos = np.flatnonzero(tokens[row, n:] == task.EOS)
        end = n + eos[0] + 1 if eos.size else task.SEQ_LEN  # one past the completion
        np.testing.assert_array_equal(gen[row], (np.arange(1, task.SEQ_LEN) >= n)
                                      & (np.arange(1, task.SEQ_LEN) < end))
        assert (tokens[row, end:] == task.PAD).all()
    full = token_logp(model, params, out.tokens, temperature)
    np.testing.assert_allclose(np.where(gen, full, 0.0), out.logp, atol=1e-5)


def np_group_advantages(rewards, group_size):
    g = rewards.reshape(-1, group_size)
    return ((g - g.mean(1, keepdims=True)) / (g.std(1, keepdims=True) + 1e-6)).ravel()


def np_group_advantages_unscaled(rewards, group_size):
    g = rewards.reshape(-1, group_size)
    return (g - g.mean(1, keepdims=True)).ravel()


def np_aggregate(x, valid, how):
    """The three reductions written out row by row."""
    if how == "token":
        return x[valid].mean()
    if how == "sequence":
        return np.mean([row[v].mean() if v.any() else 0.0 for row, v in zip(x, valid, strict=True)])
    return sum(row[v].sum() for row, v in zip(x, valid, strict=True)) / x.size  # "constant"


def np_grpo(logp, logp_b, adv, valid, eps, agg="token", w=None):
    r = np.exp(logp - logp_b)
    a = np.broadcast_to(adv[:, None], r.shape) * (1.0 if w is None else w)
    s = np.minimum(r * a, np.clip(r, 1 - eps, 1 + eps) * a)
    clipped = (np.abs(r - 1) > eps) & (a * (r - 1) > 0)
    return -np_aggregate(s, valid, agg), clipped[valid].mean()


def np_vaco(logp, logp_anchor, adv, valid, delta, kind, agg="token", w=None):
    r = np.exp(logp - logp_anchor)
    a = np.broadcast_to(adv[:, None], r.shape) * (1.0 if w is None else w)
    tv = 0.5 * np.abs(r - 1)
    exceeded = {"batch": tv[valid].mean() >= delta, "sample": tv >= delta, "none": False}[kind]
    m = ~(exceeded & (a * (r - 1) > 0))
    return -np_aggregate(m * r * a, valid, agg), 1 - m[valid].mean()


def random_batch(seed, spread):
    rng = np.random.default_rng(seed)
    shape = (6, 9)
    logp_b = np.log(rng.uniform(0.05, 1.0, shape)).astype(np.float32)
    logp = (logp_b + rng.normal(0, spread, shape)).astype(np.float32)
    valid = rng.random(shape) < 0.7
    rewards = rng.integers(0, 2, 6).astype(np.float32)
    return logp, logp_b, rewards, valid


def test_group_advantages_match_numpy():
    rewards = np.array([1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 0], np.float32)
    np.testing.assert_allclose(losses.group_advantages(jnp.asarray(rewards), 4),
                               np_group_advantages(rewards, 4), rtol=1e-6)
    np.testing.assert_array_equal(losses.group_advantages(jnp.asarray(rewards), 4)[8:], 0.0)


def test_unscaled_group_advantages_match_numpy():
    rewards = np.random.default_rng(5).integers(0, 2, 24).astype(np.float32)
    adv = losses.group_advantages(jnp.asarray(rewards), 8, scale="none")
    np.testing.assert_allclose(adv, np_group_advantages_unscaled(rewards, 8), atol=1e-6)
    with pytest.raises(ValueError):
        losses.group_advantages(jnp.asarray(rewards), 8, scale="bogus")


@pytest.mark.parametrize("how", ["token", "sequence", "constant"])
@pytest.mark.parametrize("seed", [0, 1])
def test_aggregate_matches_numpy(how, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(7, 11)).astype(np.float32)
    valid = rng.random((7, 11)) < 0.5
    valid[3] = False  # a completion with no valid token
    np.testing.assert_allclose(losses.aggregate(jnp.asarray(x), jnp.asarray(valid), how),
                               np_aggregate(x, valid, how), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("agg", ["sequence", "constant"])
@pytest.mark.parametrize("seed, spread", [(0, 0.05), (1, 0.5)])
def test_policy_losses_aggregations_match_numpy(agg, seed, spread):
    logp, logp_b, rewards, valid = random_batch(seed, spread)
    adv = np_group_advantages_unscaled(rewards, 3)
    args = tuple(map(jnp.asarray, (logp, logp_b, adv, valid)))
    for got, want in [(losses.grpo_policy_loss(*args, 0.2, agg),
                       np_grpo(logp, logp_b, adv, valid, 0.2, agg)),
                      (losses.vaco_policy_loss(*args, 0.2, "sample", agg),
                       np_vaco(logp, logp_b, adv, valid, 0.2, "sample", agg))]:
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


@pytest.mark.parametrize("seed, spread", [(0, 0.05), (1, 0.5), (2, 1.0)])
def test_grpo_loss_matches_numpy(seed, spread):
    logp, logp_b, rewards, valid = random_batch(seed, spread)
    adv = np_group_advantages(rewards, 3)
    loss, frac = losses.grpo_policy_loss(*map(jnp.asarray, (logp, logp_b, adv, valid)), 0.2)
    ref_loss, ref_frac = np_grpo(logp, logp_b, adv, valid, 0.2)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(frac, ref_frac, rtol=1e-6)


@pytest.mark.parametrize("kind", ["batch", "sample", "none"])
@pytest.mark.parametrize("seed, spread", [(0, 0.05), (1, 0.5), (2, 1.0)])
def test_vaco_loss_matches_numpy(kind, seed, spread):
    logp, logp_t, rewards, valid = random_batch(seed, spread)
    adv = np_group_advantages(rewards, 3)
    loss, frac = losses.vaco_policy_loss(*map(jnp.asarray, (logp, logp_t, adv, valid)), 0.2,
                                         kind)
    ref_loss, ref_frac = np_vaco(logp, logp_t, adv, valid, 0.2, kind)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(frac, ref_frac, rtol=1e-6)
    if kind == "batch":  # the batch test fires or not with the spread, as the data decide
        assert (frac > 0) == (0.5 * np.abs(np.exp(logp - logp_t) - 1)[valid].mean() >= 0.2)


def np_is_weight(logp_t, logp_b, rho_bar):
    return np.minimum(rho_bar, np.exp(logp_t - logp_b))


@pytest.mark.parametrize("rho_bar", [1.0, 2.0])
@pytest.mark.parametrize("seed, spread", [(0, 0.05), (1, 0.5), (2, 1.0)])
def test_grpo_learner_anchor_loss_matches_numpy(seed, spread, rho_bar):
    """Decoupled clip: r = π_θ/π_T, each token's Â weighted once by min(ρ̄, π_T/β)."""
    logp, logp_b, rewards, valid = random_batch(seed, spread)
    logp_t = (logp_b + np.random.default_rng(seed + 10).normal(0, spread, logp.shape)
              ).astype(np.float32)
    adv = np_group_advantages(rewards, 3)
    w = np_is_weight(logp_t, logp_b, rho_bar)
    weights = losses.is_weight(jnp.asarray(logp_t), jnp.asarray(logp_b), rho_bar)
    np.testing.assert_allclose(weights, w, rtol=1e-6)
    if spread >= 0.5:  # both sides of the truncation
        assert (w < rho_bar).any() and (w == rho_bar).any()
    for agg in ("token", "sequence"):
        loss, frac = losses.grpo_policy_loss(*map(jnp.asarray, (logp, logp_t, adv, valid)),
                                             0.2, agg, weights)
        ref_loss, ref_frac = np_grpo(logp, logp_t, adv, valid, 0.2, agg, w)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(frac, ref_frac, rtol=1e-6)
    for kind in ("batch", "sample", "none"):
        loss, frac = losses.vaco_policy_loss(*map(jnp.asarray, (logp, logp_t, adv, valid)),
                                             0.2, kind, "token", weights)
        ref_loss, ref_frac = np_vaco(logp, logp_t, adv, valid, 0.2, kind, "token", w)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(frac, ref_frac, rtol=1e-6)


def test_learner_anchor_gradient_is_weighted_policy_gradient():
    """At θ = π_T, ∇L = −mean_v(w·Â·∇log π_θ), w = min(1, π_T/β); with π_T = β (K = 0,
    one update) it is GRPO's."""
    logp_t, logp_b, rewards, valid = random_batch(6, 0.5)
    adv, valid_j = jnp.asarray(np_group_advantages(rewards, 3)), jnp.asarray(valid)
    lt, lb = jnp.asarray(logp_t), jnp.asarray(logp_b)
    grad = jax.grad(lambda lp: losses.grpo_policy_loss(
        lp, lt, adv, valid_j, 0.2, weights=losses.is_weight(lt, lb, 1.0))[0])(lt)
    w = np_is_weight(logp_t, logp_b, 1.0)
    expected = -np.where(valid, w * np.asarray(adv)[:, None], 0.0) / valid.sum()
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-9)
    same = jax.grad(lambda lp: losses.grpo_policy_loss(
        lp, lb, adv, valid_j, 0.2, weights=losses.is_weight(lb, lb, 1.0))[0])(lb)
    plain = jax.grad(lambda lp: losses.grpo_policy_loss(lp, lb, adv, valid_j, 0.2)[0])(lb)
    np.testing.assert_allclose(same, plain, rtol=1e-6)


@pytest.mark.parametrize("changes, anchor, weighted", [
    ({}, "behaviour", False),
    ({"grpo": {"anchor": "learner"}}, "learner", True),
    ({"algo": "vaco"}, "learner", False),  # VACO's default: π_T without the weight
    ({"algo": "vaco", "vaco": {"weight": "truncated"}}, "learner", True),
    ({"algo": "vaco", "vaco": {"anchor": "behaviour", "weight": "truncated"}}, "behaviour",
     False)])
def test_policy_anchor_picks_the_configured_anchor(changes, anchor, weighted):
    from jaxvaco.core.config import from_table
    from jaxvaco.llm.model import Completions
    from jaxvaco.llm.train import Rollout, policy_anchor

    logp_t, logp_b, rewards, valid = random_batch(7, 0.5)
    tokens = jnp.zeros((6, 10), jnp.int32)
    mb = Rollout(Completions(tokens, jnp.asarray(logp_b), jnp.asarray(valid)),
                 jnp.asarray(rewards), jnp.asarray(rewards), jnp.asarray(logp_t),
                 jnp.zeros_like(logp_t))
    got, weights = policy_anchor(mb, from_table(LLMConfig, changes, "test"))
    np.testing.assert_array_equal(got, logp_t if anchor == "learner" else logp_b)
    assert (weights is not None) == weighted
    if weighted:
        np.testing.assert_allclose(weights, np_is_weight(logp_t, logp_b, 1.0), rtol=1e-6)


def test_vaco_gradient_at_anchor_is_policy_gradient():
    """At θ = anchor (r = 1, nothing filtered), ∇L = −mean_v(Â·∇log π_θ), as GRPO's."""
    logp, _, rewards, valid = random_batch(3, 0.0)
    adv = jnp.asarray(np_group_advantages(rewards, 3))
    grad_vaco = jax.grad(lambda lp: losses.vaco_policy_loss(
        lp, jnp.asarray(logp), adv, jnp.asarray(valid), 0.2, "batch")[0])(jnp.asarray(logp))
    grad_grpo = jax.grad(lambda lp: losses.grpo_policy_loss(
        lp, jnp.asarray(logp), adv, jnp.asarray(valid), 0.2)[0])(jnp.asarray(logp))
    np.testing.assert_allclose(grad_vaco, grad_grpo, rtol=1e-6)
    expected = -np.where(valid, np.asarray(adv)[:, None], 0.0) / valid.sum()
    np.testing.assert_allclose(grad_vaco, expected, rtol=1e-6, atol=1e-9)


def test_k3_kl():
    logp, logp_ref, _, valid = random_batch(4, 0.3)
    u = logp_ref - logp
    np.testing.assert_allclose(losses.k3_kl(jnp.asarray(logp), jnp.asarray(logp_ref),
                                            jnp.asarray(valid)),
                               (np.expm1(u) - u)[valid].mean(), rtol=1e-5)


@pytest.fixture(scope="module")
def tiny_rl(tiny):
    """GRPO with a KL term, its jitted train step and iteration (compiled once here)."""
    config = LLMConfig(num_prompts=2, group_size=4, epochs=2, minibatches=2,
                       learning_rate=1e-3, kl_coef=0.1, lag=LLMLagConfig(delays=(2,), max_delay=2))
    step = jax.jit(lambda *a: train.train_step(tiny[0], config, *a))
    return config, step, jax.jit(lambda *a: train.iteration(tiny[0], config, *a))


def test_k0_equals_synchronous_training(tiny, tiny_rl, other_params, problems):
    """With K = 0 the lagged loop is the synchronous one: every generation step samples
    with the current θ (an explicit loop over `iteration`), whatever the buffer size."""
    params = tiny[1]
    pool = problems[1]
    config, step, iteration = tiny_rl
    state = train.init_state(config, params, jax.random.key(3))
    sync_params, sync_opt, key = params, state.opt_state, state.key
    for _ in range(3):
        state, metrics = step(state, jnp.int32(0), pool, other_params)
        key, _, k_iter = jax.random.split(key, 3)
        sync_params, sync_opt, sync_metrics = iteration(sync_params, sync_opt, sync_params,
                                                        k_iter, pool, other_params)
        assert float(metrics["tv/backward"]) < 1e-6  # sampler vs forward-pass rounding
        np.testing.assert_allclose(metrics["tv/total"], sync_metrics["tv/total"], rtol=1e-5)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(sync_params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(jax.tree.leaves(state.params)[0], jax.tree.leaves(params)[0])


def test_lag_uses_parameters_k_steps_old(tiny, tiny_rl, other_params, problems):
    """With K = 2: the delay is min(K, T), and β = θ_{T−2} differs from π_T (TV > 0)."""
    params = tiny[1]
    config, step, _ = tiny_rl
    state = train.init_state(config, params, jax.random.key(4))
    lags, tvs = [], []
    for _ in range(4):
        state, metrics = step(state, jnp.int32(2), problems[1], other_params)
        lags.append(float(metrics["lag/iterations"]))
        tvs.append(float(metrics["tv/backward"]))
    assert lags == [0.0, 1.0, 2.0, 2.0]
    assert tvs[0] < 1e-6 and min(tvs[1:]) > 1e-3


@pytest.fixture(scope="module")
def level_one_warm_start(fast_compile):
    """The slow tests' start: the default-size model after 300 SFT steps, the held-out
    problems counted at level 1 only, and the level-1 training pool for RL."""
    model = Transformer(ModelConfig(len(task.VOCAB), task.SEQ_LEN))
    held_out = task.test_sets(size=64)
    held_out = held_out._replace(level=jnp.where(held_out.level == 1, 1, 0))  # level 1 only
    pool = task.train_pool(8192, 1, held_out)
    params = model.init(jax.random.key(0), pool.sequences[:1])
    params, _ = jax.jit(lambda p: warm_start(model, p, pool, jax.random.key(5), 300, 64, 1e-3))(
        params)
    level_one = jax.tree.map(lambda x: x[np.flatnonzero(pool.level == 1)], pool)
    return model, held_out, level_one, params


def train_rl(model, config: LLMConfig, pool, params, steps: int):
    """`steps` RL steps at K = 0 from `params` (also the KL reference): (state, metrics)."""
    return jax.jit(lambda s: train.chunk(model, config, s, jnp.int32(0), pool, params, steps))(
        train.init_state(config, params, jax.random.key(6)))


@pytest.mark.slow
def test_tiny_end_to_end_improves_held_out_accuracy(level_one_warm_start):
    """A short warm start, then 60 steps of GRPO+VACO on one-step problems: the held-out
    success rate at the sampling temperature (16 samples × 64 problems) rises by > 0.05.

    Measured when written: 0.36 -> 0.51 (seed 6) and 0.46 (seed 7). With P = 8 prompts ×
    G = 8 in 4 minibatches, or at lr 1e-3, Adam's steps on the noisy small minibatches made
    the success rate fall instead; greedy accuracy stays near 0.55 at this budget.
    """
    model, held_out, pool, params = level_one_warm_start
    success = jax.jit(lambda p: sampled_accuracy(model, p, held_out, jax.random.key(99), 1.0,
                                                 16)[0])
    before = float(success(params))
    config = LLMConfig(algo="vaco", vaco=TokenVacoConfig(anchor="behaviour"), learning_rate=3e-4,
                       num_prompts=16, group_size=16, minibatches=1, epochs=1)
    state, metrics = train_rl(model, config, pool, params, 60)
    after = float(success(state.params))
    assert after > before + 0.05, (before, after, np.asarray(metrics["reward"]))


@pytest.mark.slow
def test_rl_raises_held_out_greedy_accuracy_over_warm_start(level_one_warm_start):
    """The RL stage that works at K = 0 (lr 1e-4, 16 prompts × 16 completions, one
    update per batch: LLMConfig's defaults with epochs = 1), 40 steps from a 300-step SFT
    warm start on one-step problems, raises held-out greedy accuracy (64 problems) and the
    τ = 1 success rate (8 samples per problem) over the warm start.

    Measured when written: greedy 0.547 -> 0.578 (35 -> 37 of 64 problems, a small gain)
    and sampled 0.400 -> 0.455. 390 s on 2 CPU cores at load ≈ 7 (other jobs running).
    On the full three-level task the gains are clearer: experiments/results/llm_rl/notes.md
    (4 seeds, 0.784 -> 0.840 greedy). At lr 3e-4 greedy accuracy fell instead: Adam's
    ≈ lr-sized steps follow the policy gradient's noise.
    """
    model, held_out, pool, params = level_one_warm_start
    greedy = jax.jit(lambda p: accuracy(model, p, held_out)[0])
    success = jax.jit(lambda p: sampled_accuracy(model, p, held_out, jax.random.key(99), 1.0,
                                                 8)[0])
    before = float(greedy(params)), float(success(params))
    state, metrics = train_rl(model, LLMConfig(epochs=1), pool, params, 40)
    after = float(greedy(state.params)), float(success(state.params))
    assert after[0] > before[0] and after[1] > before[1] + 0.03, (
        before, after, np.asarray(metrics["reward"]))


@pytest.mark.parametrize("prompts,group,epochs,minibatches", [(8, 4, 3, 2), (8, 8, 1, 4)])
def test_group_minibatches_keep_groups_whole(prompts, group, epochs, minibatches):
    """Against NumPy: update e·M + m holds the completions of the groups
    perm_e[m·P/M : (m+1)·P/M], perm_e being epoch e's permutation of the P prompts."""
    config = dataclasses.replace(LLMConfig(), num_prompts=prompts, group_size=group,
                                 epochs=epochs, minibatches=minibatches)
    rows = np.random.default_rng(0).normal(size=(prompts * group, 3)).astype(np.float32)
    key = jax.random.key(5)
    out = np.asarray(group_minibatches({"x": jnp.asarray(rows)}, key, config)["x"])
    size = prompts // minibatches
    for e, k in enumerate(jax.random.split(key, epochs)):
        perm = np.asarray(jax.random.permutation(k, prompts))
        for m in range(minibatches):
            groups = perm[m * size:(m + 1) * size]
            expected = rows.reshape(prompts, group, 3)[groups].reshape(-1, 3)
            np.testing.assert_array_equal(out[e * minibatches + m], expected)


def test_llm_lag_spec_and_report(tmp_path):
    """experiments/llm_lag.py and llm_report.py without training: the variants' LLMConfigs
    (flags change the spec; δ only the VACO variants'), the summary's t-intervals from
    results rows read back from results.csv, and an old-format folder refused."""
    from scipy import stats

    from experiments import llm_lag, llm_report
    from jaxvaco.lab.results import read_results, read_rows, write_results

    args = llm_lag.parser().parse_args(["--seeds", "8", "--variants", "grpo-pit", "none",
                                        "--delta", "0.005", "--ks", "0", "4"])
    spec = llm_lag.spec(args)
    assert list(spec) == ["grpo π_T", "none (IS gradient)"]
    assert spec["grpo π_T"].grpo.anchor == "learner" and spec["grpo π_T"].num_seeds == 8
    assert spec["grpo π_T"].vaco.delta == TokenVacoConfig().delta
    none = spec["none (IS gradient)"]
    assert (none.vaco.filter, none.vaco.delta, none.lag.delays) == ("none", 0.005, (0, 4))
    default = llm_lag.spec(llm_lag.parser().parse_args([]))  # the table in docs/results/llm.md
    assert default["vaco π_T"] == LLMConfig(algo="vaco", vaco=TokenVacoConfig(
        anchor="learner", weight="truncated"))
    assert (LLMConfig().epochs, LLMConfig().warm_start.steps, LLMConfig().lag.delays) == (
        2, 1800, (0, 2, 4, 8))

    rng = np.random.default_rng(0)
    rows = [{"env": "arithmetic", "algo": m.split()[0], "variant": m, "K": k, "seed": s,
             "step": step, "accuracy": rng.random(), "sampled_accuracy": rng.random(),
             **{c: rng.random() for c in llm_report.LEVEL_COLUMNS + llm_report.METRICS},
             "grpo/clipped_fraction": 0.1 if m.startswith("grpo") else None,
             "vaco/filtered_fraction": None if m.startswith("grpo") else 0.2}
            for m in ("grpo π_T", "vaco β") for k in (0, 8) for s in range(3) for step in (5, 10)]
    write_results(tmp_path / "results.csv", rows)
    (tmp_path / "warm_start.json").write_text(json.dumps(
        {"accuracy_by_level": [0.5, 0.5, 0.5], "sampled_accuracy": 0.4}))
    table = llm_report.report(tmp_path)
    back = read_results(tmp_path / "results.csv")
    assert back[0]["vaco/filtered_fraction"] is None and back[0]["K"] == 0
    summary = llm_report.summarize(back, 0.5, 0.4)
    assert [(s["method"], s["K"]) for s in summary] == [
        ("grpo π_T", 0), ("grpo π_T", 8), ("vaco β", 0), ("vaco β", 8)]
    final = np.array([r["sampled_accuracy"] for r in rows
                      if r["variant"] == "vaco β" and r["K"] == 8 and r["step"] == 10])
    half = stats.t.ppf(0.975, 2) * final.std(ddof=1) / np.sqrt(3)
    np.testing.assert_allclose([summary[3]["sampled_acc"], summary[3]["sampled_ci95"],
                                summary[3]["sampled_gain"]],
                               [final.mean(), half, final.mean() - 0.4], rtol=1e-6)
    assert (summary[0]["fraction"], summary[2]["fraction"]) == pytest.approx((0.1, 0.2))
    assert "| vaco β | 8 |" in table and "| sampled accuracy | K = 0 | K = 8 |" in table
    assert (tmp_path / "llm_lag.png").stat().st_size > 0
    assert {"method", "final_acc", "ci95", "sampled_acc", "fraction", "tv/backward"} <= set(
        read_rows(tmp_path / "summary.csv")[0])
    old = tmp_path / "old"
    old.mkdir()
    (old / "curves.csv").write_text("method,K\n")
    with pytest.raises(SystemExit, match="before it ran through jaxvaco.llm.run"):
        llm_report.refuse_old_folder(old)

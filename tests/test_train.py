"""The jitted training loop (`jaxvaco.core.train`) and the host loop (`jaxvaco.host.runner`).

Compilation dominates the cost of these tests (about 4 s per trainer on CPU), so compiled
trainers are cached per config (`jitted`) and shared between tests, and every config is
tiny. To keep the default run under a minute, the per-algorithm smoke tests run one
representative algorithm by default (ppo through the shared fixtures, and vaco, whose
learner-side path differs most); the other algorithms are marked `slow` (`pytest -m slow`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxvaco.core import lag
from jaxvaco.core.algos import algorithms
from jaxvaco.core.config import ConfigError, EvalConfig, LagConfig, TrainConfig, from_dict
from jaxvaco.core.train import make_train
from jaxvaco.host import runner
from jaxvaco.host.grid import expand_runs, hyperparams_from_config
from jaxvaco.lab.results import FRACTIONS


@pytest.fixture(scope="module", autouse=True)
def _fast(fast_compile):
    yield


def tiny(**changes) -> TrainConfig:
    base = TrainConfig(env="CartPole-v1", algo="ppo", num_envs=8, num_steps=16,
                       total_timesteps=8 * 16 * 4, update_epochs=2, num_minibatches=2,
                       hidden_sizes=(16, 16), learning_rate=1e-3, progress=False,
                       chunk_iterations=2, eval=EvalConfig(every_chunks=0, num_episodes=4))
    return dataclasses.replace(base, **changes)


UNIFORM2 = LagConfig(max_delay=2, mode="uniform", num_groups=2)


class Jitted:
    """One seed, no vmap: jitted init / train_chunk / evaluate of a Trainer."""

    def __init__(self, config: TrainConfig):
        self.config = config
        self.trainer = make_train(config)
        self.hp = hyperparams_from_config(config)
        self.init = jax.jit(self.trainer.init)
        self.chunk = jax.jit(self.trainer.train_chunk)
        self.evaluate = jax.jit(self.trainer.evaluate, static_argnums=2)

    def start(self, seed: int):
        return self.init(jax.random.PRNGKey(seed), self.hp)

    def step(self, state, n: int):
        state, sums = self.chunk(state, self.hp, jnp.int32(n))
        return state, jax.tree.map(np.asarray, sums)


@functools.cache
def jitted(config: TrainConfig) -> Jitted:
    return Jitted(config)


def leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def assert_finite(sums: dict):
    for name, value in sums.items():
        assert np.all(np.isfinite(value)), (name, value)


# ------------------------------------------------------------------ seeds: vmap == loop


@pytest.fixture(scope="module")
def three_seed_run(tmp_path_factory):
    config = tiny(num_seeds=3, seed=0, results_dir=str(tmp_path_factory.mktemp("results")),
                  run_name="three")
    return runner.run(config)


def reference_rows(seed: int):
    """Unvmapped single-seed training with PRNGKey(seed): final params and per-chunk rows."""
    ref = jitted(tiny())
    state = ref.start(seed)
    rows = []
    while int(state.iteration) < ref.config.num_iterations:
        state, sums = ref.step(state, ref.config.chunk_iterations)
        row = {k: float(v) / ref.config.chunk_iterations for k, v in sums.items()
               if not k.startswith("episode/")}
        count = float(sums["episode/count"])
        row["episode/count"] = count
        row["episode/return"] = float(sums["episode/return_sum"]) / count if count else None
        row["episode/length"] = float(sums["episode/length_sum"]) / count if count else None
        row["iteration"] = int(state.iteration)
        rows.append(row)
    return state, rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seed_vmap_matches_single_seed_runs(three_seed_run, seed):
    """Seed i of a 3-seed `runner.run` (seeds vmapped in one program) trains exactly as a
    single unvmapped run with PRNGKey(i).

    Not bit-exact on CPU: vmap changes XLA's float reduction order (observed differences
    ~1e-8 in params, ~1e-4 relative in near-zero losses), so values are compared with
    rtol 1e-5 and atol 1e-6. Episode counts, which depend on sampled actions, are exact.
    """
    result = three_seed_run
    state, expected_rows = reference_rows(seed)
    for got, want in zip(leaves(result.state.params), leaves(state.params), strict=True):
        np.testing.assert_allclose(got[seed], want, rtol=1e-5, atol=1e-6)
    assert int(result.state.iteration[seed]) == int(state.iteration) == 4
    rows = [row for row in result.rows if row["seed"] == seed]
    assert len(rows) == len(expected_rows) == 2
    for row, want in zip(rows, expected_rows, strict=True):
        for name, value in want.items():
            if value is None or name == "episode/count":
                assert row[name] == value, name
            else:
                np.testing.assert_allclose(row[name], value, rtol=1e-5, atol=1e-6,
                                           err_msg=name)


def test_run_keys_offset_by_seed():
    runs, keys, _ = expand_runs(tiny(seed=5, num_seeds=3))
    for i in range(3):
        assert runs[i]["seed"] == 5 + i
        np.testing.assert_array_equal(keys[i], jax.random.PRNGKey(5 + i))


def test_list_grid_runs_exactly_the_given_combinations():
    """A random search: combinations that are not a product, each × seeds."""
    grid = [{"learning_rate": 1e-3, "ent_coef": 0.0}, {"learning_rate": 3e-3, "ent_coef": 0.02}]
    runs, _, hp = expand_runs(tiny(num_seeds=2), grid)
    assert [(r["learning_rate"], r["ent_coef"], r["seed"]) for r in runs] == [
        (1e-3, 0.0, 0), (1e-3, 0.0, 1), (3e-3, 0.02, 0), (3e-3, 0.02, 1)]
    np.testing.assert_allclose(hp.learning_rate, [1e-3, 1e-3, 3e-3, 3e-3])
    np.testing.assert_allclose(hp.ent_coef, [0.0, 0.0, 0.02, 0.02])
    with pytest.raises(ConfigError):
        expand_runs(tiny(), [{"learning_rate": 1e-3}, {"ent_coef": 0.1}])


def test_metrics_jsonl_and_config_json(three_seed_run):
    result = three_seed_run
    lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 2 * 3  # chunks × seeds
    assert rows == result.rows
    assert sorted((r["chunk"], r["seed"]) for r in rows) == [(c, s) for c in (1, 2)
                                                             for s in range(3)]
    assert [r["iteration"] for r in rows] == [2, 2, 2, 4, 4, 4]
    assert all(r["env_steps"] == r["iteration"] * 128 for r in rows)
    # evaluation only at the end (every_chunks=0), one value per seed
    assert all("eval/greedy_return" not in r for r in rows[:3])
    assert all(0 < r["eval/greedy_return"] <= 500 for r in rows[3:])
    np.testing.assert_allclose(result.summary["eval/greedy_return"],
                               [r["eval/greedy_return"] for r in rows[3:]])
    config = from_dict(json.loads((result.run_dir / "config.json").read_text()))
    assert config == result.config
    assert result.run_dir.name == "three"


def test_greedy_eval_of_fresh_policy_is_bounded():
    ref = jitted(tiny())
    state = ref.start(0)
    for greedy in (True, False):
        returns = np.asarray(ref.evaluate(state, jax.random.PRNGKey(1), greedy))
        assert returns.shape == (ref.config.eval.num_episodes,)
        assert np.all(np.isfinite(returns))
        assert np.all(returns >= 1) and np.all(returns <= 500)  # CartPole: +1 per step


# ---------------------------------------------------------------- K = 0 is synchronous


def slow_unless(value, fast):
    """A parametrize value, marked slow unless it is in `fast`."""
    if value in fast:
        return value
    values = value if isinstance(value, tuple) else (value,)
    return pytest.param(*values, marks=pytest.mark.slow)


@pytest.mark.parametrize("algo", [slow_unless(a, ("ppo", "vaco")) for a in algorithms()])
def test_k0_is_synchronous(algo):
    ref = jitted(tiny(algo=algo))
    state = ref.start(0)
    assert state.lag is None
    for _ in range(2):
        state, sums = ref.step(state, 1)
        assert_finite(sums)
        assert sums["tv/backward"] == 0.0
        assert sums["lag/iterations"] == 0.0
        # β = π_T exactly, so the total TV is the forward TV (the two are reduced by
        # different fusions, so they may differ in the last bit)
        assert sums["tv/total"] == pytest.approx(sums["tv/forward"], rel=1e-5, abs=1e-9)
        u = ref.config.updates_per_iteration
        assert sums["lag/sgd_steps"] == pytest.approx((u - 1) / 2)


def test_k0_ignores_groups():
    """Groups and mode must not matter when K = 0: bit-identical to the default config."""
    lag_config = LagConfig(max_delay=0, mode="uniform", num_groups=2)
    a, b = jitted(tiny()), jitted(tiny(lag=lag_config))
    sa, sb = a.start(3), b.start(3)
    for _ in range(2):
        sa, ma = a.step(sa, 1)
        sb, mb = b.step(sb, 1)
        assert ma.keys() == mb.keys()
        for name in ma:
            np.testing.assert_array_equal(ma[name], mb[name], err_msg=name)
    for x, y in zip(leaves(sa), leaves(sb), strict=True):
        np.testing.assert_array_equal(x, y)


# ------------------------------------------------------------------------------- lag


@pytest.mark.parametrize("mode", ["fixed", "uniform"])
def test_behaviour_params_come_from_t_minus_k(mode):
    """Group g at iteration T acts with θ_{max(T − k_g, 0)}: the ring buffer holds the
    learner params recorded after each single-iteration chunk."""
    K, G = 2, 2
    ref = jitted(tiny(lag=LagConfig(max_delay=K, mode=mode, num_groups=G)))
    state = ref.start(0)
    recorded = [state.params]  # recorded[T] = θ_T, learner params at the start of iteration T
    for T in range(7):
        key_before, iteration = state.key, int(state.iteration)
        assert iteration == T
        _, k_delay, _, _ = jax.random.split(key_before, 4)  # as in train.iteration
        if mode == "fixed":
            delays = np.full(G, min(K, T), np.int32)
        else:
            delays = np.asarray(lag.sample_delays(k_delay, mode, G, ref.hp.lag_delay,
                                                  jnp.int32(T)))
        state, sums = ref.step(state, 1)
        recorded.append(state.params)
        assert_finite(sums)
        assert sums["lag/iterations"] == pytest.approx(delays.mean())
        # ring buffer: slot (T − j) mod (K+1) holds θ_{T−j}
        for j in range(min(K, T) + 1):
            slot = jax.tree.map(lambda h, s=(T - j) % (K + 1): h[s], state.lag)
            for x, y in zip(leaves(slot), leaves(recorded[T - j]), strict=True):
                np.testing.assert_array_equal(x, y)
        behaviour = lag.gather(state.lag, jnp.int32(T), jnp.asarray(delays))
        for g in range(G):
            want = recorded[max(T - int(delays[g]), 0)]
            got = jax.tree.map(lambda x, g=g: x[g], behaviour)
            for x, y in zip(leaves(got), leaves(want), strict=True):
                np.testing.assert_array_equal(x, y)
        # backward TV: zero iff every group acts with θ_T (up to float rounding: the
        # behaviour log-probs are computed per group, the learner's without vmap)
        if delays.max() == 0:
            assert sums["tv/backward"] < 1e-6
        else:
            assert sums["tv/backward"] > 1e-4


def test_fixed_lag_backward_tv_end_to_end():
    """K = 2 fixed: no backward lag in iteration 0 (clamped at θ_0); afterwards the
    actors use stale params, so tv/backward > 0 and lag/iterations = min(K, T)."""
    ref = jitted(tiny(lag=LagConfig(max_delay=2, mode="fixed", num_groups=2)))
    state = ref.start(1)
    tvs, lags = [], []
    for _ in range(4):
        state, sums = ref.step(state, 1)
        tvs.append(float(sums["tv/backward"]))
        lags.append(float(sums["lag/iterations"]))
    assert lags == [0.0, 1.0, 2.0, 2.0]
    assert tvs[0] < 1e-6
    assert all(tv > 1e-4 for tv in tvs[1:]), tvs
    # the total TV bounds neither part trivially: it is positive and finite
    assert 0 < float(sums["tv/total"]) < 1


def test_history_size_independent_of_batch():
    """The ring buffer holds K+1 parameter snapshots, whatever N and L are."""
    def state_shapes(config):
        trainer = make_train(config)
        hp = hyperparams_from_config(config)
        return jax.eval_shape(trainer.init, jax.random.PRNGKey(0), hp)

    small = state_shapes(tiny(lag=LagConfig(max_delay=3, num_groups=2)))
    big = state_shapes(tiny(num_envs=32, num_steps=64, num_minibatches=4,
                            total_timesteps=32 * 64, lag=LagConfig(max_delay=3, num_groups=4)))
    assert small.obs.shape != big.obs.shape  # the batches differ ...
    hist_small = [(x.shape, x.dtype) for x in jax.tree.leaves(small.lag)]
    hist_big = [(x.shape, x.dtype) for x in jax.tree.leaves(big.lag)]
    assert hist_small == hist_big  # ... the buffer does not
    for h, p in zip(jax.tree.leaves(small.lag), jax.tree.leaves(small.params), strict=True):
        assert h.shape == (4,) + p.shape
    n_params = sum(math.prod(p.shape) for p in jax.tree.leaves(small.params))
    assert sum(math.prod(h.shape) for h in jax.tree.leaves(small.lag)) == 4 * n_params
    k6 = state_shapes(tiny(lag=LagConfig(max_delay=6, num_groups=2)))
    assert {h.shape[0] for h in jax.tree.leaves(k6.lag)} == {7}
    assert state_shapes(tiny()).lag is None


# ------------------------------------------------------------- every algorithm, K = 2


GRID = [(algo, env) for env in ("CartPole-v1", "Pendulum-v1") for algo in algorithms()]
FAST_GRID = (("ppo", "CartPole-v1"), ("vaco", "Pendulum-v1"))


@pytest.mark.parametrize("algo,env", [slow_unless(case, FAST_GRID) for case in GRID])
def test_every_algorithm_runs_with_lag(algo, env):
    ref = jitted(tiny(algo=algo, env=env, lag=UNIFORM2))
    state = ref.start(0)
    state, sums = ref.step(state, 3)
    assert int(state.iteration) == 3
    assert_finite(sums)
    for x in leaves(state.params):
        assert np.all(np.isfinite(x))
    assert 0 <= sums["lag/iterations"] <= 3 * 2
    for name in ("tv/backward", "tv/forward", "tv/total"):
        assert sums[name] >= 0
    fraction = FRACTIONS.get(algo)  # none for ppo_kl and impala
    assert [k for k in sums if k.endswith("_fraction")] == ([fraction] if fraction else [])
    if fraction:
        assert 0 <= sums[fraction] <= 3


# ---------------------------------------------------------------------------- learning


def test_ppo_learns_cartpole(tmp_path):
    """16 envs × 128 steps × 10 iterations: greedy return far above random (≈ 22).

    Checked offline with seeds 0..9 (pairs), greedy means were all above 300."""
    config = TrainConfig(env="CartPole-v1", algo="ppo", num_envs=16, num_steps=128,
                         total_timesteps=16 * 128 * 10, hidden_sizes=(32, 32),
                         learning_rate=2.5e-3, num_seeds=2, seed=0, chunk_iterations=10,
                         progress=False, results_dir=str(tmp_path), run_name="learn",
                         eval=EvalConfig(every_chunks=0, num_episodes=16))
    result = runner.run(config)
    greedy = result.summary["eval/greedy_return"]
    assert greedy.shape == (2,)
    assert greedy.mean() > 150, greedy

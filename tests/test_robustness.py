"""Tests for jaxvaco.lab.robustness: retention and difference in differences against
direct NumPy loops, CIs against an independent bootstrap written here, pairing, errors."""

from __future__ import annotations

import numpy as np
import pytest

from jaxvaco.lab import robustness
from jaxvaco.lab.stats import REFERENCE_SCORES

CART, FOO = "CartPole-v1", "Foo-v0"  # one normalised env, one raw-return env (negative)
SEEDS = list(range(6))
STEPS = (0, 50, 100)


def _true_returns(rng, envs=(CART, FOO), methods=("vaco", "ppo"), lags=(0, 4), seeds=SEEDS):
    """(env, method, K, seed) -> final return; K = 4 loses some return, differently per
    method and seed."""
    base = {CART: 300.0, FOO: -120.0}
    out = {}
    for env in envs:
        for m in methods:
            for s in seeds:
                g0 = base[env] + rng.normal(0.0, 20.0)
                for k in lags:
                    loss = 0.0 if k == 0 else (10.0 if m == "vaco" else 40.0) * k / 4
                    out[(env, m, k, s)] = g0 - loss + rng.normal(0.0, 15.0)
    return out


def _table(truth, rng, curves=True):
    """Tidy rows (shuffled); with ``curves`` each run has several steps, the last one true
    and earlier ones garbage, so using anything but the final row shows."""
    rows = []
    for (env, m, k, s), g in truth.items():
        steps = STEPS if curves else (STEPS[-1],)
        for step in steps:
            ret = g if step == steps[-1] else rng.normal(1e4, 1e3)
            rows.append({"env": env, "algo": m, "K": k, "seed": s, "step": step,
                         "return": ret})
    return [rows[i] for i in rng.permutation(len(rows))]


def _score(env, g):
    if env in REFERENCE_SCORES:
        lo, hi = REFERENCE_SCORES[env]
        return (g - lo) / (hi - lo)
    return g


def _direct(truth, terms, lag=4):
    """Per-env {env: [paired differences]} by plain loops over the seeds in every cell."""
    envs = sorted({k[0] for k in truth})
    out = {}
    for env in envs:
        seeds = None
        for m, _ in terms:
            for k in (lag, 0):
                here = {s for (e, mm, kk, s) in truth if (e, mm, kk) == (env, m, k)}
                seeds = here if seeds is None else seeds & here
        vals = []
        for s in sorted(seeds):
            x = 0.0
            for m, w in terms:
                x += w * (_score(env, truth[(env, m, lag, s)]) - _score(env, truth[(env, m, 0, s)]))
            vals.append(x)
        if vals:
            out[env] = np.asarray(vals)
    return out


def _independent_bootstrap(diffs, reps=2000, seed=0, equal_n=True):
    """Percentile CIs [2, M + 1] (per env, then pooled) by a straightforward loop."""
    envs = list(diffs)
    if equal_n:
        d = np.stack([diffs[e] for e in envs], axis=1)
        n, m = d.shape
        rng = np.random.RandomState(seed)
        reps_out = []
        for _ in range(reps):
            idx = rng.choice(n, size=(n, m), replace=True)
            per_env = np.array([d[idx[:, j], j].mean() for j in range(m)])
            reps_out.append(np.append(per_env, per_env.mean()))
        dist = np.array(reps_out)
    else:
        cols = []
        for i, e in enumerate(envs):
            rng = np.random.RandomState(seed + i)
            n = len(diffs[e])
            cols.append([diffs[e][rng.choice(n, size=(n, 1), replace=True)[:, 0]].mean()
                         for _ in range(reps)])
        dist = np.array(cols).T
        dist = np.concatenate([dist, dist.mean(axis=1, keepdims=True)], axis=1)
    return np.percentile(dist, [2.5, 97.5], axis=0)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_retention_points_match_direct_loops(rng):
    truth = _true_returns(rng)
    for method in ("vaco", "ppo"):
        res = robustness.retention(_table(truth, rng), method, 4)
        diffs = _direct(truth, [(method, 1.0)])
        assert set(res.per_env) == {CART, FOO}
        for env, d in diffs.items():
            assert res.per_env[env][0] == pytest.approx(d.mean(), rel=1e-12, abs=1e-12)
            assert res.per_env[env][3] == len(SEEDS)
        pooled = np.mean([diffs[CART].mean(), diffs[FOO].mean()])
        assert res.point == pytest.approx(pooled, rel=1e-12)
        assert res.scale == {CART: "normalised", FOO: "return"}
        assert res.dropped_envs == () and res.unpaired_seeds == {}
    # vaco loses 10 return per K=4 step here, ppo 40: vaco keeps more on the raw env
    v, p = (robustness.retention(_table(truth, rng), m, 4) for m in ("vaco", "ppo"))
    assert v.per_env[FOO][0] > p.per_env[FOO][0]


def test_ci_equals_independent_bootstrap_equal_n(rng):
    truth = _true_returns(rng)
    res = robustness.retention(_table(truth, rng), "vaco", 4)
    diffs = _direct(truth, [("vaco", 1.0)])
    ci = _independent_bootstrap(diffs)
    for j, env in enumerate(diffs):
        point, low, high, _ = res.per_env[env]
        assert (low, high) == pytest.approx((ci[0, j], ci[1, j]), rel=1e-10, abs=1e-12)
        assert low <= point <= high and low < high
    assert res.ci == pytest.approx((ci[0, -1], ci[1, -1]), rel=1e-10)
    assert res.ci[0] <= res.point <= res.ci[1]


def test_ci_equals_independent_bootstrap_unequal_n(rng):
    truth = _true_returns(rng)
    for s in (0, 1):  # CartPole keeps 4 paired seeds of vaco, Foo keeps 6
        del truth[(CART, "vaco", 4, s)]
    res = robustness.retention(_table(truth, rng), "vaco", 4)
    diffs = _direct(truth, [("vaco", 1.0)])
    assert [len(v) for v in diffs.values()] == [4, 6]
    ci = _independent_bootstrap(diffs, equal_n=False)
    for j, env in enumerate(diffs):
        point, low, high, n = res.per_env[env]
        assert n == len(diffs[env])
        assert point == pytest.approx(diffs[env].mean(), rel=1e-12)
        assert (low, high) == pytest.approx((ci[0, j], ci[1, j]), rel=1e-10)
    assert res.point == pytest.approx(np.mean([d.mean() for d in diffs.values()]), rel=1e-12)
    assert res.ci == pytest.approx((ci[0, -1], ci[1, -1]), rel=1e-10)


def test_unpaired_seeds_and_envs_are_dropped(rng):
    truth = _true_returns(rng)
    full = robustness.retention(_table(truth, rng), "vaco", 4)
    extra = dict(truth)
    extra[(CART, "vaco", 4, 99)] = 1e6  # only at K = 4: must not enter
    extra[(FOO, "vaco", 0, 98)] = -1e6  # only at K = 0: must not enter
    extra[("Bar-v0", "vaco", 4, 0)] = 5.0  # an env with no K = 0 run at all
    res = robustness.retention(_table(extra, rng), "vaco", 4)
    assert res.point == pytest.approx(full.point, rel=1e-12)
    assert res.per_env == full.per_env  # same paired values, same draws: identical
    assert res.unpaired_seeds == {CART: (99,), FOO: (98,), "Bar-v0": (0,)}
    assert res.dropped_envs == ("Bar-v0",)
    assert "Bar-v0" not in res.per_env and "Bar-v0" not in res.scale


def test_negative_returns_give_a_difference_not_a_ratio():
    rows = []
    for s in range(5):
        rows += [{"env": FOO, "algo": "a", "K": 0, "seed": s, "return": -100.0 - s},
                 {"env": FOO, "algo": "a", "K": 4, "seed": s, "return": -150.0 - s}]
    res = robustness.retention(rows, "a", 4)  # no step column: one row per run
    assert res.point == pytest.approx(-50.0)  # a ratio would give 1.5 or so
    assert res.ci == pytest.approx((-50.0, -50.0))
    assert res.scale == {FOO: "return"}


def test_did_of_a_method_with_itself_is_exactly_zero(rng):
    truth = _true_returns(rng)
    res = robustness.difference_in_differences(_table(truth, rng), "vaco", "vaco", 4)
    assert res.point == 0.0 and res.ci == (0.0, 0.0)
    assert all(v[:3] == (0.0, 0.0, 0.0) for v in res.per_env.values())


def test_did_equals_difference_of_retentions_when_all_paired(rng):
    truth = _true_returns(rng)
    table = _table(truth, rng)
    a, b = (robustness.retention(table, m, 4) for m in ("vaco", "ppo"))
    did = robustness.difference_in_differences(table, "vaco", "ppo", 4)
    assert did.point == pytest.approx(a.point - b.point, rel=1e-12)
    for env in (CART, FOO):
        assert did.per_env[env][0] == pytest.approx(a.per_env[env][0] - b.per_env[env][0])
    assert did.point > 0  # vaco keeps more
    assert did.ci[0] <= did.point <= did.ci[1]
    assert did.kind == "difference_in_differences" and did.methods == ("vaco", "ppo")


def test_did_pairs_over_all_four_cells(rng):
    truth = _true_returns(rng)
    del truth[(CART, "ppo", 0, 2)]  # seed 2 of ppo on CartPole only at K = 4
    del truth[(FOO, "vaco", 4, 5)]  # seed 5 of vaco on Foo only at K = 0
    res = robustness.difference_in_differences(_table(truth, rng), "vaco", "ppo", 4)
    diffs = _direct(truth, [("vaco", 1.0), ("ppo", -1.0)])
    assert {e: v[3] for e, v in res.per_env.items()} == {CART: 5, FOO: 5}
    for env, d in diffs.items():
        assert res.per_env[env][0] == pytest.approx(d.mean(), rel=1e-12)
    assert res.point == pytest.approx(np.mean([d.mean() for d in diffs.values()]), rel=1e-12)
    assert res.unpaired_seeds == {CART: (2,), FOO: (5,)}


def test_ci_shrinks_with_seeds_and_covers_a_known_effect():
    effect = {"E1": -3.0, "E2": 1.0}  # true pooled retention: -1.0

    def synthetic(n, seed):
        r = np.random.default_rng(seed)
        cols = {k: [] for k in ("env", "algo", "K", "seed", "return")}
        for env, delta in effect.items():
            for s in range(n):
                g0 = r.normal(0.0, 5.0)  # shared per seed: pairing removes it
                for k, g in ((0, g0), (4, g0 + delta + r.normal(0.0, 2.0))):
                    for c, v in zip(cols, (env, "a", k, s, g), strict=True):
                        cols[c].append(v)
        return cols

    widths = [np.diff(robustness.retention(synthetic(n, 7), "a", 4, reps=500).ci)[0]
              for n in (5, 20, 80)]
    assert widths[0] > widths[1] > widths[2]
    covered = [lo <= -1.0 <= hi for lo, hi in
               (robustness.retention(synthetic(20, t), "a", 4, reps=300).ci for t in range(40))]
    assert 0.8 <= np.mean(covered) <= 1.0


def test_dataframe_and_custom_keys(rng):
    pd = pytest.importorskip("pandas")
    truth = _true_returns(rng)
    ref = robustness.retention(_table(truth, rng), "ppo", 4)
    df = pd.DataFrame(_table(truth, rng)).rename(
        columns={"algo": "method", "K": "lag_delay", "return": "G", "step": "t"})
    df["lag_delay"] = df["lag_delay"].astype(float)  # 4.0 must still match lag 4
    res = robustness.retention(df, "ppo", 4, method_key="method", lag_key="lag_delay",
                               return_key="G", step_key="t")
    assert res.point == pytest.approx(ref.point, rel=1e-12)
    assert res.ci == pytest.approx(ref.ci, rel=1e-12)


def test_format():
    res = robustness.RobustnessResult(
        kind="retention", methods=("a",), lag=4, point=-0.0771, ci=(-0.1044, -0.0506),
        per_env={"x": (0.25, -0.0001, 0.5, 3)}, scale={"x": "return"})
    assert res.format() == "\u22120.077 [\u22120.104, \u22120.051]"
    assert res.format("x", digits=2) == "0.25 [0.00, 0.50]"


def test_errors_name_what_is_there(rng):
    truth = _true_returns(rng)
    table = _table(truth, rng)
    with pytest.raises(ValueError, match=r"method 'sac' not in column 'algo'.*ppo"):
        robustness.retention(table, "sac", 4)
    with pytest.raises(ValueError, match=r"K=16.*not run for method 'vaco'.*\[0, 4\]"):
        robustness.retention(table, "vaco", 16)
    no_zero = [r for r in table if r["K"] != 0]
    with pytest.raises(ValueError, match=r"no K=0 runs"):
        robustness.retention(no_zero, "vaco", 4)
    with pytest.raises(ValueError, match=r"lacks columns \['lag_delay'\]; it has \[.*'K'"):
        robustness.retention(table, "vaco", 4, lag_key="lag_delay")
    split = [r for r in table if not (r["K"] == 4 and r["seed"] < 3)
             and not (r["K"] == 0 and r["seed"] >= 3)]
    with pytest.raises(ValueError, match=r"nothing can be paired"):
        robustness.retention(split, "vaco", 4)
    dup = next(r for r in table if r["step"] == STEPS[-1])
    twice = [*table, dict(dup, **{"return": 0.0})]  # two runs with the same keys
    with pytest.raises(ValueError, match=r"several runs share"):
        robustness.retention(twice, dup["algo"], 4)

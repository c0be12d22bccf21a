"""The robustness claims of the fair study and the ablation (issue 31): retention, difference
in differences and the matched-TV table, checked on random data against direct NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import ablation, fair_study
from experiments.claims import blocks
from experiments.claims.rules import parse_ci
from jaxvaco.lab.stats import normalize_score

ENVS = ("CartPole-v1", "Acrobot-v1")
VARIANTS = ("vaco", "ppo", "ppo_kl (learner critic)")
SEEDS = 5


def synthetic_final(seed: int, envs=ENVS, variants=VARIANTS) -> list[dict]:
    """A fair-study final table: envs × variants × the study's K × seeds, random returns."""
    rng = np.random.default_rng(seed)
    scale = {"CartPole-v1": (10.0, 500.0), "Acrobot-v1": (-500.0, -60.0),
             "Asterix-MinAtar": (0.5, 30.0), "hopper": (100.0, 3000.0)}
    return [{"env": env, "variant": variant, "K": k, "seed": 100 + s, "step": 1000,
             "greedy": float(rng.uniform(*scale[env])),
             "training": float(rng.uniform(*scale[env]))}
            for env in envs for variant in variants for k in fair_study.LAGS
            for s in range(SEEDS)]


def scores(final, env, variant, k, kind, key="variant") -> np.ndarray:
    """Normalised scores of one cell, in seed order."""
    runs = sorted((r for r in final if (r["env"], r[key], r["K"]) == (env, variant, k)),
                  key=lambda r: r["seed"])
    return normalize_score(env, np.array([r[kind] for r in runs]))


def direct_retention(final, variant, k, kind, envs, key="variant") -> dict:
    """{env: mean over seeds of score(K) − score(0)}, and 'pooled': their mean."""
    per_env = {env: float(np.mean(scores(final, env, variant, k, kind, key)
                                  - scores(final, env, variant, 0, kind, key)))
               for env in envs}
    return {**per_env, "pooled": float(np.mean(list(per_env.values())))}


@pytest.mark.parametrize("seed", range(2))
def test_fair_study_retention_and_did_match_numpy(seed):
    final = synthetic_final(seed)
    results = fair_study.robustness_results(final, ENVS, variants=VARIANTS, lags=(4, 16))
    pairs = {(v, b) for v, b, _, _ in results}
    # each pair once: PPO-clip(L) − PPO-KL(L), not the mirror
    assert pairs == {(v, None) for v in VARIANTS} | {
        ("vaco", "ppo"), ("vaco", "ppo_kl (learner critic)"), ("ppo", "ppo_kl (learner critic)")}
    for kind in fair_study.KINDS:
        for k in (4, 16):
            kept = {v: direct_retention(final, v, k, kind, ENVS) for v in VARIANTS}
            for v in VARIANTS:
                result = results[v, None, kind, k]
                assert result.point == pytest.approx(kept[v]["pooled"])
                assert result.ci[0] <= result.point <= result.ci[1]
                for env in ENVS:
                    assert result.per_env[env][0] == pytest.approx(kept[v][env])
                    assert result.per_env[env][3] == SEEDS
            for v, b in pairs - {(v, None) for v in VARIANTS}:
                did = results[v, b, kind, k]
                assert did.point == pytest.approx(kept[v]["pooled"] - kept[b]["pooled"])
                for env in ENVS:
                    assert did.per_env[env][0] == pytest.approx(kept[v][env] - kept[b][env])


def test_fair_study_tables_hold_the_results_and_untrimmed_levels():
    final = synthetic_final(0)
    results = fair_study.robustness_results(final, ENVS, variants=VARIANTS)
    rows = fair_study.retention_rows(final, ENVS, results, variants=VARIANTS)
    header = rows[0]
    assert header == ["variant", "return", "mean K=0", "IQM K=0", "mean K=16", "IQM K=16",
                      "retention K=2", "retention K=4", "retention K=8", "retention K=16"]
    assert [r[:2] for r in rows[1:]] == [[fair_study.SHORT[v], kind] for v in VARIANTS
                                         for kind in fair_study.KINDS]
    for row in rows[1:]:
        variant = next(v for v in VARIANTS if fair_study.SHORT[v] == row[0])
        kind = row[1]
        for k in (0, 16):  # the level: mean over envs of the per-env seed means
            point, lo, hi = parse_ci(row[header.index(f"mean K={k}")].replace("−", "-"))
            expected = np.mean([scores(final, env, variant, k, kind).mean() for env in ENVS])
            assert point == pytest.approx(expected, abs=5e-4)
            assert lo <= point <= hi
        for k in (2, 4, 8, 16):
            assert row[header.index(f"retention K={k}")] == \
                results[variant, None, kind, k].format(digits=3)
    did = fair_study.did_rows(results, variants=VARIANTS)
    assert [r[0] for r in did[1::2]] == ["VACO − PPO-clip(L)", "VACO − PPO-KL(L)",
                                         "PPO-clip(L) − PPO-KL(L)"]
    assert did[1][2:] == [results["vaco", "ppo", "training", k].format(digits=3)
                          for k in (2, 4, 8, 16)]
    per_env = fair_study.robustness_env_rows(results, ENVS, variants=VARIANTS)
    assert per_env[0] == ["statistic", "return", *ENVS]
    assert per_env[1] == ["retention VACO", "training",
                          *(results["vaco", None, "training", 16].format(env, 3)
                            for env in ENVS)]


def test_robustness_tables_pool_held_out_domains_and_feed_the_headline():
    """Pools that have results only; the README's headline reads its cells back."""
    final = synthetic_final(1, envs=("Asterix-MinAtar", "hopper"))
    tables = fair_study.robustness_tables(final)
    assert list(tables) == [
        "Retention: Held-out (Asterix-MinAtar, hopper)", "DiD: Held-out (Asterix-MinAtar, hopper)",
        "Retention: Held-out MinAtar (Asterix-MinAtar)", "DiD: Held-out MinAtar (Asterix-MinAtar)",
        "Retention: Held-out Brax (hopper)", "DiD: Held-out Brax (hopper)",
        "Per environment, K = 16: Held-out"]
    record = {"fair-study-robustness": {"value": tables}}
    headline = blocks.robustness_headline(record)
    retention = tables["Retention: Held-out (Asterix-MinAtar, hopper)"]
    vaco = next(r for r in retention if r[:2] == ["VACO", "greedy"])
    assert f"retention VACO {vaco[-1]}" in headline.split("greedy return")[1]
    did = tables["DiD: Held-out (Asterix-MinAtar, hopper)"]
    assert f"VACO − PPO-KL(L) **{did[4][-1]}**" in headline  # the training row of that pair


def synthetic_ablation(seed: int) -> tuple[list[dict], list[dict]]:
    """ablation.csv's rows as `read_results` gives them (several logged iterations per run,
    tv/total) and their final table, for the baseline cell, another learner-critic cell
    and a behaviour one."""
    rng = np.random.default_rng(seed)
    cells = ["TV batch β | learner | gae | δ=0.05", ablation.BASELINE_CELL,
             "clip β | behaviour | gae"]
    rows, final = [], []
    for env, (lo, hi) in (("Acrobot-v1", (-500.0, -60.0)), ("CartPole-v1", (10.0, 500.0))):
        for cell in cells:
            for k in ablation.LAGS:
                for s in range(4):
                    for step in (1, 2, 3):
                        rows.append({"env": env, "variant": cell, "K": k, "seed": s,
                                     "step": step,
                                     "tv/total": rng.uniform(0, 0.1) if step != 2 else None})
                    final.append({"env": env, "cell": cell, "K": k, "seed": s,
                                  "greedy": float(rng.uniform(lo, hi)),
                                  "training": float(rng.uniform(lo, hi))})
    return rows, final


def test_ablation_retention_and_did_against_the_baseline_cell_match_numpy():
    _, final = synthetic_ablation(0)
    assert ablation.learner_cells(final) == [ablation.BASELINE_CELL,
                                             "TV batch β | learner | gae | δ=0.05"]
    results = ablation.robustness_results(final)
    cell, envs = "TV batch β | learner | gae | δ=0.05", ("Acrobot-v1", "CartPole-v1")
    assert (ablation.BASELINE_CELL, ablation.BASELINE_CELL, "training", 16) not in results
    for kind in ablation.KINDS:
        for k in (4, 16):
            mine = direct_retention(final, cell, k, kind, envs, key="cell")
            base = direct_retention(final, ablation.BASELINE_CELL, k, kind, envs, key="cell")
            assert results[cell, None, kind, k].point == pytest.approx(mine["pooled"])
            did = results[cell, ablation.BASELINE_CELL, kind, k]
            assert did.point == pytest.approx(mine["pooled"] - base["pooled"])
            assert did.per_env["CartPole-v1"][0] == pytest.approx(
                mine["CartPole-v1"] - base["CartPole-v1"])
    rows = ablation.robustness_rows(results)
    assert rows[0] == ["cell", "return", "retention K=4", "retention K=16", "DiD K=4",
                       "DiD K=16"]
    assert rows[1][4:] == ["—", "—"]  # the baseline against itself
    assert rows[3] == [cell, "training",
                       *(results[cell, None, "training", k].format(digits=3) for k in (4, 16)),
                       *(results[cell, ablation.BASELINE_CELL, "training", k].format(digits=3)
                         for k in (4, 16))]
    per_env = ablation.robustness_env_rows(results)
    assert per_env[0][2:] == ["retention Acrobot-v1", "retention CartPole-v1",
                              "DiD Acrobot-v1", "DiD CartPole-v1"]


def test_realised_tv_and_the_matched_tv_table():
    rows, final = synthetic_ablation(1)
    tv = ablation.realised_tv(rows)
    key = ("CartPole-v1", ablation.BASELINE_CELL, 16, 2)
    logged = [r["tv/total"] for r in rows if (r["env"], r["variant"], r["K"], r["seed"]) == key
              and r["tv/total"] is not None]
    assert len(logged) == 2 and tv[key] == pytest.approx(np.mean(logged))
    tables = ablation.matched_tv_tables(final, tv)
    assert list(tables) == ["Acrobot-v1", "CartPole-v1"]
    header, *body = tables["CartPole-v1"]
    assert header == ["objective", "knob", "TV K=0", "training K=0", "greedy K=0", "TV K=16",
                      "training K=16", "greedy K=16"]
    assert [r[:2] for r in body] == [["clip", "ε = 0.2"], ["filter", "δ = 0.05"]]
    tv_mean = np.mean([tv["CartPole-v1", ablation.BASELINE_CELL, 16, s] for s in range(4)])
    assert parse_ci(body[0][5])[0] == pytest.approx(tv_mean, abs=5e-4)
    training = np.mean([r["training"] for r in final if (r["env"], r["cell"], r["K"]) ==
                        ("CartPole-v1", ablation.BASELINE_CELL, 16)])
    assert parse_ci(body[0][6])[0] == pytest.approx(training, abs=0.5)

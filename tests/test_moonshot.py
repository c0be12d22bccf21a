"""The search for an update that keeps more under lag (experiments/moonshot.py): its sweep
is the declared one, and its statistics pair by env and seed as declared."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import moonshot
from experiments.tune import sample_configs
from jaxvaco.lab import stats
from jaxvaco.lab.sweep import cell_setup, cells

ENVS = ("Asterix-MinAtar", "hopper")


def test_the_sweep_runs_the_chosen_candidate_on_the_held_out_pool(tmp_path):
    chosen = sample_configs("vaco_kl", 24)[5]
    spec = moonshot.moonshot_sweep(chosen, tmp_path)
    assert spec.envs == moonshot.HELD_OUT_ENVS and spec.lag_delays == (0, 16)
    assert spec.name == "moonshot"  # its run folders: out/runs/moonshot/runs/<cell>
    for cell in cells(spec):
        config, _ = cell_setup(spec, cell, tmp_path)
        assert (config.algo, config.vaco.kl_penalty, config.vaco.critic) == (
            "vaco", True, "learner")
        assert (config.vaco.delta, config.vaco.target_kl, config.learning_rate,
                config.ent_coef, config.update_epochs, config.num_minibatches) == (
            chosen["delta"], chosen["target_kl"], chosen["learning_rate"],
            chosen["ent_coef"], chosen["update_epochs"], chosen["num_minibatches"])
        assert (config.num_seeds, config.seed, config.lag.mode) == (16, 100, "uniform")
        assert config.normalize_obs == (cell.env in moonshot.HELD_OUT_ENVS[3:])


def synthetic_final(rng, shift: dict[tuple[str, int], float], seeds=range(100, 108)):
    """Final rows of the three variants on ENVS at K = 0 and 16: a per-(env, seed) base
    return, plus `shift[variant, K]`, plus noise; rows in shuffled order."""
    rows = []
    for env in ENVS:
        base = {seed: rng.uniform(0, 50) for seed in seeds}
        for variant in moonshot.VARIANTS:
            for k in moonshot.LAGS:
                for seed in seeds:
                    value = base[seed] + shift.get((variant, k), 0.0) + rng.normal(0, 1)
                    rows.append({"env": env, "variant": variant, "K": k, "seed": seed,
                                 "step": 1, "greedy": value, "training": value})
    return [rows[i] for i in rng.permutation(len(rows))]


def test_the_level_gap_is_the_mean_over_envs_of_paired_seed_differences():
    """`entropy_swap.level_gap`, which the verdict uses, on rows in shuffled order."""
    rng = np.random.default_rng(0)
    final = synthetic_final(rng, {})
    point, low, high = moonshot.level_gap(final, ENVS, "vaco_kl", "ppo", 0, "training")
    want = []
    for env in ENVS:
        value = {(r["variant"], r["seed"]): r["training"] for r in final
                 if r["env"] == env and r["K"] == 0}
        seeds = sorted(s for v, s in value if v == "ppo")
        want.append(np.mean([stats.normalize_score(env, value["vaco_kl", s]) -
                             stats.normalize_score(env, value["ppo", s]) for s in seeds]))
    assert point == pytest.approx(np.mean(want))
    assert low < point < high


@pytest.mark.parametrize("keeps_more", [True, False])
def test_the_verdict_follows_the_declared_criterion(keeps_more):
    """A candidate that loses nothing under lag while PPO-KL(L) loses a lot keeps more; one
    that loses a lot does not. A candidate far below PPO-clip(L) at K = 0 is not matched."""
    rng = np.random.default_rng(1)
    shift = ({("ppo_kl (learner critic)", 16): -200.0} if keeps_more else
             {("vaco_kl", 16): -200.0})
    shift[("vaco_kl", 0)] = 0.0 if keeps_more else -300.0
    shift[("vaco_kl", 16)] = shift.get(("vaco_kl", 16), 0.0) + shift[("vaco_kl", 0)]
    found, verdict = moonshot.tables(synthetic_final(rng, shift))
    assert verdict["keeps_more"] is keeps_more
    assert verdict["level_matched"] is keeps_more
    assert any(title.startswith("DiD") for title in found)
    assert "VACO+KL − PPO-KL(L)" in str(found)


def test_an_unfinished_env_is_left_out():
    rng = np.random.default_rng(2)
    final = [r for r in synthetic_final(rng, {})
             if not (r["env"] == "hopper" and r["variant"] == "vaco_kl" and r["K"] == 16)]
    assert moonshot.complete_envs(final) == ["Asterix-MinAtar"]
    assert "Not complete yet (left out):" in moonshot.summary(final)

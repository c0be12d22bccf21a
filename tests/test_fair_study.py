"""The fair study's own pieces: the variants it runs and its probability of improvement."""

import numpy as np
import pytest
from rliable import metrics

from experiments.fair_study import tuned_variants
from jaxvaco.core.config import TrainConfig
from jaxvaco.lab.stats import probability_of_improvement


@pytest.mark.parametrize("seed", range(3))
def test_probability_of_improvement_matches_rliable(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 5, size=(7, 3)).astype(float)  # small integers: ties happen
    y = rng.integers(0, 5, size=(5, 3)).astype(float)
    assert probability_of_improvement(x, y) == pytest.approx(
        metrics.probability_of_improvement(x, y))


def test_tuned_variants_give_ppo_both_critics_and_map_knobs_to_config_fields():
    chosen = {"ppo": {"config": 3, "update_epochs": 2, "num_minibatches": 8,
                      "learning_rate": 1e-3, "ent_coef": 0.01, "clip_coef": 0.15},
              "ppo_kl": {"config": 1, "update_epochs": 4, "num_minibatches": 4,
                         "learning_rate": 2e-4, "ent_coef": 0.003, "target_kl": 0.02},
              "vaco": {"config": 0, "update_epochs": 8, "num_minibatches": 2,
                       "learning_rate": 5e-4, "ent_coef": 0.02, "delta": 0.3}}
    variants = tuned_variants(chosen)
    assert set(variants) == {"ppo", "ppo (behaviour critic)", "ppo_kl",
                             "ppo_kl (learner critic)", "vaco"}
    assert variants["ppo"]["ppo.critic"] == "learner"
    assert variants["ppo (behaviour critic)"]["ppo.critic"] == "behaviour"
    assert "ppo_kl.critic" not in variants["ppo_kl"]  # tuned with its default critic
    assert variants["ppo_kl (learner critic)"] == {**variants["ppo_kl"],
                                                   "ppo_kl.critic": "learner"}
    assert variants["ppo_kl"]["ppo_kl.target_kl"] == 0.02
    assert variants["vaco"]["vaco.delta"] == 0.3
    assert "config" not in variants["vaco"]  # the search's index is not a setting
    # every override names a real TrainConfig field (group.field for nested ones)
    config = TrainConfig()
    for overrides in variants.values():
        for path in overrides:
            group, _, field = path.rpartition(".")
            assert hasattr(getattr(config, group) if group else config, field), path


def test_tuning_ranks_survivors_on_every_env_and_halving_keeps_the_best(tmp_path):
    """Successive halving (experiments/tune.py): the `keep` best by the ranking on the
    halving envs go on; the final ranking counts only configurations run on every env."""
    from experiments import tune
    from jaxvaco.lab.results import write_results

    def row(env, config, value):
        return {"env": env, "algo": "ppo", "K": 0, "seed": 0, "step": 100,
                "variant": f"ppo #{config}", "eval/greedy_return": value}

    csv_path = tmp_path / "tuning.csv"
    greedy = {0: 100.0, 1: 500.0, 2: 300.0}  # CartPole-v1 returns of configs 0..2
    write_results(csv_path, [row(env, c, v if env == "CartPole-v1" else -100.0 - c)
                             for c, v in greedy.items() for env in tune.HALVING_ENVS])
    configs = [{"config": c} for c in greedy]
    assert [c["config"] for c in tune.survivors("ppo", configs, csv_path, 2)] == [1, 2]
    write_results(csv_path, [row("Breakout-MinAtar", 2, 50.0)], append=True)  # only config 2
    assert [index for _, index in tune.ranking(csv_path)["ppo"]] == [2]
    with pytest.raises(SystemExit, match="tune those envs first"):
        tune.survivors("ppo", configs + [{"config": 3}], csv_path, 2)


def synthetic_final(seed: int) -> list[dict]:
    """A final table of two envs × two variants × the study's K × 5 seeds, random returns."""
    from experiments.fair_study import LAGS

    rng = np.random.default_rng(seed)
    scale = {"CartPole-v1": (10.0, 500.0), "Acrobot-v1": (-500.0, -60.0)}
    return [{"env": env, "variant": variant, "K": k, "seed": s, "step": 1000,
             "greedy": float(rng.uniform(lo, hi)), "training": float(rng.uniform(lo, hi))}
            for env, (lo, hi) in scale.items() for variant in ("ppo", "vaco")
            for k in LAGS for s in range(5)]


@pytest.mark.parametrize("seed", range(2))
def test_aggregate_rows_match_rliable(seed):
    """IQM point estimates and P(VACO > ppo) of the summary equal rliable's on the same
    [seeds, envs] matrices of normalised scores."""
    from experiments.fair_study import LAGS, aggregate_rows
    from jaxvaco.lab.stats import normalize_score

    final = synthetic_final(seed)
    envs = ["CartPole-v1", "Acrobot-v1"]
    rows = {(r[0], r[1]): r[2:] for r in aggregate_rows(final, envs)[1:]}

    def matrix(variant, k, kind):
        return np.array([[normalize_score(env, r[kind]) for r in final
                          if (r["env"], r["variant"], r["K"]) == (env, variant, k)]
                         for env in envs]).T

    for i, k in enumerate(LAGS):
        for kind in ("greedy", "training"):
            for variant in ("ppo", "vaco"):
                point = float(rows[(variant, kind)][i].split(" [")[0])
                assert point == pytest.approx(
                    metrics.aggregate_iqm(matrix(variant, k, kind)), abs=0.006)
            expected = metrics.probability_of_improvement(matrix("vaco", k, kind),
                                                          matrix("ppo", k, kind))
            assert float(rows[("P(VACO > ppo)", kind)][i]) == pytest.approx(expected,
                                                                             abs=0.006)


def test_env_means_rows_are_seed_means_of_both_returns():
    from experiments.fair_study import LAGS, env_means_rows

    final = synthetic_final(0)
    rows = {r[0]: r[1:] for r in env_means_rows(final, "CartPole-v1")[1:]}
    for i, k in enumerate(LAGS):
        for variant in ("ppo", "vaco"):
            runs = [r for r in final if (r["env"], r["variant"], r["K"]) ==
                    ("CartPole-v1", variant, k)]
            greedy, training = (float(x) for x in rows[variant][i].split(" / "))
            assert greedy == pytest.approx(np.mean([r["greedy"] for r in runs]), abs=0.5)
            assert training == pytest.approx(np.mean([r["training"] for r in runs]), abs=0.5)


def test_aggregate_of_a_partial_study_marks_missing_cells():
    """A variant that has run on only some of the envs gets '—', not an IQM over fewer envs."""
    from experiments.fair_study import aggregate_rows

    final = [r for r in synthetic_final(0)
             if not (r["variant"] == "vaco" and r["env"] == "Acrobot-v1")]
    rows = {(r[0], r[1]): r[2:] for r in aggregate_rows(final, ["CartPole-v1",
                                                                "Acrobot-v1"])[1:]}
    assert set(rows[("vaco", "greedy")]) == {"—"}
    assert set(rows[("P(VACO > ppo)", "training")]) == {"—"}
    assert "—" not in rows[("ppo", "greedy")]


def test_aggregate_tables_report_held_out_apart_and_all_once_both_exist():
    """Development and held-out environments are pooled apart; 'All' pools both, and only
    appears when both have results."""
    from experiments.fair_study import aggregate_rows, aggregate_tables

    dev = synthetic_final(0)
    held_out = [{**r, "env": "Asterix-MinAtar", "greedy": r["greedy"] / 20,
                 "training": r["training"] / 20} for r in dev if r["env"] == "CartPole-v1"]
    assert list(aggregate_tables(dev)) == ["Development environments (CartPole-v1, Acrobot-v1)"]
    tables = aggregate_tables(dev + held_out)
    assert list(tables) == ["Development environments (CartPole-v1, Acrobot-v1)",
                            "Held-out environments (Asterix-MinAtar)",
                            "All environments (CartPole-v1, Acrobot-v1, Asterix-MinAtar)"]
    assert tables["Held-out environments (Asterix-MinAtar)"] == aggregate_rows(
        held_out, ["Asterix-MinAtar"])
    assert tables["All environments (CartPole-v1, Acrobot-v1, Asterix-MinAtar)"] == \
        aggregate_rows(dev + held_out, ["CartPole-v1", "Acrobot-v1", "Asterix-MinAtar"])
    # with both held-out domains present, each is pooled on its own as well
    brax = [{**r, "env": "reacher"} for r in held_out]
    assert list(aggregate_tables(dev + held_out + brax)) == [
        "Development environments (CartPole-v1, Acrobot-v1)",
        "Held-out environments (Asterix-MinAtar, reacher)",
        "Held-out MinAtar (Asterix-MinAtar)", "Held-out Brax (reacher)",
        "All environments (CartPole-v1, Acrobot-v1, Asterix-MinAtar, reacher)"]


def test_final_table_takes_each_runs_last_evaluation_and_refuses_runs_without_an_episode():
    from experiments.fair_study import final_table

    def row(step, greedy, training, seed=100):
        return {"env": "reacher", "algo": "ppo", "variant": "ppo", "K": 0, "seed": seed,
                "step": step, "eval/greedy_return": greedy, "return": training}

    rows = [row(2048, None, -300.0), row(4096, -120.0, -150.0), row(6144, None, -140.0)]
    assert final_table(rows) == [{"env": "reacher", "variant": "ppo", "K": 0, "seed": 100,
                                  "step": 4096, "greedy": -120.0, "training": -150.0}]
    with pytest.raises(SystemExit, match="no training episode.*--steps"):
        final_table(rows + [row(4096, -130.0, None, seed=101)])


def test_movement_rows_average_each_cells_logged_tv_at_the_chosen_lag_only():
    from experiments.fair_study import movement_rows

    rng = np.random.default_rng(0)
    rows, expected = [], {}
    for env in ("Acrobot-v1", "CartPole-v1"):
        for variant in ("ppo", "vaco"):
            forward, backward = rng.uniform(0, 0.2, size=(2, 3, 4))  # [seeds, iterations]
            for k in (0, 16):
                for seed in range(3):
                    for i in range(4):
                        scale = 1.0 if k == 16 else 10.0  # K = 0 rows must not count
                        rows.append({"env": env, "variant": variant, "K": k,
                                     "tv/forward": scale * forward[seed, i],
                                     "tv/backward": scale * backward[seed, i]})
            rows.append({"env": env, "variant": variant, "K": 16, "tv/forward": None,
                         "tv/backward": None})  # an unlogged row is skipped
            expected[env, variant] = f"{forward.mean():.2f} / {backward.mean():.2f}"
    table_rows = movement_rows(rows, k=16)
    assert table_rows[0] == ["variant", "CartPole-v1", "Acrobot-v1"]  # the declared order
    for variant, *cells in table_rows[1:]:
        assert cells == [expected["CartPole-v1", variant], expected["Acrobot-v1", variant]]
    assert [r[0] for r in table_rows[1:]] == ["ppo", "vaco"]

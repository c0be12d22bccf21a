"""Tidy results tables (`jaxvaco.results`): rows of a run, the experiments' CSVs, read-back."""

from __future__ import annotations

import numpy as np

from jaxvaco.results import (
    FIELDS,
    LEGACY_FRACTION,
    append_rows,
    done_keys,
    fraction_columns,
    last_evaluated,
    read_rows,
    read_table,
    tidy_row,
    variant_rows,
    write_table,
)

ROW = {"run": 0, "seed": 1, "env_steps": 2048, "episode/return": 12.5, "lag_delay": 4,
       "iteration": 3, "lag/iterations": 1.0, "lag/sgd_steps": 16.0, "tv/backward": 0.1,
       "tv/forward": 0.2, "tv/total": 0.3, "ppo/clipped_fraction": 0.9}
EVALUATED = {**ROW, "env_steps": 4096, "eval/greedy_return": 500.0,
             "eval/stochastic_return": 480.0}


def test_variant_rows_append_and_resume(tmp_path):
    rows = variant_rows([ROW, EVALUATED], "CartPole-v1", "ppo", "my variant")
    assert [list(r) for r in rows] == [FIELDS, FIELDS]
    assert rows[0]["K"] == 4 and rows[0]["eval_greedy"] is None
    assert rows[1]["eval_greedy"] == 500.0 and rows[1]["eval_stochastic"] == 480.0
    path = tmp_path / "tidy.csv"
    append_rows(path, rows[:1])
    append_rows(path, rows[1:])  # the header is written once
    back = read_rows(path)
    assert [r["step"] for r in back] == ["2048", "4096"]
    assert done_keys(path, ("env", "variant")) == {("CartPole-v1", "my variant")}
    assert read_rows(tmp_path / "missing.csv") == []
    last = last_evaluated(back, "variant")
    assert list(last) == [("CartPole-v1", "my variant", 4, 1)]
    assert last[("CartPole-v1", "my variant", 4, 1)]["eval_greedy"] == "500.0"


def test_per_algorithm_fractions_and_the_legacy_column(tmp_path):
    rows = variant_rows([ROW], "CartPole-v1", "ppo", "v")
    assert rows[0]["ppo/clipped_fraction"] == 0.9 and rows[0]["vaco/filtered_fraction"] is None
    assert fraction_columns(rows[0]) == {"ppo/clipped_fraction": 0.9,
                                         "spo/outside_fraction": None,
                                         "vaco/filtered_fraction": None}
    # A CSV written before the rename: one filter/fraction column for every algorithm.
    old_fields = [f for f in FIELDS if not f.endswith("_fraction")] + [LEGACY_FRACTION]
    path = tmp_path / "old.csv"
    path.write_text(",".join(old_fields) + "\n")
    append_rows(path, rows)
    no_fraction = {k: v for k, v in ROW.items() if k != "ppo/clipped_fraction"}
    append_rows(path, variant_rows([no_fraction], "CartPole-v1", "ppo_kl", "kl"))
    assert path.read_text().splitlines()[0] == ",".join(old_fields)  # header kept
    back = read_rows(path)
    assert [r[LEGACY_FRACTION] for r in back] == ["0.9", "0.0"]
    assert fraction_columns(back[0])["ppo/clipped_fraction"] == "0.9"
    assert fraction_columns({"algo": "vaco delta=0.1", LEGACY_FRACTION: "0.2"}) == {
        "ppo/clipped_fraction": None, "spo/outside_fraction": None,
        "vaco/filtered_fraction": "0.2"}
    assert not any(fraction_columns({"algo": "impala", LEGACY_FRACTION: "0.0"}).values())


def test_write_table_key_columns_first_and_read_back(tmp_path):
    rows = [tidy_row(ROW, "CartPole-v1", "ppo", 0), tidy_row(EVALUATED, "CartPole-v1", "ppo", 0)]
    path = write_table(tmp_path / "results.csv", rows)
    header = path.read_text().splitlines()[0].split(",")
    assert header[:6] == ["env", "algo", "K", "seed", "step", "return"]
    assert header[6:] == sorted(header[6:]) and "run" not in header
    table = read_table(path)
    assert table["K"].tolist() == [4, 4] and table["step"].dtype.kind == "i"
    assert np.isnan(table["eval/greedy_return"][0]) and table["eval/greedy_return"][1] == 500.0


def test_a_run_result_labels_its_runs_and_a_run_folder_is_read_from_a_str(tmp_path):
    """`RunResult.table()`: one row per run, its labels from the grid and seeds, its final
    training return the last chunk's mean episode return in the metrics rows (computed here
    from `result.rows`), its greedy return the last evaluation."""
    from jaxvaco.config import EvalConfig, LagConfig, TrainConfig
    from jaxvaco.results import tidy_rows
    from jaxvaco.runner import run

    config = TrainConfig(num_envs=8, num_steps=16, total_timesteps=512, num_minibatches=2,
                         update_epochs=1, hidden_sizes=(8, 8), num_seeds=2, seed=5,
                         progress=False, results_dir=str(tmp_path), run_name="r",
                         lag=LagConfig(max_delay=2), eval=EvalConfig(num_episodes=2))
    grid = {"lag_delay": [0, 2], "learning_rate": [1e-3, 3e-3]}
    result = run(config, grid=grid)
    table = result.table()
    expected_labels = [(k, lr, seed) for k in (0, 2) for lr in (1e-3, 3e-3) for seed in (5, 6)]
    assert [(row["K"], row["learning_rate"], row["seed"]) for row in table] == expected_labels
    for r, row in enumerate(table):
        mine = [x for x in result.rows if x["run"] == r]
        with_episodes = [x["episode/return"] for x in mine if x["episode/return"] is not None]
        assert row["train_return"] == with_episodes[-1]
        assert row["eval/greedy_return"] == mine[-1]["eval/greedy_return"]
        assert row["env"] == "CartPole-v1" and row["algo"] == "ppo" and "lag_delay" not in row
    assert tidy_rows(str(tmp_path / "r")) == tidy_rows(tmp_path / "r")

"""The one results schema (`jaxvaco.lab.results`, docs/results_schema.md): rows of a run, the
writer and the reader, and the committed CSVs written before the schema."""

from __future__ import annotations

import numpy as np
import pytest

from jaxvaco.core.config import ConfigError
from jaxvaco.lab.results import (
    LEGACY_FRACTION,
    done_keys,
    fraction_columns,
    last_evaluated,
    load_results,
    read_results,
    result_rows,
    write_results,
)

ROW = {"run": 0, "seed": 1, "env_steps": 2048, "episode/return": 12.5, "lag_delay": 4,
       "iteration": 3, "lag/iterations": 1.0, "lag/sgd_steps": 16.0, "tv/backward": 0.1,
       "tv/forward": 0.2, "tv/total": 0.3, "ppo/clipped_fraction": 0.9}
EVALUATED = {**ROW, "env_steps": 4096, "eval/greedy_return": 500.0,
             "eval/stochastic_return": 480.0}


def test_rows_of_a_run_result_are_written_and_read_back(tmp_path):
    rows = result_rows([ROW, EVALUATED], "CartPole-v1", "ppo", "my variant")
    path = write_results(tmp_path / "results.csv", rows)
    lines = path.read_text().splitlines()
    assert lines[0] == ("env,algo,variant,K,seed,step,return,eval/greedy_return,"
                        "eval/stochastic_return,iteration,lag/iterations,lag/sgd_steps,"
                        "ppo/clipped_fraction,tv/backward,tv/forward,tv/total")
    assert lines[1] == "CartPole-v1,ppo,my variant,4,1,2048,12.5,,,3,1.0,16.0,0.9,0.1,0.2,0.3"
    assert lines[2].startswith("CartPole-v1,ppo,my variant,4,1,4096,12.5,500.0,480.0,")
    back = read_results(path)
    assert back[0] == {"env": "CartPole-v1", "algo": "ppo", "variant": "my variant", "K": 4,
                       "seed": 1, "step": 2048, "return": 12.5, "eval/greedy_return": None,
                       "eval/stochastic_return": None, "iteration": 3,
                       "lag/iterations": 1.0, "lag/sgd_steps": 16.0,
                       "ppo/clipped_fraction": 0.9, "tv/backward": 0.1, "tv/forward": 0.2,
                       "tv/total": 0.3}
    assert back[1]["eval/greedy_return"] == 500.0
    assert write_results(tmp_path / "again.csv", back).read_text() == path.read_text()
    last = last_evaluated(back, "variant")
    assert list(last) == [("CartPole-v1", "my variant", 4, 1)]
    assert last[("CartPole-v1", "my variant", 4, 1)]["step"] == 4096
    table = load_results(path)
    assert table["K"].tolist() == [4, 4] and table["step"].dtype.kind == "i"
    assert np.isnan(table["eval/greedy_return"][0]) and table["eval/greedy_return"][1] == 500.0


def test_appending_adds_rows_and_columns_and_a_restart_skips_what_is_there(tmp_path):
    path = tmp_path / "experiment.csv"
    assert done_keys(path, ("env", "variant")) == set()
    write_results(path, result_rows([ROW], "CartPole-v1", "ppo", "a"), append=True)
    llm = {"env": "arithmetic", "algo": "grpo", "variant": "grpo β", "K": 8, "seed": 0,
           "step": 50, "accuracy": 0.75, "reward": 0.5}
    write_results(path, [llm], append=True)
    back = read_results(path)
    assert [(r["env"], r["step"]) for r in back] == [("CartPole-v1", 2048), ("arithmetic", 50)]
    assert back[0]["accuracy"] is None and back[1]["return"] is None
    assert back[1]["accuracy"] == 0.75
    assert done_keys(path, ("env", "variant")) == {("CartPole-v1", "a"), ("arithmetic", "grpo β")}
    before = path.read_text()  # rows with no new column are appended, earlier lines untouched
    write_results(path, result_rows([ROW], "CartPole-v1", "ppo", "b"), append=True)
    assert path.read_text().startswith(before) and len(read_results(path)) == 3
    without_return = write_results(tmp_path / "llm.csv", [llm])
    assert without_return.read_text().splitlines()[0] == (
        "env,algo,variant,K,seed,step,accuracy,reward")
    with pytest.raises(ValueError, match="lack seed"):
        write_results(tmp_path / "bad.csv", [{k: v for k, v in llm.items() if k != "seed"}])


def test_an_experiment_csv_written_before_the_schema_reads_under_its_names(tmp_path):
    """The committed experiments' CSVs: eval_greedy / eval_stochastic and one
    filter/fraction column for every algorithm (0 for those without one)."""
    path = tmp_path / "old.csv"
    path.write_text(
        "env,algo,variant,K,seed,step,return,eval_greedy,eval_stochastic,tv/total,"
        "filter/fraction\n"
        "CartPole-v1,ppo,clip,0,3,100,20.5,,,0.1,0.25\n"
        "CartPole-v1,ppo_kl,kl,16,3,200,30.0,400.0,390.0,0.2,0.0\n")
    first, second = read_results(path)
    assert first == {"env": "CartPole-v1", "algo": "ppo", "variant": "clip", "K": 0,
                     "seed": 3, "step": 100, "return": 20.5, "eval/greedy_return": None,
                     "eval/stochastic_return": None, "tv/total": 0.1,
                     "ppo/clipped_fraction": 0.25, "spo/outside_fraction": None,
                     "vaco/filtered_fraction": None}
    assert second["eval/greedy_return"] == 400.0
    assert second["ppo/clipped_fraction"] is None and second["vaco/filtered_fraction"] is None
    # appending rewrites the file once in the schema, the old rows kept
    write_results(path, result_rows([ROW], "CartPole-v1", "ppo", "new"), append=True)
    assert path.read_text().splitlines()[0].startswith(
        "env,algo,variant,K,seed,step,return,eval/greedy_return,")
    def measured(row: dict) -> dict:
        return {name: value for name, value in row.items() if value is not None}

    old, _, new = read_results(path)
    assert [measured(old)] == [measured(first)] and new["variant"] == "new"
    assert new["eval/greedy_return"] is None and old["tv/backward"] is None


def test_an_old_sweep_table_without_variant_and_files_that_are_not_results(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("env,algo,K,seed,step,return\nCartPole-v1,ppo,0,0,10,1.5\n")
    assert read_results(path)[0]["variant"] == "ppo"
    assert load_results(tmp_path)["variant"].tolist() == ["ppo"]
    final = tmp_path / "final.csv"
    final.write_text("env,cell,K,seed,greedy\nCartPole-v1,x,0,0,1\n")
    with pytest.raises(ConfigError, match="not a results table: it lacks the columns algo, "
                                          "step"):
        read_results(final)
    path.write_text("env,algo,K,seed,step,return\nCartPole-v1,ppo,0\n")
    with pytest.raises(ConfigError, match="line 2 does not have the header's 6 fields"):
        read_results(path)
    path.write_text("env,algo,variant,K,seed,step\n")
    with pytest.raises(ConfigError, match="has no rows yet"):
        load_results(tmp_path)


def test_per_algorithm_fractions_from_the_legacy_column():
    assert fraction_columns({"algo": "vaco delta=0.1", LEGACY_FRACTION: "0.2"}) == {
        "ppo/clipped_fraction": None, "spo/outside_fraction": None,
        "vaco/filtered_fraction": "0.2"}
    assert not any(fraction_columns({"algo": "impala", LEGACY_FRACTION: "0.0"}).values())
    assert fraction_columns({"algo": "spo", "spo/outside_fraction": 0.3}) == {
        "ppo/clipped_fraction": None, "spo/outside_fraction": 0.3,
        "vaco/filtered_fraction": None}


def test_a_run_result_labels_its_runs_and_a_run_folder_is_read_from_a_str(tmp_path):
    """`RunResult.table()`: one row per run, its labels from the grid and seeds, its final
    training return the last chunk's mean episode return in the metrics rows (computed here
    from `result.rows`), its greedy return the last evaluation."""
    from jaxvaco.core.config import EvalConfig, LagConfig, TrainConfig
    from jaxvaco.host.runner import run
    from jaxvaco.lab.results import tidy_rows

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

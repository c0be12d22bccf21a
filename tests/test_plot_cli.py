"""`jaxvaco plot`: figures from a sweep's results.csv or from one run's metrics.jsonl."""

from __future__ import annotations

import csv
import json

import numpy as np

from jaxvaco.cli import main
from jaxvaco.config import TrainConfig, to_dict

FIGURES = ("learning_curves", "return_vs_lag", "aggregate_intervals", "tv_vs_lag")


def synthetic_rows():
    """A small sweep's tidy rows: returns rise with steps and fall with the lag K."""
    rng = np.random.default_rng(0)
    for env, scale in (("CartPole-v1", 500.0), ("Acrobot-v1", 100.0)):
        for algo in ("ppo", "vaco"):
            for k in (0, 4, 16):
                for seed in range(3):
                    for step in range(1, 6):
                        value = scale * step / 5 / (1 + k / 8) + rng.normal(0, scale / 50)
                        tv = 0.01 * k + rng.uniform(0, 0.01)
                        yield {"env": env, "algo": algo, "K": k, "seed": seed,
                               "step": step * 1000, "return": value if step > 1 else "",
                               "tv/backward": tv, "tv/forward": tv / 2}


def assert_figures(directory):
    for stem in FIGURES:
        for suffix in (".png", ".pdf"):
            path = directory / f"{stem}{suffix}"
            assert path.is_file() and path.stat().st_size > 1000, path


def test_plot_sweep_table(tmp_path, capsys):
    rows = list(synthetic_rows())
    with open(tmp_path / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["plot", str(tmp_path)]) == 0
    assert_figures(tmp_path / "plots")
    assert len(capsys.readouterr().out.splitlines()) == 2 * len(FIGURES)


def test_plot_experiment_csv_with_variants(tmp_path, monkeypatch):
    """A committed experiment table given as a file: figures beside it, one line per variant
    (two variants of one algorithm stay apart)."""
    from jaxvaco.analysis import plots

    drawn = []
    original = plots.plot_learning_curves
    monkeypatch.setattr(plots, "plot_learning_curves", lambda table, *a, **kw: (
        drawn.append(set(table["algo"].tolist())), original(table, *a, **kw))[1])
    rows = [{**row, "variant": f"{row['algo']} ({'a' if row['seed'] % 2 else 'b'})"}
            for row in synthetic_rows()]
    path = tmp_path / "study.csv"
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["plot", str(path)]) == 0
    assert_figures(tmp_path / "plots")
    assert drawn == [{"ppo (a)", "ppo (b)", "vaco (a)", "vaco (b)"}]


def test_plot_single_run(tmp_path):
    """A run directory (no results.csv): its metrics.jsonl is the table."""
    config = TrainConfig(env="CartPole-v1", num_seeds=2)
    (tmp_path / "config.json").write_text(json.dumps(to_dict(config)))
    (tmp_path / "runs.json").write_text(json.dumps({"grid": {}, "runs": []}))
    with open(tmp_path / "metrics.jsonl", "w") as file:
        for chunk in range(1, 5):
            for seed in range(2):
                row = {"chunk": chunk, "iteration": chunk, "env_steps": 2048 * chunk,
                       "run": seed, "seed": seed, "tv/backward": 0.0, "tv/forward": 0.01,
                       "episode/return": 20.0 * chunk + seed if chunk > 1 else None}
                file.write(json.dumps(row) + "\n")
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "figs")]) == 0
    assert_figures(tmp_path / "figs")


def test_plot_of_a_folder_without_results(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    assert "neither results.csv" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "missing.csv")]) == 2


def test_plot_unknown_metric_is_reported(tmp_path, capsys):
    metric = "eval/greedy_return"
    rows = list(synthetic_rows())
    with open(tmp_path / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["plot", str(tmp_path), "--metric", metric]) == 2
    assert metric in capsys.readouterr().err

"""`jaxvaco plot`: figures from a sweep's results.csv or from one run's metrics.jsonl."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from jaxvaco.cli import main
from jaxvaco.core.config import TrainConfig, to_dict

FIGURES = ("learning_curves", "return_vs_lag", "retention_vs_lag", "aggregate_intervals",
           "tv_vs_lag")


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


def assert_figures(directory, stems=FIGURES):
    for stem in stems:
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
    out = capsys.readouterr().out.splitlines()
    assert out[-2 * len(FIGURES):] == [str(tmp_path / "plots" / f"{stem}{suffix}")
                                      for stem in FIGURES for suffix in (".png", ".pdf")]
    table = "\n".join(out[:-2 * len(FIGURES)])  # first, the results table
    for needle in ("K=0", "K=4", "K=16", "retention", "K=16 − K=0", "Acrobot-v1", "vaco"):
        assert needle in table, needle


def test_plot_experiment_csv_with_variants(tmp_path, monkeypatch):
    """A committed experiment table given as a file: figures beside it, one line per variant
    (two variants of one algorithm stay apart)."""
    from jaxvaco.lab import plots

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
    assert_figures(tmp_path / "figs", [s for s in FIGURES if s != "retention_vs_lag"])
    assert not (tmp_path / "figs" / "retention_vs_lag.png").exists()  # K = 0 only


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


def test_plot_prints_the_table_of_a_tidy_csv(tmp_path, capsys):
    """A tidy CSV of 2 envs (one without reference scores) × 2 variants × K in {0, 4}: the
    printed table has a row per (env, variant) with the mean final return of each K and
    the retention, and retention_vs_lag is drawn."""
    rows = []
    for env in ("CartPole-v1", "Toy-v0"):
        for variant in ("a", "b"):
            for k in (0, 4):
                for seed in range(3):
                    final = 100.0 + 10 * seed - k * (2 if variant == "a" else 1)
                    rows += [{"env": env, "algo": "ppo", "variant": variant, "K": k,
                              "seed": seed, "step": step, "return": value}
                             for step, value in ((1000, final / 2), (2000, final))]
    path = tmp_path / "sweep.csv"
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.warns(UserWarning, match="No reference scores for .'Toy-v0'"):
        assert main(["plot", str(path)]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "plots" / "retention_vs_lag.png").stat().st_size > 1000
    lines = {tuple(cell.strip() for cell in line.split("│")[1:3]): line
             for line in out.splitlines() if "│" in line}
    # variant a on Toy-v0 (raw returns): K=0 mean 110.0, K=4 mean 102.0, retention −8.0
    assert "110.0 [" in lines["Toy-v0", "a"] and "102.0 [" in lines["Toy-v0", "a"]
    assert "−8.0 [−8.0, −8.0]" in lines["Toy-v0", "a"]
    # on CartPole-v1 normalised (random 22.6, reference 500): b loses 4 / 477.4
    assert f"−{4 / (500 - 22.6):.3f} [" in lines["CartPole-v1", "b"]
    assert "raw return on Toy-v0" in " ".join(out.split())

"""Sweeps (`jaxvaco.sweep`): restart after a kill, the tidy table; hyperparameter vmap."""

from __future__ import annotations

import csv
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxvaco import runner
from jaxvaco.config import EvalConfig, TrainConfig, to_dict
from jaxvaco.results import read_table
from jaxvaco.run_dir import RunControl
from jaxvaco.sweep import SweepConfig, cells, load_sweep_file


@pytest.fixture(scope="module", autouse=True)
def _fast(fast_compile):
    yield


SWEEP_TOML = """
name = "lag"
envs = ["CartPole-v1"]
algos = ["ppo", "spo"]
lag_delays = [0, 2]

[base]
num_envs = 8
num_steps = 16
total_timesteps = 2560  # 20 iterations
update_epochs = 2
num_minibatches = 2
hidden_sizes = [16, 16]
chunk_iterations = 2
num_seeds = 2
progress = false
eval = { every_chunks = 0, num_episodes = 4 }
lag = { num_groups = 2 }
"""


def sweep(args: list[str], cache: Path) -> subprocess.Popen:
    env = dict(os.environ, JAX_DISABLE_MOST_OPTIMIZATIONS="1", JAX_PLATFORMS="cpu",
               JAX_COMPILATION_CACHE_DIR=str(cache),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    return subprocess.Popen([sys.executable, "-m", "jaxvaco.cli", "sweep", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sweep_file_and_cells(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP_TOML)
    spec = load_sweep_file(path)
    assert spec.algos == ("ppo", "spo") and spec.lag_delays == (0, 2)
    assert spec.base.hidden_sizes == (16, 16) and spec.base.eval.num_episodes == 4
    assert spec.base.lag.num_groups == 2 and spec.base.num_seeds == 2
    assert [c.name for c in cells(spec)] == ["CartPole-v1__ppo__K0-2", "CartPole-v1__spo__K0-2"]
    split = dataclasses.replace(spec, vmap_lag=False)
    assert [c.name for c in cells(split)][:2] == ["CartPole-v1__ppo__K0", "CartPole-v1__ppo__K2"]


def test_killed_sweep_restarts_without_redoing_finished_cells(tmp_path):
    (tmp_path / "sweep.toml").write_text(SWEEP_TOML)
    args = [str(tmp_path / "sweep.toml"), "--results-dir", str(tmp_path / "results"),
            "--checkpoint-every", "1"]
    cache = tmp_path / "jax-cache"
    directory = tmp_path / "results" / "lag"
    ppo, spo = (directory / "runs" / f"CartPole-v1__{a}__K0-2" for a in ("ppo", "spo"))
    first = sweep(args, cache)
    deadline = time.monotonic() + 240
    while not any((spo / "checkpoints").glob("[0-9]*")):  # spo is training: kill it
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    first.kill()
    first.wait()
    assert (ppo / "DONE").exists() and not (spo / "DONE").exists()
    done_time = (ppo / "DONE").stat().st_mtime_ns

    second = sweep(args, cache)
    out, err = second.communicate(timeout=240)
    assert second.returncode == 0, err
    assert "spo" in out and "ppo" not in out  # only the unfinished cell ran
    assert (ppo / "DONE").stat().st_mtime_ns == done_time and (spo / "DONE").exists()

    table = read_table(directory / "results.csv")
    with open(directory / "results.csv") as file:
        header = next(csv.reader(file))
    assert header[:6] == ["env", "algo", "K", "seed", "step", "return"]
    for column in ("eval/greedy_return", "tv/backward", "tv/forward", "tv/total",
                   "ppo/clipped_fraction", "spo/outside_fraction", "lag/iterations",
                   "iteration"):
        assert column in header
    runs = set(zip(table["algo"], table["K"], table["seed"], strict=True))
    assert runs == {(a, k, s) for a in ("ppo", "spo") for k in (0, 2) for s in (0, 1)}
    assert len(table["step"]) == 2 * 2 * 2 * 10  # algos × K × seeds × chunks
    lag0, warm = table["K"] == 0, table["iteration"] > 2  # delays are clamped at T early on
    assert np.all(table["lag/iterations"][lag0] == 0)
    assert np.all(table["lag/iterations"][~lag0 & warm] == 2)


def test_vmapped_hyperparameter_equals_the_run_alone(tmp_path):
    """A run of grid {"learning_rate": [1e-3, 3e-3]} equals the same config run alone with
    learning_rate 3e-3. Not bit-exact on CPU: vmapping 2 runs instead of 1 may change
    XLA's float reduction order, so params and metrics are compared with rtol 1e-5 and
    atol 1e-6; episode counts (sampled actions) are equal exactly."""
    config = TrainConfig(env="CartPole-v1", algo="ppo", num_envs=8, num_steps=16,
                         total_timesteps=8 * 16 * 4, update_epochs=2, num_minibatches=2,
                         hidden_sizes=(16, 16), progress=False, chunk_iterations=2,
                         eval=EvalConfig(every_chunks=0, num_episodes=4),
                         results_dir=str(tmp_path))
    control = RunControl(keep_checkpoints=0)
    swept = runner.run(dataclasses.replace(config, run_name="grid"),
                       grid={"learning_rate": [1e-3, 3e-3]}, control=control)
    alone = runner.run(dataclasses.replace(config, run_name="alone", learning_rate=3e-3),
                       control=control)
    assert [run["learning_rate"] for run in swept.runs] == [1e-3, 3e-3]
    for got, want in zip(jax.tree.leaves(swept.state.params),
                         jax.tree.leaves(alone.state.params), strict=True):
        np.testing.assert_allclose(np.asarray(got)[1], np.asarray(want)[0], rtol=1e-5, atol=1e-6)
    rows = [row for row in swept.rows if row["run"] == 1]
    assert len(rows) == len(alone.rows) == 2
    for got, want in zip(rows, alone.rows, strict=True):
        assert got["episode/count"] == want["episode/count"]
        for name in ("loss/policy", "loss/value", "grad_norm", "tv/forward", "learning_rate"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    assert swept.summary["eval/greedy_return"][1] == alone.summary["eval/greedy_return"][0]


def test_sweep_refuses_changed_finished_cell(tmp_path):
    """A finished cell run with other settings is not mixed into the table."""
    from jaxvaco.config import ConfigError
    from jaxvaco.run_dir import write_json
    from jaxvaco.sweep import cell_setup, config_changes, run_sweep

    spec = SweepConfig(name="s", results_dir=str(tmp_path), base=TrainConfig(num_envs=8))
    (cell,) = cells(spec)
    config, _ = cell_setup(spec, cell, tmp_path / "s")
    cell_dir = tmp_path / "s" / "runs" / cell.name
    cell_dir.mkdir(parents=True)
    write_json(cell_dir / "config.json", to_dict(dataclasses.replace(config, gamma=0.9)))
    (cell_dir / "metrics.jsonl").write_text("")
    (cell_dir / "DONE").write_text("{}")
    assert config_changes(dataclasses.replace(config, gamma=0.9), config)
    with pytest.raises(ConfigError, match="--gamma: 0.9 -> 0.99"):
        run_sweep(spec)


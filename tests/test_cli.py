"""The `jaxvaco` command line (`jaxvaco.cli.main`)."""

from __future__ import annotations

import json

import pytest

from jaxvaco.cli import main
from jaxvaco.core.config import TrainConfig, from_dict


@pytest.fixture(scope="module", autouse=True)
def _fast(fast_compile):
    yield


TRAIN_FLAGS = ["--env", "--algo", "--seed", "--num-seeds", "--num-envs", "--num-steps",
               "--total-timesteps", "--update-epochs", "--num-minibatches", "--learning-rate",
               "--gamma", "--gae-lambda", "--clip-coef", "--ent-coef", "--vf-coef",
               "--max-grad-norm", "--run-name", "--results-dir", "--lag.max-delay",
               "--lag.mode", "--lag.num-groups", "--vaco.delta"]

TINY = ["--num-envs", "8", "--num-steps", "16", "--total-timesteps", "256",
        "--num-minibatches", "2", "--update-epochs", "1", "--hidden-sizes", "8", "8",
        "--eval.num-episodes", "2", "--no-progress"]


def test_train_help_lists_every_option(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as info:
        main(["train", "--help"])
    assert info.value.code in (0, None)
    out = capsys.readouterr().out
    assert "jaxvaco train" in out
    missing = [flag for flag in TRAIN_FLAGS if flag not in out]
    assert not missing, missing


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"]])
def test_top_level_usage(capsys, argv):
    assert main(argv) == 0
    assert "jaxvaco train" in capsys.readouterr().out


def test_unknown_command(capsys):
    assert main(["trian"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'trian'" in err and "train" in err


def test_train_runs_and_writes_results(tmp_path, capsys):
    argv = ["train", *TINY, "--seed", "4", "--num-seeds", "2", "--results-dir", str(tmp_path),
            "--run-name", "x", "--lag.max-delay", "1", "--lag.num-groups", "2"]
    assert main(argv) == 0
    run_dir = tmp_path / "x"
    assert (run_dir / "config.json").is_file() and (run_dir / "metrics.jsonl").is_file()
    config = from_dict(json.loads((run_dir / "config.json").read_text()))
    assert isinstance(config, TrainConfig)
    assert (config.num_envs, config.num_steps, config.total_timesteps) == (8, 16, 256)
    assert (config.seed, config.num_seeds, config.hidden_sizes) == (4, 2, (8, 8))
    assert (config.lag.max_delay, config.lag.num_groups) == (1, 2)
    assert config.progress is False and config.run_name == "x"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 2  # 2 iterations (one per chunk) × 2 seeds
    assert sorted(r["seed"] for r in rows) == [4, 4, 5, 5]
    assert rows[-1]["iteration"] == 2 and rows[-1]["env_steps"] == 256


def test_invalid_config_returns_2_and_writes_nothing(tmp_path, capsys):
    results = tmp_path / "results"
    argv = ["train", *TINY, "--num-minibatches", "3", "--results-dir", str(results),
            "--run-name", "bad"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "invalid configuration" in err
    assert "--num-minibatches 3" in err and "--num-envs 8" in err
    assert not results.exists() or not any(results.rglob("*"))


def test_unknown_algo_on_command_line(tmp_path, capsys):
    argv = ["train", *TINY, "--algo", "vacoo", "--results-dir", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "vacoo" in err and "vaco" in err
    assert not (tmp_path / "r").exists()

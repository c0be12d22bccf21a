"""`jaxvaco.llm.run` through the shared host loop: resume is bit-identical, the non-finite
guard stops a run keeping its last good checkpoint, bad configurations are refused with a
message that names the option, and old or foreign folders are refused clearly."""

from __future__ import annotations

import json
import os
import signal

import jax
import numpy as np
import pytest

from jaxvaco.core.config import ConfigError, RunFileError, from_table
from jaxvaco.core.guard import NonFiniteError
from jaxvaco.host.run_dir import RunControl
from jaxvaco.lab.results import read_results, write_results
from jaxvaco.llm import runner, train
from jaxvaco.llm.config import GRPOConfig, LLMConfig, LLMEvalConfig, LLMLagConfig, TokenVacoConfig


def tiny(tmp_path, name: str = "run", **changes) -> LLMConfig:
    """Seconds on a CPU: a 1-layer d = 32 model, 20 SFT steps, 4 prompts × 4 completions,
    6 steps in 3 chunks, K ∈ {0, 1} × 2 seeds."""
    table = dict(algo="vaco", num_seeds=2, num_steps=6, num_prompts=4, group_size=4,
                 epochs=2, minibatches=2, learning_rate=3e-3, progress=False,
                 results_dir=str(tmp_path), run_name=name,
                 lag={"delays": [0, 1], "max_delay": 1},
                 warm_start={"steps": 20, "batch_size": 16, "learning_rate": 3e-3,
                             "pool_size": 64},
                 eval={"every": 2, "samples": 1, "test_size": 4},
                 model={"d_model": 32, "num_layers": 1, "num_heads": 2})
    return from_table(LLMConfig, {**table, **changes}, "tiny")


def leaves(state) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(state.params)]


def stop_after_first_chunk(monkeypatch):
    """SIGINT to this process after the first chunk: the loop stops at its end."""
    chunk = train.LLMTrainer.chunk
    calls = []

    def interrupting(self, state, n):
        out = chunk(self, state, n)
        calls.append(n)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(train.LLMTrainer, "chunk", interrupting)


def test_interrupted_llm_run_resumes_bit_identical(tmp_path, monkeypatch):
    whole = runner.run(tiny(tmp_path, "whole"))
    with monkeypatch.context() as patch:
        stop_after_first_chunk(patch)
        first = runner.run(tiny(tmp_path, "cut"))
    assert first.stop_signal == signal.SIGINT and len(first.rows) == 4  # 1 chunk × 4 runs
    resumed = runner.run(resume=tmp_path / "cut")
    assert resumed.stop_signal == 0
    for a, b in zip(leaves(whole.state), leaves(resumed.state), strict=True):
        np.testing.assert_array_equal(a, b)
    drop = ("wall_time", "sps", "compile_time")
    assert [{k: v for k, v in r.items() if k not in drop} for r in whole.rows] == \
        [{k: v for k, v in r.items() if k not in drop} for r in resumed.rows]
    rows = runner.run_results(tmp_path / "cut", "vaco β")
    assert len(rows) == 3 * 4 and {r["K"] for r in rows} == {0, 1}
    assert all(r["accuracy"] is not None and "return" not in r for r in rows)
    write_results(tmp_path / "results.csv", rows)
    back = read_results(tmp_path / "results.csv")
    assert back[-1]["variant"] == "vaco β" and back[-1]["step"] == 6
    assert back[-1]["vaco/filtered_fraction"] == pytest.approx(rows[-1]["vaco/filtered_fraction"])


def test_nan_guard_stops_llm_run_with_last_good_checkpoint(tmp_path, monkeypatch):
    """Parameters poisoned from generation step 4 on, in the runs with K = 1 only."""
    step = train.train_step

    def poisoned(model, config, state, lag_delay, pool, ref_params):
        state, metrics = step(model, config, state, lag_delay, pool, ref_params)
        bad = (state.step >= 4) & (lag_delay == 1)
        params = jax.tree.map(lambda p: jax.numpy.where(bad, jax.numpy.nan, p), state.params)
        return state.replace(params=params), metrics

    monkeypatch.setattr(train, "train_step", poisoned)
    with pytest.raises(NonFiniteError) as error:
        runner.run(tiny(tmp_path), control=RunControl(checkpoint_every=1))
    message = str(error.value)
    assert "iteration 4 " in message and "last good checkpoint: iteration 2" in message
    assert "run 2 (seed 0, lag_delay=1): params" in message and "run 0" not in message
    steps = sorted(int(p.name) for p in (tmp_path / "run" / "checkpoints").iterdir()
                   if p.name.isdigit())
    assert steps == [2]


@pytest.mark.parametrize("change, option", [
    ({"algo": "ppo"}, "LLMConfig.algo"),
    ({"grpo": GRPOConfig(anchor="behavior ")}, "LLMConfig.grpo.anchor"),
    ({"vaco": TokenVacoConfig(filter="tokens")}, "LLMConfig.vaco.filter"),
    ({"loss_agg": "mean"}, "LLMConfig.loss_agg"),
    ({"minibatches": 3}, "must divide num_prompts"),
    ({"group_size": 0}, "LLMConfig.group_size must be >= 1"),
    ({"lag": LLMLagConfig(delays=(0, 9), max_delay=8)}, "raise lag.max_delay"),
    ({"eval": LLMEvalConfig(every=30)}, "must divide num_steps"),
    ({"vaco": TokenVacoConfig(delta=0.0)}, "LLMConfig.vaco.delta must be > 0"),
    ({"vaco": TokenVacoConfig(weight="full")}, "LLMConfig.vaco.weight"),
    ({"rho_bar": 0.0}, "LLMConfig.rho_bar must be > 0"),
])
def test_llm_config_refuses_bad_values_naming_the_option(change, option):
    with pytest.raises(ConfigError, match=option.replace(".", r"\.")):
        LLMConfig(**change)


def test_resume_refuses_other_settings_and_foreign_folders(tmp_path):
    runner.open_llm_run(tiny(tmp_path), RunControl(), None)[2].close()
    with pytest.raises(ConfigError, match=r"other settings \(learning_rate: 0.003 -> 0.001\)"):
        runner.run(tiny(tmp_path, learning_rate=1e-3), resume=tmp_path / "run")
    with pytest.raises(ConfigError, match="already holds a run|continue it"):
        (tmp_path / "run" / "metrics.jsonl").write_text("{}\n")
        runner.run(tiny(tmp_path))
    rl = tmp_path / "rl"
    rl.mkdir()
    (rl / "config.json").write_text(json.dumps({"env": "CartPole-v1", "algo": "ppo"}))
    with pytest.raises(RunFileError, match="not an LLM run's"):
        runner.run(resume=rl)

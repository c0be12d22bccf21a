"""A run folder written by an earlier jaxvaco resumes as recorded.

`tests/data/main_run/vaco_grid` was written by the code before each algorithm became one
`AlgorithmSpec` (main at 29de9c0): VACO with a grid over δ (then a shared hyperparameter, now
one of VACO's traced options) and the lag K, constant learning rate, 1024 env steps, its
newest checkpoint kept. Today's code must read its config.json and runs.json, continue it
from the checkpoint to 2048 steps, and give exactly what an uninterrupted 2048-step run of
today's code gives; the first 1024 steps must match what the old code recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from jaxvaco.core.config import from_dict, with_overrides
from jaxvaco.host.run_dir import RunControl
from jaxvaco.host.runner import run

OLD = Path(__file__).parent / "data" / "main_run" / "vaco_grid"
COMPARED = ("loss/policy", "loss/value", "loss/entropy", "grad_norm", "vaco/filtered_fraction",
            "tv/total")


def rows(run_dir: Path) -> dict[tuple, dict]:
    """The metrics rows by (run, env_steps)."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {(row["run"], row["env_steps"]): row for row in map(json.loads, lines)}


def test_a_folder_of_the_old_code_resumes_as_recorded(tmp_path):
    old = tmp_path / "old"
    shutil.copytree(OLD, old)
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAXVACO_CACHE_DIR="off")
    out = subprocess.run([sys.executable, "-m", "jaxvaco", "train", "--resume", str(old),
                          "--total-timesteps", "2048", "--no-progress"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]

    recorded = json.loads((OLD / "config.json").read_text())
    config = with_overrides(from_dict(recorded), {"total_timesteps": 2048, "progress": False,
                                                  "results_dir": str(tmp_path),
                                                  "run_name": "fresh"})
    grid = json.loads((OLD / "runs.json").read_text())["grid"]
    assert config.vaco.delta == recorded["vaco"]["delta"] and set(grid) == {"delta",
                                                                            "lag_delay"}
    run(config, grid, RunControl(compilation_cache="off"))

    resumed, fresh, before = rows(old), rows(tmp_path / "fresh"), rows(OLD)
    assert set(resumed) == set(fresh) and max(step for _, step in fresh) == 2048
    for key, row in fresh.items():
        assert {name: resumed[key][name] for name in COMPARED} == {
            name: row[name] for name in COMPARED}, key
    for key, row in before.items():
        np.testing.assert_allclose([fresh[key][name] for name in COMPARED],
                                   [row[name] for name in COMPARED], rtol=1e-5, atol=1e-7)

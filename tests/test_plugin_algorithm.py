"""A third-party algorithm works everywhere a built-in one does, without a fork.

`tests/plugins/ppo_tanh.py` declares one algorithm in one file; `tests/plugins/entry_point/`
holds the metadata a `pip install` of a package declaring it under the entry-point group
`jaxvaco.algorithms` would leave. Every path runs as its own process, as a user runs it:
`--help`, train, resume with a changed traced option, eval, export and `load_policy`, a
grid over its option, a sweep with the robustness table, and registration by a call in user
code instead of the entry point.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PLUGINS = Path(__file__).parent / "plugins"
TINY = ["--num-envs", "4", "--num-steps", "16", "--total-timesteps", "512", "--hidden-sizes",
        "16", "--eval.num-episodes", "2", "--no-anneal-lr", "--no-progress"]


def environment(tmp_path: Path, entry_point: bool = True) -> dict[str, str]:
    """The process environment: the plugin importable, its entry point installed or not."""
    paths = [str(PLUGINS)] + ([str(PLUGINS / "entry_point")] if entry_point else [])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), JAX_PLATFORMS="cpu",
                JAXVACO_CACHE_DIR=str(tmp_path / "cache"))


def jaxvaco(tmp_path: Path, *args: str, entry_point: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "jaxvaco", *args], capture_output=True,
                         text=True, timeout=600, env=environment(tmp_path, entry_point),
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def python(tmp_path: Path, code: str, entry_point: bool = True) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, env=environment(tmp_path, entry_point), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_help_lists_the_plugins_option_group(tmp_path):
    text = jaxvaco(tmp_path, "train", "--help").stdout
    assert "--ppo-tanh.scale" in text and "tanh trust region" in text
    assert "--ppo-tanh.scale" not in jaxvaco(tmp_path, "train", "--help",
                                             entry_point=False).stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run stopped by SIGINT after its first chunk, then resumed to the end with a new
    value of the plugin's traced option."""
    root = tmp_path_factory.mktemp("plugin")
    run_dir = root / "run"
    first = subprocess.Popen([sys.executable, "-m", "jaxvaco", "train", "--algo", "ppo_tanh",
                              "--ppo-tanh.scale", "0.3", *TINY, "--total-timesteps", "8192",
                              "--chunk-iterations", "1", "--checkpoint-every", "1000",
                              "--results-dir", str(root), "--run-name", "run"],
                             env=environment(root), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (run_dir / "metrics.jsonl").is_file() or not metrics(run_dir):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=300)
    stopped_at = metrics(run_dir)[-1]["env_steps"]
    jaxvaco(root, "train", "--resume", str(run_dir), "--resume-with-changes",
            "--ppo-tanh.scale", "0.1")
    return root, run_dir, stopped_at


def test_train_and_resume_with_a_new_value_of_its_traced_option(trained):
    _, run_dir, stopped_at = trained
    config = json.loads((run_dir / "config.json").read_text())
    assert config["algo"] == "ppo_tanh" and config["ppo_tanh"]["scale"] == 0.1
    assert config["learning_rate"] == 2.5e-3  # the spec's tuned value of a shared option
    assert "--ppo-tanh.scale: 0.3 -> 0.1" in json.dumps(config["resume_changes"])
    rows = metrics(run_dir)
    assert stopped_at < 8192 and rows[-1]["env_steps"] == 8192
    assert all(0 <= row["ppo_tanh/saturated_fraction"] <= 1 for row in rows)


def test_eval_export_and_load_policy(trained):
    root, run_dir, _ = trained
    jaxvaco(root, "eval", str(run_dir), "--episodes", "2")
    assert (run_dir / "eval.json").is_file()
    jaxvaco(root, "export", str(run_dir), "--out", str(root / "policy"))
    actions = python(root, "import jax, jaxvaco\n"
                     f"policy = jaxvaco.load_policy({str(root / 'policy')!r})\n"
                     "obs = jax.numpy.zeros((3, 4))\n"
                     "print(policy.act(obs, jax.random.PRNGKey(0)).shape)")
    assert actions.strip().endswith("(3,)")


def test_a_sweep_compares_it_with_ppo_under_lag(tmp_path):
    spec = tmp_path / "sweep.toml"
    spec.write_text('name = "plugin_sweep"\nenvs = ["CartPole-v1"]\nalgos = ["ppo_tanh", "ppo"]\n'
                    'lag_delays = [0, 2]\nvmap_lag = true\n\n[base]\nnum_seeds = 2\n'
                    'num_envs = 4\nnum_steps = 16\ntotal_timesteps = 512\n'
                    'hidden_sizes = [16]\nprogress = false\neval = { num_episodes = 2 }\n')
    jaxvaco(tmp_path, "sweep", str(spec), "--results-dir", str(tmp_path))
    with open(tmp_path / "plugin_sweep" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["algo"], r["K"]) for r in rows} == {(a, k) for a in ("ppo_tanh", "ppo")
                                                   for k in ("0", "2")}
    assert all(r["ppo_tanh/saturated_fraction"] for r in rows if r["algo"] == "ppo_tanh")
    table = jaxvaco(tmp_path, "plot", str(tmp_path / "plugin_sweep"), "--out",
                    str(tmp_path / "figures")).stdout
    assert "ppo_tanh" in table and "retention" in table.lower()


def test_registration_by_a_call_in_user_code(tmp_path):
    """Without the entry point: `register_algorithm`, then a grid over the plugin's option
    from Python and the CLI from the same process."""
    out = python(tmp_path, f"""
import jaxvaco
from ppo_tanh import SPEC
config_type = jaxvaco.register_algorithm(SPEC)
assert jaxvaco.TrainConfig is config_type
config = jaxvaco.TrainConfig(algo="ppo_tanh", num_envs=4, num_steps=16, total_timesteps=256,
                             hidden_sizes=(16,), progress=False, results_dir={str(tmp_path)!r},
                             run_name="grid")
jaxvaco.run(config, grid={{"scale": [0.1, 0.5]}})
from jaxvaco.cli import main
print("rc", main(["train", "--algo", "ppo_tanh", "--ppo-tanh.scale", "0.4", "--num-envs", "4",
                  "--num-steps", "16", "--total-timesteps", "256", "--hidden-sizes", "16",
                  "--no-progress", "--results-dir", {str(tmp_path)!r}, "--run-name", "cli"]))
""", entry_point=False)
    assert "rc 0" in out
    scales = {row["scale"] for row in metrics(tmp_path / "grid")}
    assert scales == {0.1, 0.5}
    assert json.loads((tmp_path / "cli" / "config.json").read_text())["ppo_tanh"]["scale"] == 0.4


def test_a_plugin_that_fails_to_load_costs_one_warning(tmp_path):
    info = tmp_path / "broken" / "broken_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[jaxvaco.algorithms]\nbroken = no_such_module:SPEC\n")
    env = dict(environment(tmp_path), PYTHONPATH=str(info.parent))
    out = subprocess.run([sys.executable, "-m", "jaxvaco", "train", "--help"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0
    assert "plugin broken = no_such_module:SPEC was not loaded" in out.stderr


def test_a_built_in_algorithm_is_one_file_of_the_algos_package():
    """The registry finds every module of jaxvaco/core/algos that declares a SPEC: adding a
    built-in algorithm is adding that file, no list to edit."""
    from jaxvaco.core.algos import algorithms
    from jaxvaco.core.algos.registry import built_in

    package = Path(built_in.__code__.co_filename).parent
    declaring = {path.stem for path in package.glob("*.py")
                 if "\nSPEC = AlgorithmSpec(" in path.read_text()}
    assert {spec.name for spec in built_in()} == declaring == {"ppo", "ppo_kl", "spo",
                                                               "impala", "vaco"}
    assert declaring <= set(algorithms())

"""Sweeps (`jaxvaco.lab.sweep`): restart after a kill, the tidy table; hyperparameter vmap."""

from __future__ import annotations

import csv
import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxvaco.core.config import ConfigError, EvalConfig, TrainConfig, to_dict
from jaxvaco.host import runner
from jaxvaco.host.run_dir import RunControl
from jaxvaco.lab.results import load_results
from jaxvaco.lab.sweep import SweepConfig, cell_config, cells, load_sweep_file, run_sweep


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
    return subprocess.Popen([sys.executable, "-m", "jaxvaco", "sweep", *args], env=env,
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
    # spo has a complete checkpoint (renamed to its step; not orbax's "<T>.orbax-checkpoint-
    # tmp-*" still being written, which a resume cannot use): kill it
    while not any(p.name.isdigit() for p in (spo / "checkpoints").glob("[0-9]*")):
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
    started = [line for line in out.splitlines() if re.match(r"\[\d+/\d+\] ", line)]
    assert started == ["[2/2] CartPole-v1__spo__K0-2"]  # only the unfinished cell ran
    share = re.search(r"^compiling: ([\d.]+) s of ([\d.]+) s in the cells trained \((\d+)%\)$",
                      out, re.MULTILINE)
    assert share and 0 < float(share[1]) <= float(share[2]), out  # the sweep's compile share
    # the sweep ends with its table (a row per variant, a column per K, retention at K=2),
    # then the command that plots it
    lines = out.splitlines()
    assert lines[-1] == f"jaxvaco plot {directory}"
    table = "\n".join(lines[lines.index(started[0]) + 1:])
    for needle in ("Final return by policy lag K", "K=0", "K=2", "return", "greedy",
                   "retention", "K=2 − K=0", "normalised score (random = 0, reference = 1) "
                   "on CartPole-v1"):
        assert needle in " ".join(table.split()), needle
    rows = [line for line in table.splitlines() if line.startswith("│ CartPole-v1")]
    assert [row.split("│")[2].strip() for row in rows] == ["ppo", "spo"]
    assert all(row.split("│")[3].strip() == "2" for row in rows)  # seeds
    assert (ppo / "DONE").stat().st_mtime_ns == done_time and (spo / "DONE").exists()

    table = load_results(directory / "results.csv")
    with open(directory / "results.csv") as file:
        header = next(csv.reader(file))
    assert header[:7] == ["env", "algo", "variant", "K", "seed", "step", "return"]
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


def test_cell_summary_means_each_k_apart(capsys):
    """The table each cell prints: one mean row per K (over that K's seeds), none over K."""
    from jaxvaco.host.progress import print_summary

    runs = [{"seed": s, "lag_delay": k} for k in (0, 8) for s in (0, 1)]
    summary = {"train_return": np.array([10.0, 30.0, 100.0, 300.0]),
               "eval/greedy_return": np.array([1.0, 3.0, 5.0, 7.0]),
               "env_steps": np.array([1024] * 4), "sps": np.array(1000.0)}
    print_summary(TrainConfig(), Path("results/x"), runs, summary)
    means = [line.split("│")[1:-1] for line in capsys.readouterr().out.splitlines()
             if "mean" in line]
    assert [[cell.strip() for cell in row] for row in means] == [
        ["mean", "0", "20.0", "2.0"], ["mean", "8", "200.0", "6.0"]]  # not 110.0 / 4.0


def test_cell_summary_keeps_a_long_results_path_on_one_line(capsys, monkeypatch):
    """The results path stays whole however narrow the terminal (rich would otherwise wrap
    it mid-path, and a copied path would break)."""
    from jaxvaco.host.progress import print_summary

    monkeypatch.setenv("COLUMNS", "60")
    run_dir = Path("/tmp/pytest-of-someone/pytest-123/a-long-test-name0/results/run")
    summary = {"train_return": np.array([10.0]), "env_steps": np.array([1024]),
               "sps": np.array(123456.0)}
    print_summary(TrainConfig(), run_dir, [{"seed": 0}], summary)
    assert f"results: {run_dir}" in capsys.readouterr().out


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
    from jaxvaco.host.run_dir import config_changes
    from jaxvaco.host.run_folder import write_json
    from jaxvaco.lab.sweep import cell_setup, run_sweep

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



VARIANTS_TOML = """
name = "variants"
envs = ["CartPole-v1", "Acrobot-v1"]
lag_delays = [0, 2]

[base]
num_envs = 8
num_steps = 16
total_timesteps = 2560
hidden_sizes = [16, 16]
progress = false

[env_overrides]
Acrobot-v1 = { total_timesteps = 5120, gamma = 0.9 }

[variants."clip β | learner"]
algo = "ppo"
ppo.critic = "learner"

[variants."vaco δ=0.1"]
algo = "vaco"
vaco = { delta = 0.1, filter = "sample" }

[variants.plain]   # no algo: base.algo
learning_rate = 1e-3
"""


def test_variants_and_env_overrides_make_the_cells(tmp_path):
    """Cells are env × variant; a cell's config is base, then its env's overrides, then its
    variant's options, in plain folder names."""
    path = tmp_path / "sweep.toml"
    path.write_text(VARIANTS_TOML)
    spec = load_sweep_file(path)
    assert [(c.env, c.algo, c.label, c.name) for c in cells(spec)] == [
        ("CartPole-v1", "ppo", "clip β | learner", "CartPole-v1__clip-β-learner__K0-2"),
        ("CartPole-v1", "vaco", "vaco δ=0.1", "CartPole-v1__vaco-δ=0.1__K0-2"),
        ("CartPole-v1", "ppo", "plain", "CartPole-v1__plain__K0-2"),
        ("Acrobot-v1", "ppo", "clip β | learner", "Acrobot-v1__clip-β-learner__K0-2"),
        ("Acrobot-v1", "vaco", "vaco δ=0.1", "Acrobot-v1__vaco-δ=0.1__K0-2"),
        ("Acrobot-v1", "ppo", "plain", "Acrobot-v1__plain__K0-2")]
    configs = {(c.env, c.label): cell_config(spec, c) for c in cells(spec)}
    cart, acro = configs["CartPole-v1", "clip β | learner"], configs["Acrobot-v1", "vaco δ=0.1"]
    assert (cart.total_timesteps, cart.gamma, cart.ppo.critic) == (2560, 0.99, "learner")
    assert (acro.total_timesteps, acro.gamma, acro.algo) == (5120, 0.9, "vaco")
    assert (acro.vaco.delta, acro.vaco.filter, acro.lag.max_delay) == (0.1, "sample", 2)
    plain = configs["Acrobot-v1", "plain"]
    assert (plain.algo, plain.learning_rate, plain.total_timesteps) == ("ppo", 1e-3, 5120)
    assert configs["CartPole-v1", "plain"].learning_rate == 1e-3
    assert cart.hidden_sizes == (16, 16) and cart.run_name == "CartPole-v1__clip-β-learner__K0-2"
    # Python dicts may spell nested options as "group.field" keys
    same = dataclasses.replace(spec, variants={
        **spec.variants, "clip β | learner": {"algo": "ppo", "ppo.critic": "learner"}})
    assert cell_config(same, cells(same)[0]) == cell_config(spec, cells(spec)[0])


BAD_VARIANTS = [
    ("unknown-key", '[variants.a]\nalgo = "ppo"\nppo.critc = "learner"\n',
     ['[variants.\'a\']', "unknown option ppo.critc", "did you mean ppo.critic"]),
    ("unknown-group", "[variants.a]\nvacoo = { delta = 0.1 }\n",
     ["[variants.'a']", "unknown option vacoo", "did you mean vaco"]),
    ("wrong-type", '[variants.a]\nlearning_rate = "fast"\n',
     ["[variants.'a']", "learning_rate must be a number, got 'fast'"]),
    ("not-a-table", 'variants = { a = "ppo" }\n', ["variants.a must be a table"]),
    ("option-not-group", "[variants.a]\ngamma.x = 1\n", ["gamma is an option"]),
    ("algos-and-variants", 'algos = ["ppo"]\n[variants.a]\nalgo = "vaco"\n',
     ["either algos", "set each variant's algo"]),
    ("set-by-sweep", "[variants.a]\nlag.max_delay = 4\n",
     ["[variants.'a']", "lag.max_delay is set by the sweep"]),
    ("same-folder", '[variants."a b"]\n[variants."a|b"]\n', ["same folder name 'a-b'"]),
    ("no-folder", '[variants."| |"]\n', ["gives no folder name"]),
    ("env-override-unknown-key", "[env_overrides.CartPole-v1]\ntotal_timestep = 10\n",
     ["[env_overrides.'CartPole-v1']", "did you mean total_timesteps"]),
    ("env-override-not-swept", "[env_overrides.Acrobot-v1]\ngamma = 0.9\n",
     ["Acrobot-v1 is not one of envs"]),
    ("env-override-algo", '[env_overrides.CartPole-v1]\nalgo = "vaco"\n',
     ["algo is set by the sweep"]),
    ("env-override-and-variant", "[env_overrides.CartPole-v1]\ngamma = 0.9\n"
     "[variants.a]\ngamma = 0.95\n", ["gamma is also set by variant 'a'", "one place"]),
]


@pytest.mark.parametrize("text,needles", [r[1:] for r in BAD_VARIANTS],
                         ids=[r[0] for r in BAD_VARIANTS])
def test_bad_variants_and_env_overrides_name_the_file_and_key(tmp_path, text, needles):
    path = tmp_path / "sweep.toml"
    path.write_text('name = "s"\n' + text)
    with pytest.raises(ConfigError) as error:
        load_sweep_file(path)
    assert str(path) in str(error.value)
    for needle in needles:
        assert needle in str(error.value), str(error.value)


def test_variant_sweep_table_and_resume(tmp_path):
    """results.csv has a variant column (several variants share the algo ppo) and the env's
    budget (env_overrides) is what ran; a restart skips complete cells, continues one
    without its DONE marker from its checkpoint (nothing is retrained), and refuses a
    complete cell whose variant changed."""
    base = TrainConfig(num_envs=8, num_steps=16, total_timesteps=8 * 16 * 2, update_epochs=1,
                       num_minibatches=2, hidden_sizes=(8,), chunk_iterations=2,
                       progress=False, eval=EvalConfig(every_chunks=0, num_episodes=2))
    spec = SweepConfig(name="v", results_dir=str(tmp_path), lag_delays=(0, 1), base=base,
                       env_overrides={"CartPole-v1": {"total_timesteps": 8 * 16 * 4}},
                       variants={"behaviour critic": {"algo": "ppo"},
                                 "learner critic": {"algo": "ppo", "ppo.critic": "learner"}})
    control = RunControl(checkpoint_every=1)
    first = run_sweep(spec, control)
    names = ["CartPole-v1__behaviour-critic__K0-1", "CartPole-v1__learner-critic__K0-1"]
    assert first.ran == names and not first.failed
    table = load_results(tmp_path / "v" / "results.csv")
    with open(tmp_path / "v" / "results.csv") as file:
        header = next(csv.reader(file))
    assert header[:7] == ["env", "algo", "variant", "K", "seed", "step", "return"]
    assert set(table["algo"]) == {"ppo"}
    runs = set(zip(table["variant"], table["K"], table["seed"], strict=True))
    assert runs == {(v, k, 0) for v in ("behaviour critic", "learner critic") for k in (0, 1)}
    assert sorted(set(table["step"])) == [8 * 16 * 2, 8 * 16 * 4]  # 2 chunks of the budget

    learner = tmp_path / "v" / "runs" / names[1]
    metrics = (learner / "metrics.jsonl").read_bytes()
    (learner / "DONE").unlink()
    second = run_sweep(spec, control)
    assert second.skipped == names[:1] and second.ran == names[1:]
    assert (learner / "DONE").exists() and (learner / "metrics.jsonl").read_bytes() == metrics
    assert load_results(tmp_path / "v" / "results.csv")["return"].tolist() == \
        table["return"].tolist()

    changed = dataclasses.replace(spec, variants={
        **spec.variants, "learner critic": {"algo": "ppo", "ppo.critic": "learner",
                                            "gamma": 0.9}})
    with pytest.raises(ConfigError, match="complete but was run with other settings"):
        run_sweep(changed, control)


UNLIKE = [
    ({}, ["ppo", "vaco"], []),
    ({"ppo (recorded critic)": {"algo": "ppo", "ppo": {"critic": "behaviour"}},
      "vaco": {"algo": "vaco"}}, [], ["differ in critic", "ppo (recorded critic) (behaviour)",
                                      "vaco (learner)"]),
    ({"ppo lr 1e-3": {"algo": "ppo", "learning_rate": 1e-3}, "vaco": {"algo": "vaco"},
      "impala": {"algo": "impala"}}, [], ["ppo lr 1e-3 do(es) not run with its algorithm's tuned"]),
]


@pytest.mark.parametrize("variants,algos,needles", UNLIKE, ids=["defaults", "critic", "tuned"])
def test_a_sweep_of_unlike_variants_says_so(variants, algos, needles):
    """algos = ["ppo", "vaco"] with nothing else compares like with like (both on the
    learner's critic, each with its tuned values); a variant on the recorded critic, or one
    off its tuned values, is named in one warning line."""
    from jaxvaco.lab.sweep import unlike_comparisons

    spec = SweepConfig(envs=("CartPole-v1",), algos=tuple(algos), variants=variants,
                       base=TrainConfig(total_timesteps=20_480))
    warnings = unlike_comparisons(spec)
    assert len(warnings) == (1 if needles else 0), warnings
    for needle in needles:
        assert needle in warnings[0], (needle, warnings)

"""Checkpoints, exact resume, stop signals, the NaN guard and the logging sinks.

The interruption tests run `python -m jaxvaco train` in subprocesses sharing a
persistent compilation cache, so only the first of them compiles; the rest are
in-process `runner.run` calls on tiny configs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import struct

from jaxvaco.cli import main
from jaxvaco.core.config import ConfigError, EvalConfig, RunFileError, TrainConfig
from jaxvaco.core.guard import NonFiniteError
from jaxvaco.host import checkpoint, runner
from jaxvaco.host.checkpoint import Checkpointer
from jaxvaco.host.run_dir import RunControl, load_run_dir

TIMING_KEYS = {"sps", "wall_time", "compile_time"}


@pytest.fixture(scope="module", autouse=True)
def _fast(fast_compile):
    yield


def tiny(tmp_path: Path, **changes) -> TrainConfig:
    base = TrainConfig(env="CartPole-v1", algo="ppo", num_envs=8, num_steps=16,
                       total_timesteps=8 * 16 * 8, update_epochs=2, num_minibatches=2,
                       hidden_sizes=(16, 16), progress=False, chunk_iterations=2,
                       eval=EvalConfig(every_chunks=0, num_episodes=4),
                       results_dir=str(tmp_path), run_name="run")
    return dataclasses.replace(base, **changes)


def final_arrays(run_dir: Path) -> dict[str, np.ndarray]:
    """Every array of the newest checkpoint's TrainState, by key path."""
    manager = ocp.CheckpointManager((run_dir / "checkpoints").absolute())
    out = manager.restore(manager.latest_step(),
                          args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    manager.close()
    return {jax.tree_util.keystr(path): np.asarray(leaf)
            for path, leaf in jax.tree.leaves_with_path(out.state)}


def metric_rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}
            for line in lines]


def steps(run_dir: Path) -> list[int]:
    """Complete checkpoints (orbax writes into *.orbax-checkpoint-tmp-* first)."""
    return sorted(int(p.name) for p in (run_dir / "checkpoints").glob("*") if p.name.isdigit())


def assert_same_run(a: Path, b: Path) -> None:
    assert metric_rows(a) == metric_rows(b)
    arrays_a, arrays_b = final_arrays(a), final_arrays(b)
    assert arrays_a.keys() == arrays_b.keys()
    for key in arrays_a:
        np.testing.assert_array_equal(arrays_a[key], arrays_b[key], err_msg=key)


# ------------------------------------------------------- interrupted CLI runs (subprocesses)

TOTAL_ITERATIONS = 60
CLI_FLAGS = ["--num-envs", "8", "--num-steps", "16", "--total-timesteps",
             str(128 * TOTAL_ITERATIONS), "--update-epochs", "2", "--num-minibatches", "2",
             "--hidden-sizes", "16", "16", "--chunk-iterations", "2", "--eval.every-chunks", "10",
             "--eval.num-episodes", "4", "--no-progress"]


def cli(args: list[str], cache: Path) -> subprocess.Popen:
    env = dict(os.environ, JAX_DISABLE_MOST_OPTIMIZATIONS="1", JAX_PLATFORMS="cpu",
               JAX_COMPILATION_CACHE_DIR=str(cache),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    return subprocess.Popen([sys.executable, "-m", "jaxvaco", "train", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=240)
    return proc.returncode, err


def wait_for(condition, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"exited early: {finish(proc)}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """An uninterrupted run, and one stopped by SIGINT, resumed, SIGKILLed, resumed again."""
    root = tmp_path_factory.mktemp("cli")
    cache = root / "jax-cache"
    ref = cli([*CLI_FLAGS, "--results-dir", str(root), "--run-name", "ref",
               "--checkpoint-every", "0"], cache)
    returncode, stderr = finish(ref)
    assert returncode == 0, stderr
    run_dir = root / "interrupted"
    first = cli([*CLI_FLAGS, "--results-dir", str(root), "--run-name", "interrupted",
                 "--checkpoint-every", "1000"], cache)
    wait_for(lambda: (run_dir / "metrics.jsonl").exists()
             and (run_dir / "metrics.jsonl").stat().st_size > 0, first)
    first.send_signal(signal.SIGINT)
    sigint = finish(first)
    after_sigint = steps(run_dir)
    second = cli(["--resume", str(run_dir), "--checkpoint-every", "1"], cache)
    wait_for(lambda: len(steps(run_dir)) >= 2, second)
    second.kill()
    second.wait()
    after_kill = steps(run_dir)
    third = finish(cli(["--resume", str(run_dir)], cache))
    return {"ref": root / "ref", "run": run_dir, "cache": cache, "sigint": sigint,
            "after_sigint": after_sigint, "after_kill": after_kill, "third": third}


def test_sigint_saves_a_checkpoint_and_exits_cleanly(interrupted):
    returncode, stderr = interrupted["sigint"]
    assert returncode == 128 + signal.SIGINT, stderr
    assert "Traceback" not in stderr
    assert "stopped by SIGINT" in stderr and "--resume" in stderr
    (step,) = interrupted["after_sigint"]  # checkpoint-every 1000: only the one on SIGINT
    assert 0 < step < TOTAL_ITERATIONS


def test_killed_run_resumes_bit_identical(interrupted):
    """SIGKILL mid-run (after at least one checkpoint), resume: the metrics and the final
    TrainState (params, optimizer, env states, keys, ...) equal the uninterrupted run's."""
    assert interrupted["after_kill"] and max(interrupted["after_kill"]) < TOTAL_ITERATIONS
    returncode, stderr = interrupted["third"]
    assert returncode == 0, stderr
    assert steps(interrupted["run"])[-1] == TOTAL_ITERATIONS
    assert_same_run(interrupted["ref"], interrupted["run"])


def test_checkpoints_are_complete_and_kept_to_the_last_three(interrupted):
    kept = steps(interrupted["run"])
    assert len(kept) == 3 and kept[-1] == TOTAL_ITERATIONS
    assert not list((interrupted["run"] / "checkpoints").glob("*tmp*"))
    assert len(metric_rows(interrupted["run"])) == TOTAL_ITERATIONS // 2  # no duplicates


def test_corrupted_newest_checkpoint_falls_back(interrupted, tmp_path):
    """Newest step damaged (its bytes differ from its digest), plus a half-written tmp step:
    resume warns, deletes it, continues from the step before, truncates metrics.jsonl there
    and ends bit-identical."""
    run_dir = tmp_path / "copy"
    shutil.copytree(interrupted["run"], run_dir)
    for path in (run_dir / "checkpoints" / str(TOTAL_ITERATIONS) / "state").rglob("*"):
        if path.is_file():
            path.write_bytes(b"garbage")
    (run_dir / "checkpoints" / "99.orbax-checkpoint-tmp-1").mkdir()
    returncode, stderr = finish(cli(["--resume", str(run_dir)], interrupted["cache"]))
    assert returncode == 0, stderr
    assert f"{TOTAL_ITERATIONS} is damaged" in stderr
    assert_same_run(interrupted["ref"], run_dir)


def test_checkpoint_of_another_state_layout_is_refused_and_kept(tmp_path):
    """A TrainState of another version (here the one with `history` and `actors` before
    the single `lag` field) is not mistaken for a corrupted checkpoint and deleted."""
    @struct.dataclass
    class Old:
        params: jax.Array
        history: jax.Array
        actors: jax.Array | None = None

    @struct.dataclass
    class New:
        params: jax.Array
        lag: jax.Array

    store = Checkpointer(tmp_path / "checkpoints", keep=2)
    store.save(4, Old(jnp.ones(2), jnp.zeros((3, 2))), {"chunk": 2})
    store.close()
    store = Checkpointer(tmp_path / "checkpoints", keep=2)
    with pytest.raises(RunFileError, match=r"checkpoints/4 was written by another version of "
                       r"jaxvaco \(its TrainState has \['actors', 'history'\] where this one "
                       r"has \['lag'\]\).*start a new run"):
        store.restore(jax.eval_shape(lambda: New(jnp.ones(2), jnp.zeros((3, 2)))))
    assert store.steps() == [4]
    store.close()


@struct.dataclass
class Small:
    params: jax.Array
    lag: jax.Array


def small_checkpoints(directory: Path, steps: tuple[int, ...] = (2, 4)) -> None:
    """Sealed checkpoints of a two-field state, one per step, closed."""
    store = Checkpointer(directory, keep=3)
    for step in steps:
        store.save(step, Small(jnp.full(2, step, jnp.float32), jnp.zeros((3, 2))), {"chunk": step},
                   {"config": {"num_envs": 8}, "grid": {}})
    store.close()


def flip_one_byte(step_dir: Path) -> None:
    """Change one byte in the middle of the step's largest data file."""
    files = [p for p in step_dir.rglob("*") if p.is_file() and p.name not in checkpoint.UNSEALED]
    path = max(files, key=lambda p: p.stat().st_size)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_step_whose_bytes_differ_from_its_digest_is_deleted(tmp_path):
    small_checkpoints(tmp_path)
    assert all((tmp_path / str(s) / checkpoint.DIGEST).is_file() for s in (2, 4))
    flip_one_byte(tmp_path / "4")
    store = Checkpointer(tmp_path, keep=3)
    with pytest.warns(UserWarning, match=r"/4 is damaged"):
        step, state, host = store.restore(jax.eval_shape(lambda: Small(jnp.ones(2),
                                                                       jnp.zeros((3, 2)))))
    assert step == 2 and host == {"chunk": 2} and np.all(np.asarray(state.params) == 2)
    assert store.steps() == [2]
    store.close()


@pytest.mark.parametrize("sealed", [True, False], ids=["intact", "without-digest"])
def test_a_step_that_cannot_be_restored_but_is_not_proven_damaged_is_kept(tmp_path, sealed):
    """Another shape (a config edited by hand) or an old step without a digest: refused with
    the reason, every file kept."""
    small_checkpoints(tmp_path)
    if not sealed:
        (tmp_path / "4" / checkpoint.DIGEST).unlink()
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    store = Checkpointer(tmp_path, keep=3)
    other_shape = jax.eval_shape(lambda: Small(jnp.ones(5), jnp.zeros((3, 2))))
    proof = "match the digest" if sealed else "has no digest"
    with pytest.raises(RunFileError, match=f"4 cannot be restored.*{proof}.*It is kept"):
        store.restore(other_shape)
    store.close()
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_checkpoint_records_the_configuration_it_was_made_with(tmp_path):
    small_checkpoints(tmp_path)
    store = Checkpointer(tmp_path, keep=3)
    assert store.recorded(4) == {"config": {"num_envs": 8}, "grid": {}}
    store.close()


def test_changed_config_resume_is_refused(interrupted, capsys):
    run_dir = interrupted["run"]
    config, _ = load_run_dir(run_dir)
    changed = dataclasses.replace(config, num_envs=16, learning_rate=0.1)
    with pytest.raises(ConfigError, match="--num-envs: 8 -> 16.*--learning-rate"):
        runner.run(changed, resume=run_dir)
    assert main(["train", "--resume", str(run_dir), "--gamma", "0.5"]) == 2
    assert "--gamma: 0.99 -> 0.5" in capsys.readouterr().err
    assert load_run_dir(run_dir)[0] == config


def test_fresh_run_into_checkpointed_dir_is_refused(interrupted):
    config, _ = load_run_dir(interrupted["run"])
    with pytest.raises(ConfigError, match="already holds a run"):
        runner.run(config)


def test_total_timesteps_extension_only_with_constant_lr():
    from jaxvaco.host.run_dir import resume_conflicts

    config = TrainConfig(num_envs=8, num_steps=16, total_timesteps=1024, chunk_iterations=2)
    longer = dataclasses.replace(config, total_timesteps=2048)
    assert resume_conflicts(config, longer, 8) == ["--total-timesteps: 1024 -> 2048"]
    constant = dataclasses.replace(config, anneal_lr=False)
    assert resume_conflicts(constant, dataclasses.replace(longer, anneal_lr=False), 8) == []
    assert resume_conflicts(constant, dataclasses.replace(constant, total_timesteps=512), 8)


# ------------------------------------------------------------------ in-process runner.run


def poison_after(iteration: int, ent_coef: float):
    """make_train whose chunks turn params to NaN from `iteration` on, in runs with
    ent_coef above `ent_coef` (pure, inside jit)."""
    make_train = runner.make_train

    def make(config, layout=None, replay_delays=None):
        trainer = make_train(config, layout, replay_delays)

        def train_chunk(state, hp, n):
            state, sums = trainer.train_chunk(state, hp, n)
            bad = (state.iteration >= iteration) & (hp.ent_coef > ent_coef)
            params = jax.tree.map(lambda p: jnp.where(bad, jnp.nan, p), state.params)
            return state.replace(params=params), sums

        return trainer._replace(train_chunk=train_chunk)

    return make


def test_nan_guard_names_run_and_iteration_and_keeps_good_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "make_train", poison_after(5, 0.015))
    config = tiny(tmp_path)
    with pytest.raises(NonFiniteError) as error:
        runner.run(config, grid={"ent_coef": [0.01, 0.02]},
                   control=RunControl(checkpoint_every=1))
    message = str(error.value)
    assert "run 1 (seed 0, ent_coef=0.02): params" in message
    assert "iteration 5 " in message and "run 0" not in message
    assert "last good checkpoint: iteration 4" in message
    assert steps(tmp_path / "run") == [2, 4]
    arrays = final_arrays(tmp_path / "run")
    assert all(np.isfinite(a).all() for a in arrays.values() if a.dtype.kind == "f")
    assert len(metric_rows(tmp_path / "run")) == 2 * 2  # chunks up to iteration 4 × runs


def test_nan_guard_on_an_exploding_learning_rate(tmp_path):
    """Validation refuses an infinite learning rate, in the config and in a grid alike; a
    finite but absurd one (1e30) passes it and blows the parameters up, and the guard stops
    the run naming the run and the iteration."""
    with pytest.raises(ConfigError, match="grid value learning_rate = inf"):
        runner.run(tiny(tmp_path), grid={"learning_rate": [float("inf")]})
    with pytest.raises(NonFiniteError, match=r"iteration \d+ .*run 0 \(seed 0, "
                       r"learning_rate=1e\+30\).*(no checkpoint|last good checkpoint)"):
        runner.run(tiny(tmp_path), grid={"learning_rate": [1e30]})


def test_sinks_jsonl_tensorboard_and_wandb_offline(tmp_path, monkeypatch):
    """Rows go to every sink; a resumed JSONL sink drops rows past the checkpoint."""
    pytest.importorskip("tensorboardX")
    pytest.importorskip("wandb")
    from jaxvaco.host.run_folder import read_rows
    from jaxvaco.host.sinks import open_sinks

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    runs = [{"seed": 0}, {"seed": 1}]

    def rows(chunk):
        return [{"chunk": chunk, "env_steps": 128 * chunk, "run": r, "seed": r, "loss/value": 1.0,
                 "episode/return": None} for r in range(2)]

    with open_sinks(tmp_path, {"env": "CartPole-v1"}, runs, tensorboard=True, wandb=True,
                    wandb_project="test", resume=None) as sinks:
        sinks.write(rows(1), {"env_steps": 128, "sps": 1.0})
        checkpoint_bytes = sinks.jsonl.sync()
        sinks.write(rows(2), {"env_steps": 256, "sps": 1.0})
    with open_sinks(tmp_path, {}, runs, tensorboard=True, wandb=False, wandb_project="test",
                    resume=(checkpoint_bytes, 128)) as sinks:
        sinks.write(rows(2), {"env_steps": 256, "sps": 1.0})
    path = tmp_path / "metrics.jsonl"
    assert read_rows(path, path.stat().st_size) == rows(1) + rows(2)
    for label in ("seed0", "seed1"):
        assert len(list((tmp_path / "tensorboard" / label).glob("events.out.tfevents.*"))) == 2
    assert (tmp_path / "wandb-id").read_text()
    assert list((tmp_path / "wandb").glob("offline-run-*"))

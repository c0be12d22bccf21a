"""Asynchronous actors and learner (`jaxvaco.host.asynchronous`) and the replay of their lag.

The thread pieces are tested here in-process. The runs need 2 devices (actor on one,
learner on the other), which CPU JAX only simulates when
XLA_FLAGS=--xla_force_host_platform_device_count=2 is set before it starts; so they run
once in a subprocess (`python tests/test_asynchronous.py`, this file's `worker`) that
prints its findings as JSON, and the tests below assert on them. Every wait in the
worker is bounded, and the subprocess has a timeout: a hang fails the test.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from jaxvaco.core.config import AsyncConfig, ConfigError, EvalConfig, LagConfig, TrainConfig
from jaxvaco.core.validation import validate
from jaxvaco.host.asynchronous.channels import (
    AsyncWorkerError,
    Item,
    ParameterStore,
    Supervisor,
    TrajectoryQueue,
    one_line,
)

ITERATIONS = 12


def tiny(**changes) -> TrainConfig:
    """CartPole, 8 envs × 16 steps, 12 iterations of 2 epochs × 2 minibatches, async."""
    options = {"chunk_iterations": 2, "asynchronous": AsyncConfig(enabled=True), **changes}
    return TrainConfig(env="CartPole-v1", num_envs=8, num_steps=16,
                       total_timesteps=8 * 16 * ITERATIONS, update_epochs=2, num_minibatches=2,
                       hidden_sizes=(16, 16), progress=False,
                       eval=EvalConfig(every_chunks=0, num_episodes=4), **options)


# ---- the thread pieces -------------------------------------------------------------------

def test_store_gives_the_newest_version():
    store = ParameterStore("θ0", 0)
    assert store.latest() == ("θ0", 0)
    store.publish("θ3", 3)
    assert store.latest() == ("θ3", 3)


def test_queue_is_bounded_fifo_and_gives_up_on_stop():
    stop = threading.Event()
    q = TrajectoryQueue(2, stop, poll_s=0.01)
    assert q.put(Item("a", 0, None, 0)) and q.put(Item("b", 1, None, 0))
    blocked = []
    thread = threading.Thread(target=lambda: blocked.append(q.put(Item("c", 2, None, 0))))
    thread.start()
    time.sleep(0.1)
    assert thread.is_alive()  # full: the third put waits
    stop.set()
    thread.join(2)
    assert blocked == [False]  # and gives up once stopped, unqueued
    assert [q.get(1, lambda: None).trajectory for _ in range(2)] == ["a", "b"]


def test_queue_get_times_out_and_reports_a_failed_worker():
    stop = threading.Event()
    q = TrajectoryQueue(1, stop, poll_s=0.01)
    with pytest.raises(TimeoutError, match="no trajectory"):
        q.get(0.05, lambda: None)

    def failed():
        raise AsyncWorkerError("actor 0 failed")

    with pytest.raises(AsyncWorkerError, match="actor 0"):
        q.get(10, failed)


def test_supervisor_reports_the_first_failure_in_one_line_and_stops_all():
    supervisor = Supervisor()
    waited = threading.Event()

    def waits(stop):
        stop.wait(10)
        waited.set()

    def fails(stop):
        raise ValueError("bad shape\nsecond line")

    supervisor.start("actor 1", waits)
    supervisor.start("actor 2", fails)
    assert waited.wait(5)  # the failure set the stop event: the waiting worker ended
    with pytest.raises(AsyncWorkerError) as caught:
        supervisor.check()
    assert str(caught.value) == "actor 2 failed: ValueError: bad shape"
    supervisor.close(timeout_s=5)
    assert not [t for t in threading.enumerate() if t.name.startswith("actor ")]


@pytest.mark.parametrize("stale, used", [("drop", [0, 1]), ("use", [1])])
def test_pop_drops_or_uses_trajectories_beyond_max_lag(stale, used):
    """At T = 6 with max lag 2: version 0 (lag 6) is dropped or used; each pop is a line."""
    from jaxvaco.host.asynchronous.trainer import AsyncTrainer

    trainer = object.__new__(AsyncTrainer)  # only what `pop` reads
    trainer.options = AsyncConfig(enabled=True, max_lag=2, stale=stale)
    trainer.supervisor = Supervisor()
    trainer.queue = TrajectoryQueue(3, trainer.supervisor.stop, poll_s=0.01)
    trainer.lines = []
    for version in (0, 5):
        trainer.queue.put(Item(f"v{version}", version, None, 0))
    item, lag = trainer.pop(6)
    assert (item.version, lag) == ((5, 1) if stale == "drop" else (0, 6))
    assert [line["used"] for line in trainer.lines] == used
    assert [line["lag"] for line in trainer.lines] == [6, 1][:len(used)]


def test_one_line_without_message():
    assert one_line("learner", KeyError()) == "learner failed: KeyError"


@pytest.mark.parametrize("changes, words", [
    ({"num_seeds": 2}, "--num-seeds 1"),
    ({"lag": LagConfig(max_delay=2)}, "--lag.max-delay 0"),
    ({"asynchronous": AsyncConfig(enabled=True, learner_devices=3)}, "learner-devices"),
    ({"asynchronous": AsyncConfig(enabled=True, queue_size=0)}, "queue-size"),
])
def test_clear_config_errors(changes, words):
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        validate(dataclasses.replace(tiny(), **changes))


def test_replay_needs_a_run_folder(tmp_path):
    with pytest.raises(ConfigError, match="--lag.replay"):
        validate(dataclasses.replace(tiny(), asynchronous=AsyncConfig(),
                                     lag=LagConfig(mode="replay")))
    from jaxvaco.host.asynchronous.schedule import read_delays
    with pytest.raises(ConfigError, match="lag_schedule.csv"):
        read_delays(tmp_path)


# ---- runs on 2 devices (in the worker) -------------------------------------------------

def worker(root: str) -> dict:
    import jax

    from jaxvaco.host.asynchronous.trainer import AsyncTrainer
    from jaxvaco.host.run_dir import RunControl
    from jaxvaco.host.run_folder import RunFolder
    from jaxvaco.host.runner import run

    def train(name, config, **kwargs):
        config = dataclasses.replace(config, results_dir=root, run_name=name)
        return run(config, control=RunControl(checkpoint_every=1), **kwargs)

    found = {"devices": jax.device_count()}
    result = train("async", tiny())
    found["async"] = {"rows": [{k: row[k] for k in ("iteration", "lag/iterations",
                                                    "lag/sgd_steps", "lag/histogram",
                                                    "tv/backward")} for row in result.rows],
                      "schedule": RunFolder(result.run_dir).read_lag_schedule()}
    replay_config = tiny(num_seeds=2, chunk_iterations=1, asynchronous=AsyncConfig(),
                         lag=LagConfig(mode="replay", replay=str(result.run_dir)))
    replays = [train(f"replay{i}", replay_config) for i in range(2)]
    leaves = [jax.tree.leaves(r.state.params) for r in replays]
    found["replay"] = {
        "identical": all(bool(np.array_equal(a, b)) for a, b in zip(*leaves, strict=True)),
        "delays": [[row["lag/iterations"] for row in r.rows if row["run"] == 0] for r in replays],
        "seeds_differ": not np.array_equal(*np.asarray(leaves[0][0])),
    }
    found["two_learners"] = two_learner_devices(train)
    found["sigint"] = interrupt_and_resume(train, root)
    for name, method, calls in (("actor", "act", 6), ("learner", "learn_step", 5)):
        found[f"{name}_failure"] = inject_failure(train, root, AsyncTrainer, method, calls)
    found["threads_left"] = [t.name for t in threading.enumerate() if t.name.startswith("actor ")]
    return found


def two_learner_devices(train) -> dict:
    """One learner step on both devices against the same step on one, from the same state
    and trajectory; then a short run with --asynchronous.learner-devices 2."""
    import jax
    import jax.numpy as jnp

    from jaxvaco.core.train import make_train
    from jaxvaco.host.asynchronous.trainer import actor_collect, learner_program
    from jaxvaco.host.grid import hyperparams_from_config

    config = tiny()
    trainer, hp = make_train(config), hyperparams_from_config(config)
    state = trainer.init(jax.random.PRNGKey(0), hp)
    collect = jax.jit(functools.partial(actor_collect, trainer.setup))
    traj = collect(state.params, state.obs_stats, state.obs, state.env_state,
                   jax.random.PRNGKey(1))[2]
    params = []
    for devices in (jax.devices()[-1:], jax.devices()):
        program = learner_program(trainer.setup, devices)
        new, _ = program.step(jax.device_put(state, program.state), hp,
                              jax.device_put(traj, program.trajectory),
                              jax.device_put(state.params, program.state), jnp.int32(0))
        params.append(np.concatenate([np.ravel(x) for x in jax.tree.leaves(new.params)]))
    start = np.concatenate([np.ravel(x) for x in jax.tree.leaves(state.params)])
    result = train("two_learners", tiny(asynchronous=AsyncConfig(enabled=True,
                                                                 learner_devices=2)))
    return {"max_diff": float(np.abs(params[0] - params[1]).max()),
            "max_change": float(np.abs(params[0] - start).max()),
            "iterations": int(result.state.iteration[0]),
            "greedy_finite": bool(np.isfinite(result.summary["eval/greedy_return"]).all())}


def interrupt_and_resume(train, root) -> dict:
    """SIGINT once the first checkpoint exists (the host loop stops at a chunk boundary and
    checkpoints), then resume to the end."""
    import signal

    run_dir = os.path.join(root, "interrupted")

    def interrupt():
        while not os.path.isdir(os.path.join(run_dir, "checkpoints", "2")):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    stopped = train("interrupted", tiny())
    resumed = train("interrupted", tiny(), resume=run_dir)
    return {"signal": stopped.stop_signal, "stopped_at": int(stopped.state.iteration[0]),
            "resumed_to": int(resumed.state.iteration[0]),
            "iterations_logged": sorted({row["iteration"] for row in resumed.rows})}


def inject_failure(train, root, cls, method, fail_on_call) -> dict:
    """Make the `fail_on_call`-th call of `cls.method` raise; the error and what is kept."""
    original, calls, lock = getattr(cls, method), [0], threading.Lock()

    def failing(self, *args):
        with lock:
            calls[0] += 1
            if calls[0] == fail_on_call:
                raise RuntimeError(f"injected {method} failure")
        return original(self, *args)

    setattr(cls, method, failing)
    try:
        train(f"fail_{method}", tiny(chunk_iterations=1))
        return {"error": None}
    except AsyncWorkerError as error:
        folder = os.path.join(root, f"fail_{method}", "checkpoints")
        return {"error": str(error),
                "checkpoints": sorted(int(p) for p in os.listdir(folder) if p.isdigit())}
    finally:
        setattr(cls, method, original)


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu", JAX_DISABLE_MOST_OPTIMIZATIONS="1")
    proc = subprocess.run([sys.executable, __file__, str(tmp_path_factory.mktemp("async"))],
                          env=env, capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_two_learner_devices_update_as_one(found):
    """Split over 2 devices (global shuffle, averaged gradients), the learner's update is
    the one-device update up to float rounding; a run with 2 learner devices completes."""
    two = found["two_learners"]
    assert two["max_change"] > 1e-4  # the step moved the parameters
    assert two["max_diff"] <= 1e-5 * max(1.0, two["max_change"]) + 1e-6, two
    assert two["iterations"] == ITERATIONS and two["greedy_finite"]


def test_async_run_logs_a_nonzero_lag_distribution(found):
    assert found["devices"] == 2
    rows, lines = found["async"]["rows"], found["async"]["schedule"]
    assert [line["iteration"] for line in lines] == list(range(ITERATIONS))  # none lost
    assert all(line["lag"] == line["iteration"] - line["version"] >= 0 for line in lines)
    assert any(line["lag"] > 0 for line in lines)
    assert max(row["lag/iterations"] for row in rows) > 0
    for row, pair in zip(rows, zip(lines[::2], lines[1::2], strict=True), strict=True):
        lags = [line["lag"] for line in pair]
        assert row["lag/iterations"] == pytest.approx(np.mean(lags))
        assert sum(row["lag/histogram"]) == 2 and len(row["lag/histogram"]) == max(lags) + 1
        updates = 2 * 2
        assert row["lag/sgd_steps"] == pytest.approx(np.mean(lags) * updates + (updates - 1) / 2)
    assert any(row["tv/backward"] > 0 for row in rows)


def test_replay_reproduces_the_recorded_delays_deterministically(found):
    replay, lines = found["replay"], found["async"]["schedule"]
    assert replay["identical"]
    recorded = [float(line["lag"]) for line in lines]
    assert replay["delays"][0] == replay["delays"][1] == recorded
    assert replay["seeds_differ"]  # vmapped over 2 seeds, which are different runs


def test_sigint_checkpoints_and_resume_continues(found):
    sigint = found["sigint"]
    assert sigint["signal"] == 2 and 0 < sigint["stopped_at"] < ITERATIONS
    assert sigint["resumed_to"] == ITERATIONS
    assert sigint["iterations_logged"] == list(range(2, ITERATIONS + 1, 2))


@pytest.mark.parametrize("name, thread", [("actor", "actor 0"), ("learner", "learner")])
def test_injected_failure_stops_with_one_line_naming_the_thread(found, name, thread):
    failure = found[f"{name}_failure"]
    assert failure["error"] is not None
    assert "\n" not in failure["error"]
    assert failure["error"].startswith(f"{thread}")
    assert f"injected {'act' if name == 'actor' else 'learn_step'} failure" in failure["error"]
    assert failure["checkpoints"], "the last checkpoint is kept"
    assert not found["threads_left"]


@pytest.mark.slow
def test_cli_async_cartpole_is_solved(tmp_path):
    """`jaxvaco train --asynchronous.enabled` on 2 simulated devices: greedy return ≥ 475
    after 50k steps, with a non-zero lag distribution (about 60 s cold)."""
    from tests.processes import process

    outcome = process(["train", "--env", "CartPole-v1", "--algo", "ppo", "--num-envs", "8",
                       "--num-steps", "64", "--total-timesteps", "50000",
                       "--asynchronous.enabled", "--results-dir", str(tmp_path),
                       "--run-name", "solved", "--no-progress"],
                      env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2",
                           "JAX_DISABLE_MOST_OPTIMIZATIONS": "0"})
    assert outcome.status == 0, outcome.err
    rows = [json.loads(line) for line in (tmp_path / "solved" / "metrics.jsonl").open()]
    assert rows[-1]["eval/greedy_return"] >= 475
    assert any(sum(row["lag/histogram"][1:]) for row in rows)


if __name__ == "__main__":
    print(json.dumps(worker(sys.argv[1])))

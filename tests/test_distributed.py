"""Training over a device mesh (`jaxvaco.core.distributed`).

The multi-device checks need 4 devices, which on CPU JAX only simulates when
XLA_FLAGS=--xla_force_host_platform_device_count=4 is set before it starts; so they run
once in a subprocess (`python tests/test_distributed.py`, this file's `worker`) that prints
its findings as JSON, and the tests below assert on them. The pytest process keeps its
single device, which the error-message tests use.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from jaxvaco.core.config import (
    ConfigError,
    DistributedConfig,
    EvalConfig,
    LagConfig,
    TrainConfig,
    VacoConfig,
)

DEVICES = 4
SYNC_MODEL_CASES = ((3, True), (4, False))


def tiny(**dist) -> TrainConfig:
    """8 envs × 16 steps, 2 epochs × 2 minibatches."""
    return TrainConfig(env="CartPole-v1", num_envs=8, num_steps=16, total_timesteps=8 * 16 * 8,
                       update_epochs=2, num_minibatches=2, hidden_sizes=(16, 16),
                       progress=False, eval=EvalConfig(every_chunks=0, num_episodes=4),
                       distributed=DistributedConfig(**dist))


def sync_model_run(interval: int, stagger: bool, steps: int) -> dict:
    """The `delayed_sync` LagModel alone over 4 devices, on a toy pytree with θ_T = T: per
    iteration, each device's behaviour parameters and delay (run in the worker)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec

    from jaxvaco.core.distributed import AXIS, delayed_sync, make_mesh

    config = tiny(num_devices=DEVICES, sync_interval=interval, stagger=stagger)
    model = delayed_sync(config.distributed, AXIS)
    theta = lambda t: {"w": jnp.full((2,), t, jnp.float32), "b": jnp.asarray(t, jnp.float32)}  # noqa: E731

    def run(actors):
        def step(actors, t):
            got = model.behaviour(actors, theta(t), t, jax.random.PRNGKey(0), jnp.int32(0))
            return got.state, (jax.tree.map(lambda x: x[None], got.params), got.delays)

        return jax.lax.scan(step, actors, jnp.arange(steps))[1]

    per_step = PartitionSpec(None, AXIS)  # [steps, D, ...]
    run = jax.shard_map(run, mesh=make_mesh(config), in_specs=PartitionSpec(AXIS),
                        out_specs=per_step)
    params, delays = jax.jit(run)(model.init(theta(0)))
    return {"w": np.asarray(params["w"]).tolist(), "b": np.asarray(params["b"]).tolist(),
            "delays": np.asarray(delays).tolist()}


def worker() -> dict:
    """Run in a 4-device subprocess; every check returns plain numbers for the parent."""
    import jax
    import jax.numpy as jnp

    from jaxvaco.core.distributed import layout, sync_delay
    from jaxvaco.core.train import make_train
    from jaxvaco.host.grid import hyperparams_from_config
    from jaxvaco.lab.results import FRACTIONS

    jax.config.update("jax_disable_most_optimizations", True)
    out: dict = {"devices": jax.device_count()}
    key = jax.random.PRNGKey(0)
    out["sync_model"] = {f"{s},{stagger}": sync_model_run(s, stagger, steps=8)
                         for s, stagger in SYNC_MODEL_CASES}

    # S = 1: 4 devices equal 1 device, with 2 minibatches per epoch (the "global" shuffle),
    # advantage normalisation on, and VACO's batch filter firing (δ small).
    leaves = lambda tree: [np.asarray(x) for x in jax.tree.leaves(tree)]  # noqa: E731
    max_diff = lambda a, b: max(float(np.abs(x - y).max())  # noqa: E731
                                for x, y in zip(leaves(a), leaves(b), strict=True))
    for name, changes in (("ppo", {}), ("vaco", {"algo": "vaco", "vaco": VacoConfig(delta=1e-4)})):
        results = {}
        for devices in (1, DEVICES):
            config = dataclasses.replace(tiny(num_devices=devices), **changes)
            trainer, hp = make_train(config), hyperparams_from_config(config)
            state = jax.jit(trainer.init)(key, hp)
            results[devices] = (state, *jax.jit(trainer.train_chunk)(state, hp, jnp.int32(3)))
        (start, one, one_sums), (_, four, four_sums) = results[1], results[DEVICES]
        out[name] = {
            "params_max_diff": max_diff(one.params, four.params),
            "params_change": max_diff(start.params, one.params),
            "obs_diff": float(np.abs(np.asarray(one.obs) - np.asarray(four.obs)).max()),
            "return_sums": [float(one_sums["episode/return_sum"]),
                            float(four_sums["episode/return_sum"])],
            "filter_fraction": float(four_sums[FRACTIONS[name]]),
        }
        if name == "ppo":
            ppo_four, ppo_sums = four, four_sums
    config = tiny(num_devices=DEVICES, shuffle="local")
    local, hp = make_train(config), hyperparams_from_config(config)
    local_state, _ = jax.jit(local.train_chunk)(jax.jit(local.init)(key, hp), hp, jnp.int32(3))
    out["local_shuffle_differs"] = max_diff(ppo_four.params, local_state.params)

    out["replicas_identical"] = all(
        all(np.array_equal(np.asarray(s.data), np.asarray(x.addressable_shards[0].data))
            for s in x.addressable_shards)
        for x in jax.tree.leaves((four.params, four.opt_state, local_state.params)))
    out["sync1"] = {k: float(ppo_sums[k]) for k in ("lag/iterations", "tv/backward")}

    # S = 3 staggered: after each iteration, device d's actors hold θ_t of its last refresh t.
    config = tiny(num_devices=DEVICES, sync_interval=3, stagger=True)
    trainer = make_train(config)
    chunk = jax.jit(trainer.train_chunk)
    state = jax.jit(trainer.init)(key, hp)
    learner, lag_sum, tv_sum, exact = [state.params], 0.0, 0.0, True
    for t in range(6):
        state, sums = chunk(state, hp, jnp.int32(1))
        lag_sum += float(sums["lag/iterations"])
        tv_sum += float(sums["tv/backward"])
        for d in range(DEVICES):
            last = max(s for s in range(t + 1) if int(sync_delay(s, d, config.distributed)) == 0)
            actor = jax.tree.map(lambda a, d=d: a[d], state.lag)
            exact &= all(np.array_equal(a, b) for a, b in zip(leaves(actor),
                                                             leaves(learner[last]), strict=True))
        learner.append(state.params)
    expected = np.mean([[min((t + d) % 3, t) for d in range(DEVICES)] for t in range(6)], 1)
    out["sync3"] = {"actors_exact": exact, "lag_sum": lag_sum, "tv_sum": tv_sum,
                    "expected_lag_sum": float(expected.sum())}

    # Seeds over devices: sharding the runs axis changes nothing but placement.
    config = dataclasses.replace(tiny(num_devices=DEVICES, axis="seeds"), num_seeds=DEVICES)
    trainer = make_train(config)
    keys = jax.random.split(key, DEVICES)
    hps = jax.tree.map(lambda x: jnp.stack([x] * DEVICES), hp)
    chunk = jax.jit(jax.vmap(trainer.train_chunk, in_axes=(0, 0, None)))
    init = jax.vmap(trainer.init)
    placed = jax.jit(init, out_shardings=layout(config).runs_sharding)(keys, hps)
    plain, _ = chunk(jax.jit(init)(keys, hps), hps, jnp.int32(2))
    spread, _ = chunk(placed, hps, jnp.int32(2))
    out["seeds_devices"] = len(spread.obs.sharding.device_set)
    out["seeds_max_diff"] = max(float(np.abs(a - b).max())
                                for a, b in zip(leaves(plain.params), leaves(spread.params),
                                                strict=True))
    return out


def multihost_worker(process_id: int, port: int) -> float:
    """One of two processes on loopback: initialize, then psum over a 2-device global mesh."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    from jaxvaco.core.distributed import AXIS, initialize

    initialize(DistributedConfig(multihost=True, coordinator_address=f"localhost:{port}",
                                 num_processes=2, process_id=process_id))
    mesh = jax.make_mesh((jax.device_count(),), (AXIS,),
                         axis_types=(jax.sharding.AxisType.Auto,))
    local = jnp.full((1,), process_id + 1.0)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec(AXIS)), local)
    total = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, AXIS), mesh=mesh,
                                  in_specs=PartitionSpec(AXIS), out_specs=PartitionSpec()))(x)
    return float(total.addressable_data(0)[0])


@pytest.fixture(scope="module")
def found() -> dict:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}",
               JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("algo", ["ppo", "vaco"])
def test_four_devices_equal_one_device(found, algo):
    """S = 1, 2 minibatches: the same run up to reduction order, and the run did learn."""
    result = found[algo]
    assert found["devices"] == DEVICES
    assert result["params_change"] > 1e-3
    assert result["params_max_diff"] < 1e-5
    assert result["obs_diff"] == 0.0
    assert result["return_sums"][0] == result["return_sums"][1]


def test_vaco_batch_filter_fired_in_equivalence_run(found):
    assert found["vaco"]["filter_fraction"] > 0


def test_learner_identical_on_every_device(found):
    assert found["replicas_identical"]


def test_local_shuffle_is_a_different_update(found):
    """Per-device shuffles pick other minibatches, so the run departs from the global one."""
    assert found["local_shuffle_differs"] > 1e-4


def test_sync_every_iteration_has_no_lag(found):
    """No lag: β = π_T, so the backward TV is 0 up to float rounding (the two log-probs
    come out of different fusions; today's jaxlib leaves ~1e-9)."""
    assert found["sync1"]["lag/iterations"] == 0.0
    assert found["sync1"]["tv/backward"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("interval, stagger", SYNC_MODEL_CASES)
def test_delayed_sync_acts_with_the_params_of_the_last_refresh(found, interval, stagger):
    """The LagModel on a toy pytree (θ_T = T): device d gets θ of its last refresh, a
    plain-Python simulation of the copies (refreshed when (T + d·stagger) mod S = 0,
    θ_0 before), and its delay says how old that is."""
    got = found["sync_model"][f"{interval},{stagger}"]
    held = [0] * DEVICES
    for t in range(len(got["b"])):
        for d in range(DEVICES):
            if (t + (d if stagger else 0)) % interval == 0:
                held[d] = t
        assert got["b"][t] == held and got["w"][t] == [[h, h] for h in held]
        assert got["delays"][t] == [t - h for h in held]


def test_actors_hold_learner_params_of_last_refresh(found):
    assert found["sync3"]["actors_exact"]


def test_sync_interval_raises_lag(found):
    sync3 = found["sync3"]
    assert sync3["lag_sum"] == pytest.approx(sync3["expected_lag_sum"])
    assert sync3["lag_sum"] > 0 and sync3["tv_sum"] > 0


def test_seeds_over_devices(found):
    assert found["seeds_devices"] == DEVICES
    assert found["seeds_max_diff"] < 1e-5


@pytest.mark.parametrize("changes, words", [
    (dict(num_envs=6, num_minibatches=1), "divisible by --distributed.num-devices"),
    (dict(num_minibatches=4), "must divide the envs per device"),
    (dict(lag=LagConfig(max_delay=2)), "exclusive"),
    (dict(num_seeds=3, distributed=DistributedConfig(num_devices=4, axis="seeds")),
     "multiple of --distributed.num-devices"),
])
def test_clear_config_errors(changes, words):
    from jaxvaco.core.validation import validate

    with pytest.raises(ConfigError, match=words):
        validate(dataclasses.replace(tiny(num_devices=DEVICES), **changes))


def test_multihost_initialize_and_psum_on_loopback():
    """Two CPU processes (gloo collectives): each contributes process_id + 1, psum = 3."""
    import socket

    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    procs = [subprocess.Popen([sys.executable, __file__, "multihost", str(i), str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (stdout, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr[-3000:]
        assert float(stdout.strip().splitlines()[-1]) == 3.0


def test_more_devices_than_present():
    from jaxvaco.core.train import make_train

    with pytest.raises(ConfigError, match="more than the 1 devices"):
        make_train(tiny(num_devices=2))


if __name__ == "__main__":
    if sys.argv[1:2] == ["multihost"]:
        print(multihost_worker(int(sys.argv[2]), int(sys.argv[3])))
    else:
        print(json.dumps(worker()))

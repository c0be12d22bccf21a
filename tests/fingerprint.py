"""Fingerprints of short, seeded training runs: the refactor guard of issue 12.

`python -m tests.fingerprint` records, for every configuration in `CASES`, the metrics
summed over two chunks and a checksum of the final parameters into
`tests/data/fingerprint.json`. `tests/test_fingerprint.py` reruns the cases on the code
as it is and compares. The file was recorded on the code *before* the trainer was split
into stages (commit b8e010b); a case whose numbers were changed on purpose says so in
`CHANGED`, with the reason, and is compared against a re-recording instead.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxvaco.core.config import EvalConfig, LagConfig, TrainConfig
from jaxvaco.core.train import make_train
from jaxvaco.host.grid import hyperparams_from_config

PATH = Path(__file__).parent / "data" / "fingerprint.json"
LAG = LagConfig(max_delay=2, mode="uniform", num_groups=2)


def base(**changes) -> TrainConfig:
    """The recorded cases' configuration. The defaults they ran under before the tuned
    defaults (issue 30) are pinned here (ε 0.2, c_e 0.01, the recorded critic for PPO,
    PPO-KL and SPO, target KL 0.01, δ 0.2), so that the fingerprints keep testing the same
    computation."""
    config = TrainConfig(env="CartPole-v1", num_envs=8, num_steps=16,
                         total_timesteps=8 * 16 * 4, update_epochs=4, num_minibatches=2,
                         hidden_sizes=(16, 16), learning_rate=3e-2, progress=False,
                         chunk_iterations=2, lag=LAG, clip_coef=0.2, ent_coef=0.01,
                         eval=EvalConfig(every_chunks=0, num_episodes=4))
    config = dataclasses.replace(
        config, ppo=dataclasses.replace(config.ppo, critic="behaviour"),
        ppo_kl=dataclasses.replace(config.ppo_kl, critic="behaviour", target_kl=0.01),
        spo=dataclasses.replace(config.spo, critic="behaviour"),
        vaco=dataclasses.replace(config.vaco, delta=0.2))
    return dataclasses.replace(config, **changes)


def _replace(group: str, **changes):
    return lambda c: dataclasses.replace(c, **{group: dataclasses.replace(getattr(c, group),
                                                                          **changes)})


# name -> (algo, tweak of the config): the old option spellings, translated by `translate`.
CASES = {
    "ppo": ("ppo", {}),
    "ppo_no_lag": ("ppo", {"lag": None}),
    "ppo_values": ("ppo", {"ppo": {"advantages": "values"}}),
    "ppo_decoupled_gae": ("ppo", {"ppo": {"anchor": "learner"}}),
    "ppo_decoupled_vtrace": ("ppo", {"ppo": {"anchor": "learner", "advantages": "vtrace"}}),
    "ppo_kl": ("ppo_kl", {}),
    "spo": ("spo", {}),
    "impala": ("impala", {}),
    "vaco": ("vaco", {}),
    "vaco_spec": ("vaco", {"vaco": {"anchor": "learner", "align": "vtrace",
                                    "advantage_form": "weighted"}}),
    "vaco_sample": ("vaco", {"vaco": {"filter": "sample", "delta": 0.05}}),
    "vaco_batch_tight": ("vaco", {"vaco": {"delta": 0.02}}),
}


def make_config(name: str, translate=None) -> TrainConfig:
    algo, tweak = CASES[name]
    config = base(algo=algo)
    for group, changes in tweak.items():
        if changes is None:
            config = dataclasses.replace(config, lag=LagConfig())
            continue
        if translate is not None:
            group, changes = translate(group, dict(changes))
        config = _replace(group, **changes)(config)
    return config


def fingerprint(config: TrainConfig) -> dict:
    """Metrics summed over two chunks of two iterations, and Σ|θ| of the final params."""
    trainer = make_train(config)
    hp = hyperparams_from_config(config)
    state = jax.jit(trainer.init)(jax.random.PRNGKey(3), hp)
    chunk = jax.jit(trainer.train_chunk)
    totals: dict[str, float] = {}
    for _ in range(2):
        state, sums = chunk(state, hp, jnp.int32(2))
        for key, value in sums.items():
            totals[key] = totals.get(key, 0.0) + float(np.asarray(value))
    totals["params/abs_sum"] = float(sum(np.abs(np.asarray(x, np.float64)).sum()
                                         for x in jax.tree.leaves(state.params)))
    return totals


def main(names: list[str]) -> None:
    recorded = json.loads(PATH.read_text()) if PATH.exists() else {}
    for name in names or list(CASES):
        recorded[name] = fingerprint(make_config(name))
        print(name, recorded[name]["params/abs_sum"])
    PATH.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

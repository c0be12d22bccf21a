"""Delayed parameter sync across devices: sweep the sync interval S (docs/concepts/spec.md §1.1).

PPO on CartPole-v1, data-parallel over D simulated CPU devices; the actors on each device
refresh their parameters from the learner every S iterations (staggered, like
asynchronous workers). Writes a CSV (one row per S and seed) and a markdown table of the
final return, lag/iterations and tv/backward, means over seeds.

    python experiments/sync_sweep.py                      # S ∈ {1, 2, 4, 8}, 4 devices
    python experiments/sync_sweep.py --intervals 1 4 --seeds 2 --total 65536

The device count must be fixed before JAX starts, so this script sets XLA_FLAGS itself.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from jaxvaco.lab.results import write_rows

FIELDS = ["sync_interval", "seed", "final_return", "lag/iterations", "tv/backward"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--total", type=float, default=2e5, help="env steps per seed")
    parser.add_argument("--out", type=Path, default=Path("experiments/results/sync_sweep"))
    return parser.parse_args()


def sweep_config(interval: int, args: argparse.Namespace):
    from jaxvaco.core.config import DistributedConfig, PPOConfig, TrainConfig

    return TrainConfig(env="CartPole-v1", num_envs=32, num_steps=64,
                       total_timesteps=int(args.total), update_epochs=4, num_minibatches=2,
                       learning_rate=1e-3, num_seeds=args.seeds, progress=False,
                       clip_coef=0.2, ent_coef=0.01,  # the defaults before issue 30, pinned
                       ppo=PPOConfig(critic="behaviour"),
                       distributed=DistributedConfig(num_devices=args.devices,
                                                     sync_interval=interval, stagger=True))


def run_interval(interval: int, args: argparse.Namespace) -> list[dict]:
    """Train every seed with sync interval S; one row per seed."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxvaco.host.runner import expand_runs, make_train

    config = sweep_config(interval, args)
    trainer = make_train(config)
    keys = jax.random.split(jax.random.PRNGKey(0), args.seeds)
    _, _, hp = expand_runs(config)  # the config's hyperparameters, one row per seed
    chunk = jax.jit(jax.vmap(trainer.train_chunk, in_axes=(0, 0, None)))
    state = jax.jit(jax.vmap(trainer.init))(keys, hp)
    n = config.num_iterations
    first, last = n - n // 5, n // 5  # the last fifth of training gives the final return
    state, early = chunk(state, hp, jnp.int32(first))
    state, late = chunk(state, hp, jnp.int32(last))
    total = {k: np.asarray(early[k]) + np.asarray(late[k]) for k in early}
    final = np.asarray(late["episode/return_sum"]) / np.maximum(late["episode/count"], 1)
    return [{"sync_interval": interval, "seed": s, "final_return": float(final[s]),
             "lag/iterations": float(total["lag/iterations"][s] / n),
             "tv/backward": float(total["tv/backward"][s] / n)} for s in range(args.seeds)]


def markdown(rows: list[dict], intervals: list[int]) -> str:
    """Means ± standard deviations over seeds, one line per S."""
    import numpy as np

    lines = ["| S | final return | lag/iterations | tv/backward |", "|---|---|---|---|"]
    for interval in intervals:
        mine = [r for r in rows if r["sync_interval"] == interval]
        cells = []
        for name, fmt in (("final_return", ".1f"), ("lag/iterations", ".2f"),
                          ("tv/backward", ".4f")):
            values = np.array([r[name] for r in mine])
            cells.append(f"{values.mean():{fmt}} ± {values.std():{fmt}}")
        lines.append(f"| {interval} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parse_args()
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
    rows = [row for interval in args.intervals for row in run_interval(interval, args)]
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "sync_sweep.csv", rows, FIELDS)
    table = markdown(rows, args.intervals)
    (args.out / "sync_sweep.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()

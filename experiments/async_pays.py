"""Does lag pay? Asynchronous actors and learner against the synchronous loop.

For each algorithm, one synchronous run (the compiled loop, one device) and one
asynchronous run (`--asynchronous.enabled`: actor on device 0, learner on device 1) of
the same configuration, side by side in this process, and their ratios:

  env-steps/s   the learner's env steps per second, compilation excluded (async / sync)
  time to R     wall seconds (compilation included, as a user waits) until a chunk's mean
                training return first reaches --threshold (sync / async: > 1 = async faster)
  train t→R     the same, counted from the end of the first chunk (which holds compiling;
                --chunk-iterations sets the granularity, 2 by default)
  final return  the last evaluation's greedy return

The 2 devices are simulated on the CPU (XLA_FLAGS, set below before JAX starts), so
actor and learner share the same cores: this measures what overlapping collection with
learning gives on this machine, not on two accelerators.

    python experiments/async_pays.py                       # ppo and vaco, CartPole-v1
    python experiments/async_pays.py --algos ppo --total-timesteps 100000 --threshold 450
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import argparse  # noqa: E402
import tempfile  # noqa: E402

from jaxvaco.config import AsyncConfig, EvalConfig, TrainConfig  # noqa: E402
from jaxvaco.runner import RunControl, run  # noqa: E402


def config(algo: str, args: argparse.Namespace, asynchronous: bool) -> TrainConfig:
    return TrainConfig(env=args.env, algo=algo, total_timesteps=args.total_timesteps,
                       num_envs=args.num_envs, num_steps=args.num_steps, seed=args.seed,
                       chunk_iterations=args.chunk_iterations,
                       progress=False, results_dir=args.results_dir,
                       run_name=f"{algo}_{'async' if asynchronous else 'sync'}",
                       eval=EvalConfig(every_chunks=0, num_episodes=16),
                       asynchronous=AsyncConfig(enabled=asynchronous))


def measure(cfg: TrainConfig, threshold: float) -> dict:
    """env-steps/s, wall seconds to the first chunk whose mean training return ≥ threshold
    (None: never), the final greedy return and the mean lag."""
    result = run(cfg, control=RunControl(checkpoint_every=0))
    hit = next((row for row in result.rows if (row["episode/return"] or 0.0) >= threshold),
               None)
    lags = [row["lag/iterations"] for row in result.rows]
    return {"sps": float(result.summary["sps"]),
            "time_to_threshold": hit and hit["wall_time"],
            "train_time_to_threshold": hit and hit["wall_time"] - result.rows[0]["wall_time"],
            "greedy": float(result.summary["eval/greedy_return"][0]),
            "mean_lag": sum(lags) / len(lags)}


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["ppo", "vaco"])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--total-timesteps", type=int, default=60_000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=64)
    parser.add_argument("--threshold", type=float, default=400.0)
    parser.add_argument("--chunk-iterations", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results-dir", default=tempfile.mkdtemp(prefix="async_pays_"))
    args = parser.parse_args(argv)
    print(f"{'algo':6} {'sps sync':>9} {'sps async':>9} {'ratio':>6} {'t→R sync':>9} "
          f"{'t→R async':>9} {'speed-up':>8} {'train t→R s/a':>15} {'speed-up':>8} "
          f"{'greedy s/a':>12} {'lag':>5}")
    for algo in args.algos:
        sync, asyn = (measure(config(algo, args, a), args.threshold) for a in (False, True))
        fmt = lambda t: f"{t:9.1f}" if t is not None else f"{'never':>9}"  # noqa: E731
        print(f"{algo:6} {sync['sps']:9.0f} {asyn['sps']:9.0f} "
              f"{ratio(asyn['sps'], sync['sps']):>6} {fmt(sync['time_to_threshold'])} "
              f"{fmt(asyn['time_to_threshold'])} "
              f"{ratio(sync['time_to_threshold'], asyn['time_to_threshold']):>8} "
              f"{fmt(sync['train_time_to_threshold'])[2:]}/"
              f"{fmt(asyn['train_time_to_threshold'])[2:]} "
              f"{ratio(sync['train_time_to_threshold'], asyn['train_time_to_threshold']):>8} "
              f"{sync['greedy']:5.0f}/{asyn['greedy']:<6.0f} {asyn['mean_lag']:5.2f}",
              flush=True)


if __name__ == "__main__":
    main()

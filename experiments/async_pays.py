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

Written to --json (experiments/results/async_pays/async_pays.json by default), which the
claim `async-pays` renders into the docs.

The 2 devices are simulated on the CPU (XLA_FLAGS, set below before JAX starts), so
actor and learner share the same cores: this measures what overlapping collection with
learning gives on this machine, not on two accelerators.

    python -m experiments.async_pays                       # ppo and vaco, CartPole-v1
    python -m experiments.async_pays --algos ppo --total-timesteps 100000 --threshold 450
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from experiments.async_tables import pays_table  # noqa: E402
from experiments.markdown import table as markdown_table  # noqa: E402
from experiments.startup import git_commit  # noqa: E402
from jaxvaco.core.config import AsyncConfig, EvalConfig, TrainConfig  # noqa: E402
from jaxvaco.host.runner import RunControl, run  # noqa: E402


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


OUT = Path(__file__).resolve().parent / "results" / "async_pays" / "async_pays.json"


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
    parser.add_argument("--json", type=Path, default=OUT,
                        help="the measurements, with the date, commit and load average")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    results = {algo: {("async" if a else "sync"): measure(config(algo, args, a), args.threshold)
                      for a in (False, True)} for algo in args.algos}
    print(markdown_table(pays_table(results)), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": git_commit(),
        "load": [round(load_start, 2), round(os.getloadavg()[0], 2)], "cpus": os.cpu_count(),
        "argv": sys.argv[1:] if argv is None else argv, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Does the simulator reproduce real asynchrony? Asynchronous runs against their replays
and against the simulator's `uniform` mode with the same mean lag.

For each algorithm (ppo is PPO-clip(L): the learner's critic, its default) × environment
and each seed s:

  async    `--asynchronous.enabled` (actor on device 0, learner on device 1), seed s
  replay   `--lag.mode replay` of that run's lag_schedule.csv, seed s (deterministic)
  uniform  `--lag.mode uniform --lag.max-delay K`, K = round(2·m), m the async runs' mean
           lag (U{0..K} has mean K/2), all seeds in one vmapped program

and the table: per arm, the mean over seeds and the 95% stratified-bootstrap CI
(`jaxvaco.analysis.stats.seed_mean_ci`) of the final greedy return and of the run's mean
tv/total, mean lag; "agree" says whether replay's and uniform's CIs overlap async's.

    python experiments/async_validation.py                     # 8 seeds, 2 algos, 2 envs
    python experiments/async_validation.py --seeds 2 --envs CartPole-v1 --total-timesteps 20000

Cost: one async and one replay run per seed, one uniform program per cell; on a shared
2-core CPU an 8-envs × 64-steps CartPole run of 20k steps takes about a minute with
compilation, so the default (2 × 2 × (8 + 8 + 1) runs) is about an hour.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import argparse  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

from jaxvaco.analysis.stats import seed_mean_ci  # noqa: E402
from jaxvaco.config import AsyncConfig, EvalConfig, LagConfig, TrainConfig  # noqa: E402
from jaxvaco.runner import RunControl, RunResult, run  # noqa: E402


def base(args: argparse.Namespace, env: str, algo: str, name: str, **changes) -> TrainConfig:
    return TrainConfig(env=env, algo=algo, total_timesteps=args.total_timesteps,
                       num_envs=args.num_envs, num_steps=args.num_steps, progress=False,
                       results_dir=args.results_dir, run_name=name,
                       eval=EvalConfig(every_chunks=0, num_episodes=16), **changes)


def figures(result: RunResult) -> dict[str, np.ndarray]:
    """Per run: final greedy return, mean tv/total and mean lag over the run's rows."""
    runs = len(result.runs)
    per_run = [[row for row in result.rows if row["run"] == r] for r in range(runs)]
    return {"greedy": np.asarray(result.summary["eval/greedy_return"], float),
            "tv": np.asarray([np.mean([row["tv/total"] for row in rows]) for rows in per_run]),
            "lag": np.asarray([np.mean([row["lag/iterations"] for row in rows])
                               for rows in per_run])}


def train(config: TrainConfig) -> dict[str, np.ndarray]:
    return figures(run(config, control=RunControl(checkpoint_every=0)))


def cell(args: argparse.Namespace, env: str, algo: str) -> dict[str, dict[str, np.ndarray]]:
    """The three arms of one algorithm × environment, each {figure: [seeds]}."""
    arms = {"async": [], "replay": []}
    for seed in range(args.seeds):
        name = f"{env}_{algo}_{seed}"
        arms["async"].append(train(base(args, env, algo, f"{name}_async", seed=seed,
                                        asynchronous=AsyncConfig(enabled=True))))
        replay = LagConfig(mode="replay", replay=os.path.join(args.results_dir, f"{name}_async"))
        arms["replay"].append(train(base(args, env, algo, f"{name}_replay", seed=seed,
                                         lag=replay)))
    stacked = {arm: {k: np.concatenate([run[k] for run in runs]) for k in runs[0]}
               for arm, runs in arms.items()}
    k = max(1, round(2 * float(stacked["async"]["lag"].mean())))
    stacked["uniform"] = train(base(args, env, algo, f"{env}_{algo}_uniform", seed=0,
                                    num_seeds=args.seeds,
                                    lag=LagConfig(max_delay=k, mode="uniform")))
    return stacked


def overlaps(a: tuple, b: tuple) -> bool:
    return a[1] <= b[2] and b[1] <= a[2]


def report(env: str, algo: str, arms: dict) -> None:
    ref = {k: seed_mean_ci(arms["async"][k]) for k in ("greedy", "tv")}
    for arm, values in arms.items():
        cis = {k: seed_mean_ci(values[k]) for k in ("greedy", "tv")}
        agree = "" if arm == "async" else (
            "yes" if all(overlaps(cis[k], ref[k]) for k in cis) else "no")
        (g, gl, gh), (t, tl, th) = cis["greedy"], cis["tv"]
        print(f"{env:12} {algo:5} {arm:8} {g:7.1f} [{gl:6.1f},{gh:6.1f}] "
              f"{t:.4f} [{tl:.4f},{th:.4f}] {values['lag'].mean():5.2f} {agree:>5}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["ppo", "vaco"])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1"])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--total-timesteps", type=int, default=20_000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=64)
    parser.add_argument("--results-dir", default=tempfile.mkdtemp(prefix="async_validation_"))
    args = parser.parse_args(argv)
    print(f"{'env':12} {'algo':5} {'arm':8} {'greedy [95% CI]':>22} {'tv/total [95% CI]':>24} "
          f"{'lag':>5} {'agree':>5}")
    for env in args.envs:
        for algo in args.algos:
            report(env, algo, cell(args, env, algo))


if __name__ == "__main__":
    main()

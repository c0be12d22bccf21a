"""Does the simulator reproduce real asynchrony? Asynchronous runs against their replays
and against the simulator's `uniform` mode with the same mean lag.

For each algorithm (ppo is PPO-clip(L): the learner's critic, its default) × environment
and each seed s:

  async    `--asynchronous.enabled` (actor on device 0, learner on device 1), seed s
  replay   `--lag.mode replay` of that run's lag_schedule.csv, seed s (deterministic)
  uniform  `--lag.mode uniform --lag.max-delay K`, K = round(2·m), m the async runs' mean
           lag (U{0..K} has mean K/2), all seeds in one vmapped program

and the table: per arm, the mean over seeds and the 95% stratified-bootstrap CI
(`jaxvaco.lab.stats.seed_mean_ci`) of the final greedy and training return and of the
run's mean tv/total, mean lag; "agree" says whether replay's and uniform's CIs overlap
async's on all three.

    python -m experiments.async_validation                     # 8 seeds, 2 algos, 2 envs
    python -m experiments.async_validation --seeds 2 --envs CartPole-v1 --out /tmp/v

Each run is appended to OUT/runs.csv as it ends (rerun the command to resume); the table
is printed after each cell and checked by the claim `async-validation`.

Cost: one async and one replay run per seed, one uniform program per cell; on a shared
2-core CPU (compilation cache warm after the first cell) a 20k-step run took about 10 s,
so the default (2 × 2 × (8 + 8 + 1) runs of 60k steps; Acrobot learns little in 20k) is
roughly half an hour.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import argparse  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from experiments.async_tables import paired_tv_table, validation_table  # noqa: E402
from experiments.markdown import table as markdown_table  # noqa: E402
from jaxvaco.core.config import AsyncConfig, EvalConfig, LagConfig, TrainConfig  # noqa: E402
from jaxvaco.host.runner import RunControl, RunResult, run  # noqa: E402
from jaxvaco.lab.results import append_rows, read_rows  # noqa: E402


def base(args: argparse.Namespace, env: str, algo: str, name: str, runs_dir: str,
         **changes) -> TrainConfig:
    return TrainConfig(env=env, algo=algo, total_timesteps=args.total_timesteps,
                       num_envs=args.num_envs, num_steps=args.num_steps, progress=False,
                       results_dir=runs_dir, run_name=name,
                       eval=EvalConfig(every_chunks=0, num_episodes=16), **changes)


def figures(result: RunResult) -> dict[str, np.ndarray]:
    """Per run: final greedy and training return, mean tv/total and mean lag over the run's
    rows."""
    runs = len(result.runs)
    per_run = [[row for row in result.rows if row["run"] == r] for r in range(runs)]
    return {"greedy": np.asarray(result.summary["eval/greedy_return"], float),
            "train": np.asarray(result.summary["train_return"], float),
            "tv": np.asarray([np.mean([row["tv/total"] for row in rows]) for rows in per_run]),
            "lag": np.asarray([np.mean([row["lag/iterations"] for row in rows])
                               for rows in per_run])}


def train(config: TrainConfig) -> dict[str, np.ndarray]:
    """One run from scratch: a folder left by a run that did not reach runs.csv is removed."""
    shutil.rmtree(Path(config.results_dir) / config.run_name, ignore_errors=True)
    return figures(run(config, control=RunControl(checkpoint_every=0)))


FIELDS = ["env", "algo", "arm", "seed", "k", "greedy", "train", "tv", "lag"]
"""One row per run of runs.csv: the arm's uniform K (0 for async and replay), the final
greedy and training return, the run's mean tv/total and mean lag in learner updates."""


def run_rows(env: str, algo: str, arm: str, seeds: list[int], k: int, figures: dict) -> list:
    return [{"env": env, "algo": algo, "arm": arm, "seed": s, "k": k,
             "greedy": round(float(figures["greedy"][i]), 2),
             "train": round(float(figures["train"][i]), 2),
             "tv": round(float(figures["tv"][i]), 6), "lag": round(float(figures["lag"][i]), 4)}
            for i, s in enumerate(seeds)]


def cell(args: argparse.Namespace, env: str, algo: str, out: Path) -> None:
    """The three arms of one algorithm × environment, appended to runs.csv run by run:
    each seed's async run then its replay, then the uniform program (all seeds) once
    every async run is in."""
    path = out / "runs.csv"
    have = {(r["arm"], int(r["seed"])) for r in read_rows(path)
            if (r["env"], r["algo"]) == (env, algo)}
    runs_dir = str(out / "runs")
    for seed in range(args.seeds):
        name = f"{env}_{algo}_{seed}"
        if ("async", seed) not in have:
            figs = train(base(args, env, algo, f"{name}_async", runs_dir, seed=seed,
                              asynchronous=AsyncConfig(enabled=True)))
            append_rows(path, run_rows(env, algo, "async", [seed], 0, figs), FIELDS)
        if ("replay", seed) not in have:  # its async run's folder is under runs/
            replay = LagConfig(mode="replay", replay=os.path.join(runs_dir, f"{name}_async"))
            figs = train(base(args, env, algo, f"{name}_replay", runs_dir, seed=seed,
                              lag=replay))
            append_rows(path, run_rows(env, algo, "replay", [seed], 0, figs), FIELDS)
    if not any(arm == "uniform" for arm, _ in have):
        lags = [float(r["lag"]) for r in read_rows(path)
                if (r["env"], r["algo"], r["arm"]) == (env, algo, "async")]
        k = max(1, round(2 * float(np.mean(lags))))
        figs = train(base(args, env, algo, f"{env}_{algo}_uniform", runs_dir, seed=0,
                          num_seeds=args.seeds, lag=LagConfig(max_delay=k, mode="uniform")))
        append_rows(path, run_rows(env, algo, "uniform", list(range(args.seeds)), k, figs), FIELDS)


OUT = Path(__file__).resolve().parent / "results" / "async_validation"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["ppo", "vaco"])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1"])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--total-timesteps", type=int, default=60_000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=64)
    parser.add_argument("--out", type=Path, default=OUT,
                        help="runs.csv (appended run by run: rerunning resumes) and runs/")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for env in args.envs:
        for algo in args.algos:
            cell(args, env, algo, args.out)
            rows = read_rows(args.out / "runs.csv")
            print(markdown_table(validation_table(rows)), flush=True)
    print(markdown_table(paired_tv_table(rows)))


if __name__ == "__main__":
    main()

"""Equal tuning budget for every algorithm (issue 11): random search, then frozen.

Each algorithm gets the same budget: `--configs` (default 24) random configurations over
the learning rate, E (epochs), M (minibatches), the entropy coefficient and its own
trust-region knob (ε of PPO-clip and SPO, the target KL of PPO-KL, δ of VACO; IMPALA has
none), drawn from one seeded generator per algorithm. They are evaluated on the
development environments (CartPole-v1, Acrobot-v1, Breakout-MinAtar; never the held-out
ones) at K ∈ {0, 8} (`uniform` lag over 4 groups) with `--seeds` seeds, and ranked by the
IQM of the normalised final greedy return over envs, K and seeds. Configurations sharing
(E, M) are one compiled program: the other values are vmapped hyperparameters.

Successive halving, the same for every algorithm (decided on 2026-12-03 before any
Breakout-MinAtar tuning result existed, because Breakout costs about 10× the CPU of the
other two): on Breakout-MinAtar each algorithm runs only its `--keep` (default 8) best
configurations by the ranking on CartPole-v1 and Acrobot-v1, and the chosen configuration
is the best of those survivors by the IQM over all three environments.

    python -m experiments.tune                       # all algorithms (hours of CPU)
    python -m experiments.tune --algos ppo vaco --configs 8 --seeds 2 --steps 100000
    python -m experiments.tune --summary-only

A candidate update (`CANDIDATES`: an algorithm with options of its own, issue 31's search
for an update that keeps more under lag) is tuned the same way, with the same budget, into
a folder of its own so that the study's chosen.json stays as it was:

    python -m experiments.tune --algos vaco_kl --out experiments/results/moonshot/tuning

Writes experiments/results/tuning/tuning.csv (tidy, resumable per (env, algo, E, M)),
ranking.md and chosen.json (the frozen configuration of every algorithm).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from experiments.common import parse_with_retries, pre_tuning_config
from jaxvaco.core.algos import algorithms
from jaxvaco.core.config import EvalConfig, LagConfig, with_overrides
from jaxvaco.host.runner import run
from jaxvaco.lab.results import last_evaluated, read_results, schema_row, write_results
from jaxvaco.lab.stats import iqm, normalize_score

OUT = Path(__file__).resolve().parent / "results" / "tuning"
DEV_ENVS = ("CartPole-v1", "Acrobot-v1", "Breakout-MinAtar")
BUDGETS = {"CartPole-v1": 300_000, "Acrobot-v1": 300_000, "Breakout-MinAtar": 500_000}
LAGS = (0, 8)
BASE = pre_tuning_config(num_envs=16, num_steps=128, anneal_lr=True,
                         lag=LagConfig(mode="uniform", num_groups=4, max_delay=max(LAGS)),
                         eval=EvalConfig(every_chunks=0, num_episodes=16), progress=False)
HALVING_ENVS = ("CartPole-v1", "Acrobot-v1")
"""Where every configuration runs; the others get each algorithm's `--keep` best."""
CANDIDATES = {"vaco_kl": ("vaco", {"vaco.kl_penalty": True})}
"""Candidate -> (algorithm, its options): VACO's filter with PPO-KL's adaptive KL penalty
[ours] (`jaxvaco.core.algos.vaco`)."""
TUNABLE = (*algorithms(), *CANDIDATES)
KNOBS = {"ppo": (("clip_coef", 0.1, 0.3),), "spo": (("clip_coef", 0.1, 0.3),),
         "ppo_kl": (("target_kl", 0.003, 0.03),), "vaco": (("delta", 0.05, 0.4),),
         "vaco_kl": (("delta", 0.05, 0.4), ("target_kl", 0.003, 0.03))}
"""Each one's own trust-region knobs and their log-uniform ranges (IMPALA has none); a
candidate draws each of its algorithms' ranges."""


def log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def sample_configs(algo: str, count: int, seed: int = 0) -> list[dict]:
    """`count` random configurations of `algo`: static (E, M) and vmappable values."""
    rng = np.random.default_rng([seed, TUNABLE.index(algo)])
    configs = []
    for index in range(count):
        config = {"config": index,
                  "update_epochs": int(rng.choice([2, 4, 8])),
                  "num_minibatches": int(rng.choice([2, 4, 8])),
                  "learning_rate": log_uniform(rng, 1e-4, 3e-3),
                  "ent_coef": log_uniform(rng, 1e-3, 3e-2)}
        for name, low, high in KNOBS.get(algo, ()):
            config[name] = log_uniform(rng, low, high)
        configs.append(config)
    return configs


def by_shape(configs: list[dict]) -> dict[tuple[int, int], list[dict]]:
    groups = defaultdict(list)
    for config in configs:
        groups[(config["update_epochs"], config["num_minibatches"])].append(config)
    return dict(groups)


def run_group(algo: str, env: str, shape: tuple[int, int], configs: list[dict],
              args: argparse.Namespace, algo_overrides: dict, csv_path: Path) -> None:
    """One program: every configuration of this (E, M) × K × seeds."""
    label = f"{algo} E={shape[0]} M={shape[1]}"
    done_path = csv_path.with_suffix(".done")
    if done_path.exists() and f"{env},{label}" in done_path.read_text().splitlines():
        return
    algorithm, own = CANDIDATES.get(algo, (algo, {}))
    config = with_overrides(BASE, {"env": env, "algo": algorithm, "num_seeds": args.seeds,
                                   "total_timesteps": args.steps or BUDGETS[env],
                                   "update_epochs": shape[0], "num_minibatches": shape[1],
                                   "run_name": f"{env}__{label.replace(' ', '_')}",
                                   "results_dir": str(args.out / "runs"), **own,
                                   **algo_overrides},
                            "tune")
    values = ("learning_rate", "ent_coef", *(name for name, *_ in KNOBS.get(algo, ())))
    grid = [{"lag_delay": k, **{v: c[v] for v in values}} for c in configs for k in LAGS]
    run_dir = args.out / "runs" / config.run_name
    result = run(config, grid=grid, resume=run_dir if (run_dir / "config.json").exists()
                 else None)
    if result.stop_signal:  # interrupted: the checkpoint is saved, the rows are incomplete
        sys.exit(128 + result.stop_signal)

    def variant(row: dict) -> str:  # run = (configuration, K) × seeds
        return f"{algo} #{configs[row['run'] // args.seeds // len(LAGS)]['config']}"

    rows = [schema_row(row, env, algo, variant(row), 0) for row in result.rows]
    with open(csv_path.with_suffix(".lock"), "w") as lock:  # two tuners may share the CSV
        fcntl.flock(lock, fcntl.LOCK_EX)
        write_results(csv_path, rows, append=True)
        with open(done_path, "a") as f:
            f.write(f"{env},{label}\n")


def ranking(csv_path: Path, envs: Sequence[str] | None = None
            ) -> dict[str, list[tuple[float, int]]]:
    """algo -> [(IQM of normalised final greedy return, config index)], best first, over
    the runs on `envs` (default: every env in the CSV). A configuration is ranked only if
    it ran on all of them (after successive halving: the survivors)."""
    last = last_evaluated(read_results(csv_path), "variant")
    envs = set(envs) if envs else {env for env, *_ in last}
    pooled, seen = defaultdict(list), defaultdict(set)
    for (env, variant, _, _), row in last.items():
        if env in envs:
            pooled[variant].append(float(normalize_score(env, float(row["eval/greedy_return"]))))
            seen[variant].add(env)
    out = defaultdict(list)
    for variant, scores in pooled.items():
        if seen[variant] == envs:
            algo, index = variant.split(" #")
            out[algo].append((iqm(np.array(scores)), int(index)))
    return {algo: sorted(entries, reverse=True) for algo, entries in out.items()}


def survivors(algo: str, configs: list[dict], csv_path: Path, keep: int) -> list[dict]:
    """The `keep` best of `configs` by the ranking on HALVING_ENVS (successive halving)."""
    ranked = ranking(csv_path, HALVING_ENVS).get(algo, [])
    if len(ranked) < len(configs):
        sys.exit(f"tune: {algo} has {len(ranked)} of {len(configs)} configurations on "
                 f"{', '.join(HALVING_ENVS)}; tune those envs first (halving ranks on them).")
    return [configs[index] for _, index in ranked[:keep]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=list(algorithms()), choices=TUNABLE,
                        help="the study's algorithms (default) or candidates (CANDIDATES)")
    parser.add_argument("--envs", nargs="+", default=list(DEV_ENVS))
    parser.add_argument("--configs", type=int, default=24)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, help="env steps per run (default: per env)")
    parser.add_argument("--ppo-critic", default="learner", choices=("behaviour", "learner"),
                        help="critic of the tuned PPO-clip baseline (the stronger one)")
    parser.add_argument("--keep", type=int, default=8,
                        help="configurations per algorithm on envs beyond HALVING_ENVS")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parse_with_retries(parser, "experiments.tune")
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "tuning.csv"
    configs = {algo: sample_configs(algo, args.configs) for algo in TUNABLE}  # ranks all in the CSV
    if not args.summary_only:
        for env in args.envs:
            for algo in args.algos:
                overrides = {"ppo.critic": args.ppo_critic} if algo == "ppo" else {}
                candidates = configs[algo] if env in HALVING_ENVS else survivors(
                    algo, configs[algo], csv_path, args.keep)
                for shape, group in by_shape(candidates).items():
                    run_group(algo, env, shape, group, args, overrides, csv_path)
    ranked = ranking(csv_path)
    chosen = {algo: configs[algo][entries[0][1]] for algo, entries in ranked.items()}
    (args.out / "chosen.json").write_text(json.dumps(chosen, indent=1) + "\n")
    lines = ["| algo | rank | config | IQM (norm.) |", "|---|---|---|---|"]
    for algo, entries in ranked.items():
        for rank, (score, index) in enumerate(entries[:5], 1):
            lines.append(f"| {algo} | {rank} | {configs[algo][index]} | {score:.3f} |")
    (args.out / "ranking.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

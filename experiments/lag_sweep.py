"""The lag sweep: algorithms × K ∈ {0, 2, 4, 8, 16} (`uniform` mode) × seeds, per environment.

The experiment is the sweep spec experiments/sweeps/lag_sweep.toml. Every algorithm runs
with the same shared settings (TrainConfig's defaults at the time, learning rate 1e-3;
VACO's options as chosen by experiments/vaco_design.py); for each (env, algo) the K values
and seeds are one compiled program (K is a vmapped hyperparameter, the ring buffer holds
max K + 1 snapshots).

    python -m experiments.lag_sweep                          # all envs, default budgets
    python -m experiments.lag_sweep --envs CartPole-v1 --seeds 16 --steps 300000
    python -m experiments.lag_sweep --plot-only

Writes experiments/results/lag_sweep/lag_sweep.csv (tidy: env, algo, K, seed, step, return,
eval returns, lag metrics; resumable: finished (env, algo) cells are skipped), final.csv
(final greedy evaluation return per run), summary.md, and the plots
return_vs_lag.{png,pdf}, tv_vs_lag.{png,pdf}, aggregate.{png,pdf}; the sweep's runs are
under experiments/results/lag_sweep/runs/lag_sweep/.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from experiments.common import SWEEPS, experiment_spec, parse_with_retries, run_spec
from jaxvaco.analysis import lag_plots, plots, stats, tables
from jaxvaco.config import ALGOS
from jaxvaco.results import last_evaluated, read_results, write_rows

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "lag_sweep"
SPEC = SWEEPS / "lag_sweep.toml"
LAGS = (0, 2, 4, 8, 16)
"""The columns of the summary: the spec's lag_delays."""


def final_table(rows: list[dict]) -> list[dict]:
    """The last evaluated step of every (env, algo, K, seed): greedy return and lag metrics."""
    return [{"env": k[0], "algo": k[1], "K": k[2], "seed": k[3], "step": r["step"],
             "return": float(r["eval/greedy_return"]),
             **{m: float(r[m]) for m in ("tv/backward", "tv/forward", "tv/total")}}
            for k, r in last_evaluated(rows, "algo").items()]


def summary_markdown(final: list[dict]) -> str:
    """Mean final greedy return (95% bootstrap CI) per env, algo and K."""
    lines = []
    decimals = {env: 1 if max(abs(r["return"]) for r in final if r["env"] == env) < 50 else 0
                for env in {r["env"] for r in final}}  # Breakout's returns are single digits
    for env in dict.fromkeys(r["env"] for r in final):
        lines += [f"\n**{env}** — final greedy return, mean [95% CI] over seeds\n",
                  "| algo | " + " | ".join(f"K={k}" for k in LAGS) + " |",
                  "|---|" + "---|" * len(LAGS)]
        for algo in dict.fromkeys(r["algo"] for r in final if r["env"] == env):
            cells = []
            for k in LAGS:
                values = np.array([r["return"] for r in final
                                   if (r["env"], r["algo"], r["K"]) == (env, algo, k)])
                if len(values) == 0:
                    cells.append("—")
                    continue
                point, lo, hi = stats.seed_mean_ci(values)
                d = decimals[env]
                cells.append(f"{point:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]")
            lines.append(f"| {algo} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def make_plots(final: list[dict], out: Path) -> None:
    lag_plots.plot_return_vs_lag(final, out)
    lag_plots.plot_tv_vs_lag(final, out)
    scores, _ = tables.score_dict_from_table(final, normalize=True)
    plots.plot_aggregate_intervals(scores, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", help="default: the spec's")
    parser.add_argument("--algos", nargs="+", choices=ALGOS, help="default: the spec's (all)")
    parser.add_argument("--seeds", type=int, help="default: the spec's (16)")
    parser.add_argument("--steps", type=int, help="env steps per run (default: per env)")
    parser.add_argument("--plot-only", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="results folder (finished (env, algo) cells there are skipped)")
    args = parse_with_retries(parser, "experiments.lag_sweep")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "lag_sweep.csv"
    if not args.plot_only:
        run_spec(experiment_spec(SPEC, out, args.envs, args.seeds, args.steps,
                                 algos=args.algos), csv_path)
    final = final_table(read_results(csv_path))
    write_rows(out / "final.csv", final)
    table = summary_markdown(final)
    (out / "summary.md").write_text(table + "\n")
    print(table)
    make_plots(final, out)


if __name__ == "__main__":
    main()

"""The lag ablation (issue 11): which component of an update carries lag robustness?

Cells: critic {behaviour, learner} × advantage {GAE, V-trace (normalise-then-weight)} ×
policy objective {PPO-clip on β, decoupled PPO-clip on π_T, TV batch filter on β, TV batch
filter on π_T, TV sample filter on β, no constraint (the plain importance-weighted
gradient r·Â)}, plus δ ∈ {0.05, 0.1, 0.4} around VACO's default cell (δ = 0.2) and the same
budget for PPO's knob, ε ∈ {0.05, 0.1, 0.4} around the clip's cell on β (ε = 0.2). Every cell
is a configuration of the same trainer (an algorithm is critic × estimator × anchor ×
objective); the importance weight π_T/β enters once (`Algorithm.importance_weight`).
Labels: "vaco" objectives are the paper's TV filter [paper]; the critic/estimator/anchor
combinations around it are [ours].

The experiment is the sweep spec experiments/sweeps/ablation.toml: all cells share one
explicitly stated base (it does not follow TrainConfig's defaults), `uniform` lag over 4
actor groups, K ∈ {0, 4, 16}, 8 seeds, 300k steps (500k on Breakout-MinAtar), on the
development environments. K and the seeds are vmapped: one compiled program per cell
and env. Resumable: finished (env, cell) pairs in the CSV are skipped.

    python -m experiments.ablation --envs Acrobot-v1            # one env
    python -m experiments.ablation --envs Breakout-MinAtar --only "clip β | learner | gae"
    python -m experiments.ablation --plot-only

Writes experiments/results/ablation/ablation.csv (tidy), final.csv (last evaluation of
every run: greedy and training return), summary.md and ablation.{png,pdf}; the sweep's
runs are under experiments/results/ablation/runs/ablation/.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from experiments.common import SWEEPS, experiment_spec, parse_with_retries, run_spec
from jaxvaco.analysis import stats
from jaxvaco.results import fraction_columns, last_evaluated, read_rows, write_rows

OUT = Path(__file__).resolve().parent / "results" / "ablation"
SPEC = SWEEPS / "ablation.toml"
LAGS = (0, 4, 16)
"""The columns of the summary: the spec's lag_delays."""


def final_table(rows: list[dict]) -> list[dict]:
    """The last evaluated row of every (env, cell, K, seed): greedy and training return,
    tv/total and the cell's fraction (`jaxvaco.results.FRACTIONS`; read from the legacy
    filter/fraction column of an ablation.csv written before the rename)."""
    def number(value) -> float | None:
        return None if value in (None, "") else float(value)

    return [{"env": env, "cell": variant, "K": k, "seed": seed,
             "greedy": float(r["eval_greedy"]), "training": float(r["return"]),
             "tv/total": float(r["tv/total"]),
             **{name: number(v) for name, v in fraction_columns(r).items()}}
            for (env, variant, k, seed), r in last_evaluated(rows, "variant").items()]


def cell_stats(final: list[dict], env: str, name: str, k: int, metric: str):
    values = np.array([r[metric] for r in final
                       if (r["env"], r["cell"], r["K"]) == (env, name, k)])
    return stats.seed_mean_ci(values) if len(values) else None


def summary_markdown(final: list[dict]) -> str:
    """Per env: final greedy / training return, mean [95% CI], per cell and K."""
    lines = []
    for env in dict.fromkeys(r["env"] for r in final):
        d = 1 if max(abs(r["greedy"]) for r in final if r["env"] == env) < 50 else 0  # MinAtar
        lines += [f"\n**{env}** — final greedy return / final training return, mean "
                  "[95% CI] over seeds\n",
                  "| objective | critic | advantages | " + " | ".join(
                      f"K={k}" for k in LAGS) + " |",
                  "|---|---|---|" + "---|" * len(LAGS)]
        for name in dict.fromkeys(r["cell"] for r in final if r["env"] == env):
            cells_ = []
            for k in LAGS:
                greedy = cell_stats(final, env, name, k, "greedy")
                training = cell_stats(final, env, name, k, "training")
                cells_.append("—" if greedy is None else
                              f"{greedy[0]:.{d}f} [{greedy[1]:.{d}f}, {greedy[2]:.{d}f}] / "
                              f"{training[0]:.{d}f} [{training[1]:.{d}f}, {training[2]:.{d}f}]")
            parts = name.split(" | ")
            objective = parts[0] + (f" ({parts[3]})" if len(parts) > 3 else "")
            lines.append(f"| {objective} | {parts[1]} | {parts[2]} | " + " | ".join(cells_)
                         + " |")
    return "\n".join(lines)


def plot(final: list[dict], out: Path) -> None:
    """One dot row per cell: final return at each K with its CI; greedy and training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["env"] for r in final))
    names = list(dict.fromkeys(r["cell"] for r in final))
    fig, axes = plt.subplots(1, 2 * len(envs), figsize=(5 * 2 * len(envs), 0.32 * len(names)
                                                         + 1.5), sharey=True, squeeze=False)
    colors = dict(zip(LAGS, ("tab:blue", "tab:orange", "tab:red"), strict=True))
    for e, env in enumerate(envs):
        for m, metric in enumerate(("greedy", "training")):
            ax = axes[0, 2 * e + m]
            for i, name in enumerate(names):
                for j, k in enumerate(LAGS):
                    stats = cell_stats(final, env, name, k, metric)
                    if stats is None:
                        continue
                    y = i + (j - 1) * 0.22
                    ax.errorbar(stats[0], y, xerr=[[stats[0] - stats[1]], [stats[2] - stats[0]]],
                                fmt="o", ms=3, color=colors[k], label=f"K={k}" if i == 0 else None)
            ax.set_title(f"{env}: final {metric} return", fontsize="small")
            ax.grid(axis="x", alpha=0.3)
    axes[0, 0].set_yticks(range(len(names)), names, fontsize="x-small")
    axes[0, 0].invert_yaxis()
    axes[0, 0].legend(fontsize="x-small", loc="lower left")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "ablation.png", dpi=130)
    fig.savefig(out / "ablation.pdf")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", help="default: the spec's")
    parser.add_argument("--seeds", type=int, help="default: the spec's (8)")
    parser.add_argument("--steps", type=int, help="env steps per run (default: per env)")
    parser.add_argument("--only", nargs="*", help="run only these cell labels")
    parser.add_argument("--plot-only", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parse_with_retries(parser, "experiments.ablation")
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "ablation.csv"
    if not args.plot_only:
        run_spec(experiment_spec(SPEC, args.out, args.envs, args.seeds, args.steps,
                                 args.only or None), csv_path)
    final = final_table(read_rows(csv_path))
    write_rows(args.out / "final.csv", final)
    table = summary_markdown(final)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)
    plot(final, args.out)


if __name__ == "__main__":
    main()

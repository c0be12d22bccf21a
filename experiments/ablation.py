"""The lag ablation (issue 11): which component of an update carries lag robustness?

Cells: critic {behaviour, learner} × advantage {GAE, V-trace (normalise-then-weight)} ×
policy objective {PPO-clip on β, decoupled PPO-clip on π_T, TV batch filter on β, TV batch
filter on π_T, TV sample filter on β, no constraint (the plain importance-weighted
gradient r·Â)}, plus δ ∈ {0.05, 0.1, 0.4} around VACO's default cell (δ = 0.2). Every cell
is a configuration of the same trainer (an algorithm is critic × estimator × anchor ×
objective); the importance weight π_T/β enters once (`Algorithm.importance_weight`).
Labels: "vaco" objectives are the paper's TV filter [paper]; the critic/estimator/anchor
combinations around it are [ours].

All cells share one explicitly stated base (below: it does not follow TrainConfig's
defaults), `uniform` lag over 4 actor groups, K ∈ {0, 4, 16}, 8 seeds, 300k steps, on the
development environments. K and the seeds are vmapped: one compiled program per cell
and env. Resumable: finished (env, cell) pairs in the CSV are skipped.

    python -m experiments.ablation --envs Acrobot-v1            # one env
    python -m experiments.ablation --envs Breakout-MinAtar --only "clip β | learner | gae"
    python -m experiments.ablation --plot-only

Writes experiments/results/ablation/ablation.csv (tidy), final.csv (last evaluation of
every run: greedy and training return), summary.md and ablation.{png,pdf}.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from experiments.common import parse_with_retries, run_variant
from jaxvaco.analysis import stats
from jaxvaco.config import EvalConfig, LagConfig, TrainConfig
from jaxvaco.results import fraction_columns, last_evaluated, read_rows, write_rows

OUT = Path(__file__).resolve().parent / "results" / "ablation"
LAGS = (0, 4, 16)
ENVS = ("Acrobot-v1", "CartPole-v1", "Breakout-MinAtar")
BUDGETS = {"CartPole-v1": 300_000, "Acrobot-v1": 300_000, "Breakout-MinAtar": 500_000}
BASE = TrainConfig(num_envs=16, num_steps=128, update_epochs=4, num_minibatches=4,
                   learning_rate=1e-3, anneal_lr=True, gamma=0.99, gae_lambda=0.95,
                   clip_coef=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
                   lag=LagConfig(mode="uniform", num_groups=4),
                   eval=EvalConfig(every_chunks=0, num_episodes=16), progress=False)

OBJECTIVES = {  # name -> (algo, options of its group)
    "clip β": ("ppo", {"anchor": "behaviour"}),
    "clip π_T (decoupled)": ("ppo", {"anchor": "learner"}),
    "TV batch β": ("vaco", {"anchor": "behaviour", "filter": "batch"}),
    "TV batch π_T": ("vaco", {"anchor": "learner", "filter": "batch"}),
    "TV sample β": ("vaco", {"anchor": "behaviour", "filter": "sample"}),
    "none (IS gradient)": ("vaco", {"anchor": "behaviour", "filter": "none"}),
}
CRITICS = ("behaviour", "learner")
ESTIMATORS = ("gae", "vtrace")
DELTAS = (0.05, 0.1, 0.4)


def cell(objective: str, critic: str, estimator: str, **extra) -> dict:
    """The overrides of one cell, as `group.field` keys for `run_variant`."""
    algo, options = OBJECTIVES[objective]
    options = {**options, "critic": critic, "advantages": estimator,
               "advantage_form": "normalize_then_weight", **extra}
    return {"algo": algo, **{f"{algo}.{k}": v for k, v in options.items()}}


def cells() -> dict[str, dict]:
    """Every cell of the ablation by its label "objective | critic | estimator [| δ]"."""
    out = {f"{objective} | {critic} | {estimator}": cell(objective, critic, estimator)
           for objective in OBJECTIVES for critic in CRITICS for estimator in ESTIMATORS}
    for delta in DELTAS:
        out[f"TV batch β | learner | gae | δ={delta}"] = cell("TV batch β", "learner", "gae",
                                                              delta=delta)
    return out


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
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, help="env steps per run (default: per env)")
    parser.add_argument("--only", nargs="*", help="run only these cell labels")
    parser.add_argument("--plot-only", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parse_with_retries(parser, "experiments.ablation")
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "ablation.csv"
    if not args.plot_only:
        for env in args.envs:
            for name, overrides in cells().items():
                if args.only and name not in args.only:
                    continue
                run_variant(BASE, env, name, {"num_seeds": args.seeds,
                                              "total_timesteps": args.steps or BUDGETS[env],
                                              **overrides}, LAGS, csv_path, args.out / "runs")
    final = final_table(read_rows(csv_path))
    write_rows(args.out / "final.csv", final)
    table = summary_markdown(final)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)
    plot(final, args.out)


if __name__ == "__main__":
    main()

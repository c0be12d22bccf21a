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
every run: greedy and training return), summary.md, robustness.md, ablation.{png,pdf} and
matched_tv.{png,pdf} (final training return against the realised TV(π_θ, β) of each ε and δ
cell); the sweep's runs are under experiments/results/ablation/runs/ablation/. The
robustness of the learner-critic cells (retention, difference in differences against
`BASELINE_CELL`) and the matched-TV table are README claims (experiments/claims/registry.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from experiments.common import SWEEPS, experiment_spec, parse_with_retries, run_spec
from experiments.markdown import table
from jaxvaco.lab import robustness, stats
from jaxvaco.lab.results import FRACTIONS, last_evaluated, read_results, write_rows
from jaxvaco.lab.tables import format_estimate

OUT = Path(__file__).resolve().parent / "results" / "ablation"
SPEC = SWEEPS / "ablation.toml"
LAGS = (0, 4, 16)
"""The columns of the summary: the spec's lag_delays."""


def final_table(rows: list[dict]) -> list[dict]:
    """The last evaluated row of every (env, cell, K, seed) of ablation.csv's rows
    (`read_results`): greedy and training return, tv/total and the cell's fraction
    (`jaxvaco.lab.results.FRACTIONS`; None for the other algorithms)."""
    def number(value) -> float | None:
        return None if value is None else float(value)

    return [{"env": env, "cell": variant, "K": k, "seed": seed,
             "greedy": float(r["eval/greedy_return"]), "training": float(r["return"]),
             "tv/total": float(r["tv/total"]),
             **{name: number(r.get(name)) for name in FRACTIONS.values()}}
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


BASELINE_CELL = "clip β | learner | gae"
"""The cell every learner-critic cell's retention is compared with: PPO-clip on β with the
learner's critic and GAE (ε = 0.2), the strongest baseline's recipe."""
KINDS = ("training", "greedy")


def learner_cells(final: list[dict]) -> list[str]:
    """The learner-critic cells of `final`: the baseline cell first, then the others in the
    order of the table."""
    cells = [c for c in dict.fromkeys(r["cell"] for r in final) if " | learner | " in c]
    return sorted(cells, key=lambda c: c != BASELINE_CELL)


def robustness_results(final: list[dict], lags: tuple[int, ...] = LAGS[1:]
                       ) -> dict[tuple, robustness.RobustnessResult]:
    """Robustness [ours] of every learner-critic cell, over the envs of `final`, paired by env
    and seed (`jaxvaco.lab.robustness`: normalised scores, pooled = mean over envs of the
    per-env seed means, stratified bootstrap, 2000 replicates, seed 0):
    ``(cell, None, kind, K)`` -> retention at K against the cell's own K = 0;
    ``(cell, BASELINE_CELL, kind, K)`` -> difference in differences against the baseline cell."""
    cells = learner_cells(final)
    columns = {c: np.asarray([r[c] for r in final if r["cell"] in cells])
               for c in ("env", "cell", "K", "seed", *KINDS)}
    pairs = [(cell, baseline) for cell in cells
             for baseline in ((None,) if cell == BASELINE_CELL else (None, BASELINE_CELL))]
    return robustness.paired_effects(columns, pairs, lags, KINDS, method_key="cell",
                                     lag_key="K")


def robustness_rows(results: dict, digits: int = 3) -> list[list[str]]:
    """Rows per learner-critic cell and return kind: pooled retention at each K > 0, then the
    difference in differences against `BASELINE_CELL` at each K > 0 [95% CI]."""
    lags = sorted({key[3] for key in results})
    cells = list(dict.fromkeys(key[0] for key in results))
    rows = [["cell", "return"] + [f"retention K={k}" for k in lags]
            + [f"DiD K={k}" for k in lags]]
    for cell in cells:
        for kind in KINDS:
            did = [results[cell, BASELINE_CELL, kind, k].format(digits=digits)
                   if (cell, BASELINE_CELL, kind, k) in results else "—" for k in lags]
            rows.append([cell, kind, *(results[cell, None, kind, k].format(digits=digits)
                                       for k in lags), *did])
    return rows


def robustness_env_rows(results: dict, k: int = LAGS[-1], digits: int = 3) -> list[list[str]]:
    """Rows per learner-critic cell and return kind at lag `k`: retention on each env, then the
    difference in differences against `BASELINE_CELL` on each env [95% CI over its seeds]."""
    cells = list(dict.fromkeys(key[0] for key in results))
    envs = list(results[cells[0], None, KINDS[0], k].per_env)
    rows = [["cell", "return"] + [f"retention {env}" for env in envs]
            + [f"DiD {env}" for env in envs]]
    for cell in cells:
        for kind in KINDS:
            did = results.get((cell, BASELINE_CELL, kind, k))
            rows.append([cell, kind, *(results[cell, None, kind, k].format(env, digits)
                                       for env in envs),
                         *(did.format(env, digits) if did else "—" for env in envs)])
    return rows


MATCHED_TV_CELLS = {  # cell -> (objective, knob): the knob sweeps of the clip and the filter
    "clip β | learner | gae | ε=0.05": ("clip", 0.05),
    "clip β | learner | gae | ε=0.1": ("clip", 0.1),
    "clip β | learner | gae": ("clip", 0.2),
    "clip β | learner | gae | ε=0.4": ("clip", 0.4),
    "TV batch β | learner | gae | δ=0.05": ("filter", 0.05),
    "TV batch β | learner | gae | δ=0.1": ("filter", 0.1),
    "TV batch β | learner | gae": ("filter", 0.2),
    "TV batch β | learner | gae | δ=0.4": ("filter", 0.4),
}
"""PPO's clip on β (ε) and VACO's TV batch filter on β (δ), learner's critic, GAE."""
KNOB = {"clip": "ε", "filter": "δ"}
REALISED_TV = "tv/total"
"""TV(π_θ, β): the policy after the iteration's update against the policy that acted
(`train.iteration_metrics`; `tv/backward` is TV(β, π_T), the lag, and `tv/forward`
TV(π_T, π_θ), the update's own move). Both the clip and the filter anchored on β constrain
π_θ/β, so this is the distance they let the policy realise."""


def realised_tv(rows: list[dict], column: str = REALISED_TV) -> dict[tuple, float]:
    """(env, cell, K, seed) -> the mean of `column` over every logged iteration of the run
    (the rows of ablation.csv)."""
    values: dict[tuple, list[float]] = {}
    for r in rows:
        if r.get(column) is not None:
            key = (r["env"], r["variant"], r["K"], r["seed"])
            values.setdefault(key, []).append(float(r[column]))
    return {key: float(np.mean(v)) for key, v in sorted(values.items())}


def matched_tv_cells(final: list[dict], tv: dict[tuple, float], env: str, k: int) -> dict:
    """Per cell of `MATCHED_TV_CELLS` on `env` at lag `k`: seed means and 95% CIs
    (`stats.seed_mean_ci`) of the realised TV and of the final training and greedy return."""
    out = {}
    for cell in MATCHED_TV_CELLS:
        runs = [r for r in final if (r["env"], r["cell"], r["K"]) == (env, cell, k)]
        if runs:
            out[cell] = {"tv": stats.seed_mean_ci([tv[env, cell, k, r["seed"]] for r in runs]),
                         **{kind: stats.seed_mean_ci([r[kind] for r in runs])
                            for kind in KINDS}}
    return out


def matched_tv_tables(final: list[dict], tv: dict[tuple, float],
                      lags: tuple[int, ...] = (LAGS[0], LAGS[-1])) -> dict[str, list[list[str]]]:
    """Per env: each clip (ε) and filter (δ) cell's realised mean TV(π_θ, β) and final training
    and greedy return at each of `lags`, mean [95% CI] over seeds."""
    tables = {}
    for env in dict.fromkeys(r["env"] for r in final):
        d = 1 if max(abs(r["greedy"]) for r in final if r["env"] == env) < 50 else 0
        per_k = {k: matched_tv_cells(final, tv, env, k) for k in lags}
        rows = [["objective", "knob"] + [f"{what} K={k}" for k in lags
                                         for what in ("TV", "training", "greedy")]]
        for cell, (objective, knob) in MATCHED_TV_CELLS.items():
            if not all(cell in per_k[k] for k in lags):
                continue
            cells_ = []
            for k in lags:
                c = per_k[k][cell]
                cells_ += [format_estimate(c["tv"], 3), format_estimate(c["training"], d),
                           format_estimate(c["greedy"], d)]
            rows.append([objective, f"{KNOB[objective]} = {knob:g}", *cells_])
        tables[env] = rows
    return tables


def plot_matched_tv(final: list[dict], tv: dict[tuple, float], out: Path,
                    lags: tuple[int, ...] = (LAGS[-1], LAGS[0])) -> None:
    """matched_tv.{png,pdf}: final training return against the realised mean TV(π_θ, β), one
    point per knob value of the clip (ε) and of the filter (δ), 95% CIs on both axes; one
    column per env, one row per K."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["env"] for r in final))
    fig, axes = plt.subplots(len(lags), len(envs), figsize=(4.6 * len(envs), 3.6 * len(lags)),
                             squeeze=False)
    colors = {"clip": "tab:blue", "filter": "tab:red"}
    labels = {"clip": "PPO clip on β (ε)", "filter": "VACO TV batch filter on β (δ)"}
    for i, k in enumerate(lags):
        for j, env in enumerate(envs):
            ax = axes[i, j]
            cells = matched_tv_cells(final, tv, env, k)
            for objective, color in colors.items():
                mine = [(knob, cells[c]) for c, (o, knob) in MATCHED_TV_CELLS.items()
                        if o == objective and c in cells]
                if not mine:
                    continue
                x = np.array([c["tv"] for _, c in mine])
                y = np.array([c["training"] for _, c in mine])
                ax.errorbar(x[:, 0], y[:, 0], xerr=[x[:, 0] - x[:, 1], x[:, 2] - x[:, 0]],
                            yerr=[y[:, 0] - y[:, 1], y[:, 2] - y[:, 0]], fmt="-o", ms=4,
                            color=color, capsize=2, label=labels[objective])
                for (knob, _), xi, yi in zip(mine, x[:, 0], y[:, 0], strict=True):
                    ax.annotate(f"{KNOB[objective]}={knob:g}", (xi, yi), fontsize="x-small",
                                color=color, xytext=(4, 4), textcoords="offset points")
            ax.set_title(f"{env}, K = {k}", fontsize="small")
            ax.set_xlabel("realised mean TV(π_θ, β) (tv/total)", fontsize="small")
            ax.set_ylabel("final training return", fontsize="small")
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize="x-small")
    fig.suptitle("Clip against filter at matched realised TV (learner's critic, GAE; means "
                 "over 8 seeds, 95% CIs)", fontsize="small")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "matched_tv.png", dpi=130)
    fig.savefig(out / "matched_tv.pdf")
    plt.close(fig)


def robustness_markdown(final: list[dict], rows: list[dict]) -> str:
    """robustness.md: the learner-critic cells' retention and difference in differences
    (pooled, then per env at the largest K) and the matched-TV table of the clip and filter."""
    results = robustness_results(final)
    parts = [("Retention and DiD against " + BASELINE_CELL + ", pooled (mean over envs)",
              robustness_rows(results)),
             (f"Per environment, K = {LAGS[-1]}", robustness_env_rows(results))]
    parts += [(f"{env}: realised mean TV(π_θ, β) and final return, clip (ε) and filter (δ)",
               rows_) for env, rows_ in matched_tv_tables(final, realised_tv(rows)).items()]
    return "\n".join(f"\n**{title}**\n\n{table(rows_)}" for title, rows_ in parts)


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
    rows = read_results(csv_path)
    final = final_table(rows)
    write_rows(args.out / "final.csv", final)
    table = summary_markdown(final)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)
    (args.out / "robustness.md").write_text(robustness_markdown(final, rows) + "\n")
    plot(final, args.out)
    plot_matched_tv(final, realised_tv(rows), args.out)


if __name__ == "__main__":
    main()

"""The fair lag study's final sweep (issue 11, stage 3): tuned algorithms × K × seeds.

Every algorithm runs with its frozen configuration from the equal-tuning search
(`experiments/results/tuning/chosen.json`, written by `python -m experiments.tune`); the
tuned PPO-clip uses the learner's critic, and the same configuration with the recorded
behaviour critic gets its own row (`ppo (behaviour critic)`), so that the critic's effect
is visible beside every algorithm's. Each (env, variant) is one program: K ∈ {0, 2, 4, 8,
16} (`uniform` lag, 4 groups) × seeds, vmapped.

    python -m experiments.fair_study --dev                  # development environments
    python -m experiments.fair_study --held-out             # then the held-out ones
    python -m experiments.fair_study --summary-only

The held-out environments were named in the README before any result on them existed and
no tuning decision looked at them; they are reported apart from the development ones.
Brax tasks add the settings every Brax run in this project uses (observation
normalisation, reward scale 0.1) to the tuned values.

The experiment is a sweep spec: experiments/sweeps/fair_study.toml holds its envs, budgets
and shared settings, and the script appends the tuned variants (`write_study_spec`) to
make experiments/results/fair_study/study.toml, which it runs (`jaxvaco sweep` runs it
too); the sweep's runs are under experiments/results/fair_study/runs/fair_study/.

Writes experiments/results/fair_study/: study.csv (tidy, resumable per (env, variant)),
final.csv (final greedy and training return per run), summary.md (per-environment tables
of both returns, mean [95% CI]; IQM of the normalised score per K with stratified-bootstrap
CIs, development and held-out apart; the probability that VACO improves on each baseline
per K) and {greedy,training}_return_vs_lag.{png,pdf}.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from experiments.common import SWEEPS, experiment_spec, parse_with_retries, run_spec
from jaxvaco.analysis import lag_plots, stats
from jaxvaco.results import last_evaluated, read_rows, write_rows

OUT = Path(__file__).resolve().parent / "results" / "fair_study"
CHOSEN = Path(__file__).resolve().parent / "results" / "tuning" / "chosen.json"
SPEC = SWEEPS / "fair_study.toml"
"""Everything of the study's sweep but its variants (envs, budgets, shared settings)."""
LAGS = (0, 2, 4, 8, 16)
"""The columns of the summary: the spec's lag_delays."""
DEV_ENVS = ("CartPole-v1", "Acrobot-v1", "Breakout-MinAtar")
HELD_OUT_ENVS = ("Asterix-MinAtar", "SpaceInvaders-MinAtar", "Freeway-MinAtar", "hopper",
                 "inverted_double_pendulum", "reacher")
CONFIG_PATHS = {"update_epochs": "update_epochs", "num_minibatches": "num_minibatches",
                "learning_rate": "learning_rate", "ent_coef": "ent_coef",
                "clip_coef": "clip_coef", "target_kl": "ppo_kl.target_kl",
                "delta": "vaco.delta"}
TREATMENT = "vaco"


def tuned_variants(chosen: dict[str, dict]) -> dict[str, dict]:
    """variant label -> TrainConfig overrides: each tuned algorithm, plus PPO's other critic."""
    variants = {}
    for algo, values in chosen.items():
        overrides = {"algo": algo, **{CONFIG_PATHS[k]: v for k, v in values.items()
                                      if k in CONFIG_PATHS}}
        if algo == "ppo":
            variants["ppo (behaviour critic)"] = {**overrides, "ppo.critic": "behaviour"}
            overrides["ppo.critic"] = "learner"
        variants[algo] = overrides
    return variants


def write_study_spec(chosen: dict[str, dict], path: Path) -> Path:
    """SPEC with the tuned variants of `chosen` appended as [variants."label"] tables."""
    lines = [SPEC.read_text().rstrip(), ""]
    for label, overrides in tuned_variants(chosen).items():
        lines += ["", f"[variants.{json.dumps(label)}]"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in overrides.items()]
    path.write_text("\n".join(lines) + "\n")  # (JSON strings and numbers are TOML ones)
    return path


def final_table(rows: list[dict]) -> list[dict]:
    """Per run (env, variant, K, seed): final greedy and training (stochastic) return."""
    return [{"env": env, "variant": variant, "K": k, "seed": seed, "step": int(row["step"]),
             "greedy": float(row["eval_greedy"]), "training": float(row["return"])}
            for (env, variant, k, seed), row in last_evaluated(rows, "variant").items()]


def mean_ci(values: np.ndarray, decimals: int) -> str:
    """'mean [lower, upper]' over seeds (stats.seed_mean_ci)."""
    point, lo, hi = stats.seed_mean_ci(values)
    return f"{point:.{decimals}f} [{lo:.{decimals}f}, {hi:.{decimals}f}]"


def env_tables(final: list[dict]) -> list[str]:
    """One table per environment and return kind: variants × K, mean [95% CI] over seeds."""
    lines = []
    for env in dict.fromkeys(r["env"] for r in final):
        rows = [r for r in final if r["env"] == env]
        decimals = 1 if max(abs(r["greedy"]) for r in rows) < 50 else 0
        for kind in ("greedy", "training"):
            lines += [f"\n**{env}**, final {kind} return, mean [95% CI] over seeds\n",
                      "| variant | " + " | ".join(f"K={k}" for k in LAGS) + " |",
                      "|---|" + "---|" * len(LAGS)]
            for variant in dict.fromkeys(r["variant"] for r in rows):
                cells = [np.array([r[kind] for r in rows if (r["variant"], r["K"]) ==
                                   (variant, k)]) for k in LAGS]
                lines.append(f"| {variant} | " + " | ".join(
                    mean_ci(c, decimals) if len(c) else "—" for c in cells) + " |")
    return lines


def score_matrix(final: list[dict], variant: str, k: int, envs: list[str],
                 kind: str) -> np.ndarray:
    """[seeds, envs] normalised scores of one variant at one K."""
    columns = [[stats.normalize_score(env, r[kind]) for r in final
                if (r["env"], r["variant"], r["K"]) == (env, variant, k)] for env in envs]
    return np.array(columns, dtype=np.float64).T


def aggregate_lines(final: list[dict], envs: list[str], title: str) -> list[str]:
    """IQM of normalised final return per variant and K (both kinds), and P(VACO > variant)."""
    present = [e for e in envs if any(r["env"] == e for r in final)]
    if not present:
        return []
    variants = list(dict.fromkeys(r["variant"] for r in final if r["env"] in present))
    lines = [f"\n**{title}** ({', '.join(present)}): IQM of the normalised final return "
             "[95% stratified-bootstrap CI]; P(VACO > variant) on greedy return\n",
             "| variant | return | " + " | ".join(f"K={k}" for k in LAGS) + " |",
             "|---|---|" + "---|" * len(LAGS)]
    for variant in variants:
        for kind in ("greedy", "training"):
            scores = {k: score_matrix(final, variant, k, present, kind) for k in LAGS}
            points, cis = stats.stratified_bootstrap_ci(
                {k: s for k, s in scores.items() if s.size}, {"IQM": stats.iqm})
            cells = [f"{points[k][0]:.2f} [{cis[k][0, 0]:.2f}, {cis[k][1, 0]:.2f}]"
                     if k in points else "—" for k in LAGS]
            lines.append(f"| {variant} | {kind} | " + " | ".join(cells) + " |")
        if variant != TREATMENT and TREATMENT in variants:
            cells = []
            for k in LAGS:
                treated, other = (score_matrix(final, v, k, present, "greedy")
                                  for v in (TREATMENT, variant))
                cells.append(f"{stats.probability_of_improvement(treated, other):.2f}"
                             if treated.size and other.size else "—")
            lines.append(f"| P(VACO > {variant}) | greedy | " + " | ".join(cells) + " |")
    return lines


def summary_markdown(final: list[dict]) -> str:
    return "\n".join(aggregate_lines(final, list(DEV_ENVS), "Development environments")
                     + aggregate_lines(final, list(HELD_OUT_ENVS), "Held-out environments")
                     + env_tables(final))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", action="store_true", help="run the development envs")
    parser.add_argument("--held-out", action="store_true", help="run the held-out envs")
    parser.add_argument("--envs", nargs="+", help="only these envs (of the chosen sets)")
    parser.add_argument("--seeds", type=int, help="default: the spec's (16)")
    parser.add_argument("--steps", type=int, help="env steps per run (default: per env)")
    parser.add_argument("--chosen", type=Path, default=CHOSEN)
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parse_with_retries(parser, "experiments.fair_study")
    if not args.summary_only:
        if not args.chosen.exists():
            parser.error(f"{args.chosen} does not exist: run `python -m experiments.tune` "
                         "first (the study uses the frozen tuned configurations)")
        chosen_envs = (DEV_ENVS if args.dev else ()) + (HELD_OUT_ENVS if args.held_out else ())
        envs = [e for e in chosen_envs if not args.envs or e in args.envs]
        if not envs:
            parser.error("nothing to run: pass --dev and/or --held-out (and --envs from them)")
        args.out.mkdir(parents=True, exist_ok=True)
        spec = write_study_spec(json.loads(args.chosen.read_text()), args.out / "study.toml")
        run_spec(experiment_spec(spec, args.out, envs, args.seeds, args.steps),
                 args.out / "study.csv")
    final = final_table(read_rows(args.out / "study.csv"))
    write_rows(args.out / "final.csv", final)
    table = summary_markdown(final)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)
    for kind in ("greedy", "training"):
        lag_plots.plot_return_vs_lag([{**r, "algo": r["variant"]} for r in final], args.out,
                                    metric=kind, stem=f"{kind}_return_vs_lag")


if __name__ == "__main__":
    main()

"""Choose VACO's defaults by experiment (docs/concepts/spec.md §3.2), before the main lag sweep.

Stage `prototype` reproduces the prototype table of docs/concepts/spec.md §3.2 with this
implementation: CartPole-v1, 16 envs × 128 steps, 4 epochs × 4 minibatches of whole
trajectories, lr 2.5e-4 annealed, 500k steps, `fixed` lag K ∈ {0, 4, 16}, greedy evaluation
at the end.

Stage `diagnose` tests the explanation of the prototype's failure (see the README): the
per-minibatch normalisation of ρ-weighted advantages.

Stage `grid` runs the design grid on the development environments (CartPole-v1,
Acrobot-v1) at K ∈ {0, 4, 16} with 8 seeds and 300k steps; the criterion is the IQM of
the normalised final greedy return across both environments, all K and all seeds.
Breakout-MinAtar is held out. Each variant (and its K values and seeds) is one compiled program.

    python -m experiments.vaco_design --stage prototype
    python -m experiments.vaco_design --stage grid
    python -m experiments.vaco_design --stage grid --summary-only

Each stage is a sweep spec, experiments/sweeps/vaco_design_<stage>.toml (its variants and
the prototype's settings). Results: experiments/results/vaco_design/<stage>.csv (tidy,
resumable) and <stage>.md; the sweep's runs are under
experiments/results/vaco_design/runs/<stage>/.
The committed results were measured before the importance weight was made to enter once
(issue 11): there, anchor-β variants with V-trace advantages weighted by ρ_t twice
(ratio π_θ/β times ρ inside Â) and decoupled PPO with V-trace by ρ_t². A rerun measures
the corrected forms under the same names.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from experiments.common import SWEEPS, experiment_spec, parse_with_retries, run_spec
from jaxvaco.lab.results import last_evaluated, read_results
from jaxvaco.lab.stats import iqm, normalize_score

OUT = Path(__file__).resolve().parent / "results" / "vaco_design"
STAGES = ("prototype", "diagnose", "grid")
LAGS = (0, 4, 16)
"""The columns of the summary: the specs' lag_delays."""


def spec_path(stage: str) -> Path:
    return SWEEPS / f"vaco_design_{stage}.toml"


def final_greedy(csv_path: Path) -> dict[tuple[str, str, int], list[float]]:
    """(env, variant, K) -> final greedy evaluation return of every seed."""
    out = defaultdict(list)
    for (env, variant, k, _), row in last_evaluated(read_results(csv_path), "variant").items():
        out[(env, variant, k)].append(float(row["eval/greedy_return"]))
    return out


def summary_table(csv_path: Path) -> str:
    """Markdown: mean final greedy return per env and K, and the normalised IQM."""
    finals = final_greedy(csv_path)
    envs = sorted({env for env, _, _ in finals})
    variants = list(dict.fromkeys(variant for _, variant, _ in finals))
    header = ["variant"] + [f"{env} K={k}" for env in envs for k in LAGS] + ["IQM (norm.)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant in variants:
        cells, pooled = [], []
        for env in envs:
            for k in LAGS:
                values = finals.get((env, variant, k), [])
                cells.append(f"{np.mean(values):.0f}" if values else "—")
                pooled.extend(normalize_score(env, np.array(values)).tolist())
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {iqm(np.array(pooled)):.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=STAGES, default="grid")
    parser.add_argument("--seeds", type=int, help="default: the spec's (8)")
    parser.add_argument("--steps", type=int, default=None,
                        help="env steps per run (default: 500k prototype/diagnose, 300k grid)")
    parser.add_argument("--only", nargs="*", help="run only these variant names")
    parser.add_argument("--summary-only", action="store_true")
    args = parse_with_retries(parser, "experiments.vaco_design")
    OUT.mkdir(parents=True, exist_ok=True)
    csv_path = OUT / f"{args.stage}.csv"
    if not args.summary_only:
        run_spec(experiment_spec(spec_path(args.stage), OUT, seeds=args.seeds,
                                 steps=args.steps, variants=args.only or None), csv_path)
    table = summary_table(csv_path)
    (OUT / f"{args.stage}.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()

"""The second held-out pool [ours]: retention and difference in differences of VACO,
PPO-clip(L) and PPO-KL(L) on environments declared before any of their results existed.

The pool (Seaquest-MinAtar, walker2d, ant, halfcheetah) was declared in commit e23be9b
(docs/results/fair-study.md) with the fair study's protocol; its first pass,
experiments/sweeps/held_out_2.toml, runs the three learner-critic variants the robustness
claims compare at K = 0 and 16 on seeds 100..115 with the frozen tuned configurations.
This script reports what the fair study's robustness tables report
(`experiments.fair_study.robustness_results`): per pool of the environments complete so
far, the levels (mean over envs [95% CI] and IQM) and retention at K = 16, the DiDs
against PPO-clip(L) and PPO-KL(L), and the same per environment.

    python -m experiments.held_out_2 --run    # the runs (resumable), then summary.md
    python -m experiments.held_out_2          # summary.md from the committed results.csv

`--run` runs the spec's cells under experiments/results/held_out_2/runs/ (ignored by git)
and appends each finished (env, variant) cell's rows to the committed results.csv,
skipping the cells it holds already (`experiments.common.run_spec`). Do not run the spec
with `jaxvaco sweep` into the committed folder: a sweep rewrites its results.csv from the
cells complete in its own run folders, which a fresh checkout does not have.

Environments where some variant has not finished both K are left out and named.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from experiments.common import SWEEPS, experiment_spec, parse_with_retries, run_spec
from experiments.fair_study import (
    did_rows,
    final_table,
    paired_envs,
    retention_rows,
    robustness_env_rows,
    robustness_results,
)
from experiments.markdown import table
from jaxvaco.lab.results import read_results
from jaxvaco.lab.sweep import SweepConfig

RESULTS = Path(__file__).resolve().parent / "results" / "held_out_2"
DATA = RESULTS / "held_out_2" / "results.csv"
SPEC = SWEEPS / "held_out_2.toml"
ENVS = ("Seaquest-MinAtar", "walker2d", "ant", "halfcheetah")
"""The second held-out pool (issue 31), declared on 2026-12-06 with its reference scores
(`jaxvaco.lab.stats.REFERENCE_SCORES`; random: 64 envs, 512+ episodes of
`python -m experiments.random_scores`) before any agent ran on it."""
VARIANTS = ("vaco", "ppo", "ppo_kl (learner critic)")
LAGS = (0, 16)


def complete_envs(final: list[dict]) -> list[str]:
    """The envs of `ENVS` where every variant has the same seeds at every K of `LAGS`."""
    return paired_envs(final, ENVS, VARIANTS, LAGS)


def held_out_2_tables(final: list[dict]) -> dict[str, list[list[str]]]:
    """Retention and DiD tables of the complete envs, pooled and per env (empty when no env
    is complete)."""
    envs = complete_envs(final)
    if not envs:
        return {}
    results = robustness_results(final, envs, VARIANTS, lags=LAGS[1:])
    title = f"Second held-out pool ({', '.join(envs)})"
    return {f"Retention: {title}": retention_rows(final, envs, results, VARIANTS),
            f"DiD: {title}": did_rows(results, VARIANTS),
            f"Per environment, K = {LAGS[-1]}: {title}": robustness_env_rows(
                results, envs, LAGS[-1], VARIANTS)}


def summary(final: list[dict]) -> str:
    """summary.md: `held_out_2_tables` as markdown, naming the envs not complete yet."""
    missing = [env for env in ENVS if env not in complete_envs(final)]
    out = ["# The second held-out pool [ours]", "",
           "Normalised final return (docs/results/fair-study.md fixes the normalisation); "
           "retention = score at K = 16 − at K = 0, paired by seed; DiD = the variant's "
           "retention − the baseline's; pooled as the mean over envs; [95% "
           "stratified-bootstrap CI] over 16 seeds. Made by "
           "`python -m experiments.held_out_2`."]
    if missing:
        out += ["", f"Not complete yet (left out): {', '.join(missing)}."]
    for title, rows in held_out_2_tables(final).items():
        out += ["", f"**{title}**", "", table(rows)]
    return "\n".join(out)


def held_out_2_sweep(out: Path, envs: Sequence[str] | None = None, seeds: int | None = None,
                     steps: int | None = None, variants: Sequence[str] | None = None
                     ) -> SweepConfig:
    """The spec's sweep with its run folders under `out`/runs/held_out_2 (apart from the
    results CSV that `run_spec` appends to); `envs`, `seeds`, `steps`, `variants` for a
    subset or a dry run."""
    return experiment_spec(SPEC, out, envs, seeds, steps, variants)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true",
                        help="run the cells results.csv does not hold yet, then summarise")
    parser.add_argument("--envs", nargs="+", choices=ENVS, help="with --run: only these")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, help="with --run: only these")
    parser.add_argument("--seeds", type=int, help="with --run: default the spec's (16)")
    parser.add_argument("--steps", type=int, help="with --run: env steps per run (dry runs)")
    parser.add_argument("--data", type=Path, default=DATA, help="the pool's results.csv")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parse_with_retries(parser, "experiments.held_out_2")
    if args.run:
        run_spec(held_out_2_sweep(args.out, args.envs, args.seeds, args.steps, args.variants),
                 args.data)
    if not args.data.exists():
        raise SystemExit(f"{args.data} does not exist: run `python -m experiments.held_out_2 "
                         "--run` first")
    text = summary(final_table(read_results(args.data)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

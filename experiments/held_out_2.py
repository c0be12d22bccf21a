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

    python -m jaxvaco sweep experiments/sweeps/held_out_2.toml   # the runs (resumable)
    python -m experiments.held_out_2                             # summary.md from them

Environments where some variant has not finished both K are left out and named.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.fair_study import (
    did_rows,
    final_table,
    paired_envs,
    retention_rows,
    robustness_env_rows,
    robustness_results,
)
from experiments.markdown import table
from jaxvaco.results import read_results

RESULTS = Path(__file__).resolve().parent / "results" / "held_out_2"
DATA = RESULTS / "held_out_2" / "results.csv"
ENVS = ("Seaquest-MinAtar", "walker2d", "ant", "halfcheetah")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the sweep's results.csv")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not args.data.exists():
        raise SystemExit(f"{args.data} does not exist: run `python -m jaxvaco sweep "
                         "experiments/sweeps/held_out_2.toml` first")
    text = summary(final_table(read_results(args.data)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

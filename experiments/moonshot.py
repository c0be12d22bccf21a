"""The search for an update that keeps more under lag than PPO-KL(L) [ours] (issue 31, item 5).

Declared in docs/results/fair-study.md ("The search for an update that keeps more under
lag") before any of its results existed:

1. the candidate (`experiments.tune.CANDIDATES`) is tuned with the study's budget on the
   development environments only:
       python -m experiments.tune --algos vaco_kl --out experiments/results/moonshot/tuning
2. its chosen configuration runs on the first held-out pool at K ∈ {0, 16}, seeds
   100..115, with the fair study's settings (whatever its development result):
       python -m experiments.moonshot              # resumable; --envs for a subset
3. it is paired by environment and seed with the fair study's PPO-KL(L) and PPO-clip(L)
   runs (experiments/results/fair_study/study.csv):
       python -m experiments.moonshot --summary-only

Success (fixed in the declaration): the DiD candidate − PPO-KL(L) of the normalised
training return at K = 16 is above 0 with its 95% CI excluding 0, and at K = 0 the paired
difference candidate − PPO-clip(L) of the mean normalised training return has a CI whose
upper end is ≥ 0. Environments where the candidate has not finished both K are left out
of the tables and named.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from experiments.common import experiment_spec, parse_with_retries, run_spec
from experiments.entropy_swap import level_gap
from experiments.fair_study import (
    HELD_OUT_ENVS,
    SHORT,
    SPEC,
    TUNED_OPTIONS,
    did_rows,
    final_table,
    paired_envs,
    retention_rows,
    robustness_env_rows,
    robustness_results,
)
from experiments.markdown import table
from experiments.tune import CANDIDATES
from jaxvaco.core.config import option_path
from jaxvaco.lab.results import read_results
from jaxvaco.lab.sweep import SweepConfig, validate_sweep
from jaxvaco.lab.tables import format_estimate

RESULTS = Path(__file__).resolve().parent / "results" / "moonshot"
CHOSEN = RESULTS / "tuning" / "chosen.json"
STUDY = RESULTS.parent / "fair_study" / "study.csv"
CANDIDATE = "vaco_kl"
BASELINES = ("ppo_kl (learner critic)", "ppo")
"""PPO-KL(L), the update that keeps the most, and PPO-clip(L), the level to match at K = 0."""
VARIANTS = (CANDIDATE, *BASELINES)
LAGS = (0, 16)


def candidate_overrides(chosen: dict) -> dict:
    """TrainConfig overrides of the candidate's chosen configuration (its algorithm, its own
    options and every tuned value)."""
    algorithm, own = CANDIDATES[CANDIDATE]
    return {"algo": algorithm, **own,
            **{option_path(algorithm, k): v for k, v in chosen.items() if k in TUNED_OPTIONS}}


def write_spec(chosen: dict, path: Path) -> Path:
    """The fair study's spec (envs, budgets, settings) with the candidate as its only
    variant; the held-out envs and K ∈ `LAGS` are chosen by `moonshot_sweep`."""
    lines = [SPEC.read_text().rstrip(), "", f"[variants.{json.dumps(CANDIDATE)}]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in
              candidate_overrides(chosen).items()]
    path.write_text("\n".join(lines) + "\n")  # (JSON strings and numbers are TOML ones)
    return path


def moonshot_sweep(chosen: dict, out: Path, envs: Sequence[str] = HELD_OUT_ENVS,
                   seeds: int | None = None) -> SweepConfig:
    """The candidate's sweep: `write_spec` on `envs` at K ∈ `LAGS`, run folders under
    `out`/runs/moonshot."""
    spec = write_spec(chosen, out / "moonshot.toml")
    sweep = experiment_spec(spec, out, envs, seeds)
    return validate_sweep(dataclasses.replace(sweep, name="moonshot", lag_delays=LAGS),
                          str(spec))


def comparison_rows(candidate_csv: Path, study_csv: Path = STUDY) -> list[dict]:
    """Final returns (`final_table`) of the candidate and of the fair study's baselines on
    the held-out pool at K ∈ `LAGS`."""
    rows = read_results(candidate_csv) + [
        r for r in read_results(study_csv) if r["variant"] in BASELINES]
    return [r for r in final_table(rows)
            if r["env"] in HELD_OUT_ENVS and r["K"] in LAGS and r["variant"] in VARIANTS]


def complete_envs(final: list[dict]) -> list[str]:
    """The held-out envs where every variant has the same seeds at every K of `LAGS`."""
    return paired_envs(final, HELD_OUT_ENVS, VARIANTS, LAGS)


def verdict(final: list[dict], envs: Sequence[str], results: dict) -> dict:
    """The declared criterion on `envs`: the DiD against PPO-KL(L) at K = 16 and the level
    difference against PPO-clip(L) at K = 0, in training return, and whether each holds."""
    did = results[CANDIDATE, BASELINES[0], "training", LAGS[-1]]
    did = (did.point, *did.ci)
    level = level_gap(final, envs, CANDIDATE, BASELINES[1], 0, "training")
    return {"did_vs_ppo_kl": list(did), "keeps_more": did[1] > 0,
            "level_vs_ppo_clip_k0": list(level), "level_matched": level[2] >= 0}


def tables(final: list[dict]) -> tuple[dict[str, list[list[str]]], dict | None]:
    """Retention, DiD, per-env and level tables of the complete envs, and the verdict
    (({}, None) when no env is complete)."""
    envs = complete_envs(final)
    if not envs:
        return {}, None
    results = robustness_results(final, envs, VARIANTS, BASELINES, lags=LAGS[1:])
    title = f"first held-out pool ({', '.join(envs)})"
    level_rows = [["variant − baseline", "return", "level difference K=0"]]
    for kind in ("training", "greedy"):
        level_rows.append([f"{SHORT[CANDIDATE]} − {SHORT[BASELINES[1]]}", kind,
                           format_estimate(level_gap(final, envs, CANDIDATE, BASELINES[1], 0,
                                                     kind), 3)])
    result = verdict(final, envs, results)
    return ({f"Retention: {title}": retention_rows(final, envs, results, VARIANTS),
             f"DiD: {title}": did_rows(results, VARIANTS, BASELINES),
             f"Level at K = 0: {title}": level_rows,
             f"Per environment, K = {LAGS[-1]}: {title}": robustness_env_rows(
                 results, envs, LAGS[-1], VARIANTS, BASELINES),
             "Declared criterion, over the complete environments": criterion_rows(result)},
            result)


def criterion_rows(result: dict) -> list[list[str]]:
    """The declared criterion (`verdict`): each half's statistic and whether it holds."""
    return [["declared criterion", "statistic (training return)", "holds"],
            [f"DiD {SHORT[CANDIDATE]} − {SHORT[BASELINES[0]]} at K = {LAGS[-1]} > 0, CI "
             "excluding 0", format_estimate(result["did_vs_ppo_kl"], 3),
             str(result["keeps_more"])],
            [f"level {SHORT[CANDIDATE]} − {SHORT[BASELINES[1]]} at K = 0: CI's upper end ≥ 0",
             format_estimate(result["level_vs_ppo_clip_k0"], 3), str(result["level_matched"])]]


def summary(final: list[dict]) -> str:
    missing = [env for env in HELD_OUT_ENVS if env not in complete_envs(final)]
    out = ["# The search for an update that keeps more under lag [ours]", "",
           "VACO+KL: VACO with PPO-KL's adaptive penalty (`--vaco.kl-penalty`), tuned with "
           "the study's budget (experiments/results/moonshot/tuning), against the fair "
           "study's PPO-KL(L) and PPO-clip(L) on the first held-out pool; normalised final "
           "return, paired by env and seed, pooled as the mean over envs, [95% "
           "stratified-bootstrap CI] over 16 seeds. Made by `python -m experiments.moonshot "
           "--summary-only`."]
    if missing:
        out += ["", f"Not complete yet (left out): {', '.join(missing)}."]
    for title, rows in tables(final)[0].items():
        out += ["", f"**{title}**", "", table(rows)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", choices=HELD_OUT_ENVS,
                        help="only these held-out envs (default: all six)")
    parser.add_argument("--seeds", type=int, help="default: the spec's (16)")
    parser.add_argument("--chosen", type=Path, default=CHOSEN)
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parse_with_retries(parser, "experiments.moonshot")
    csv_path = args.out / "moonshot.csv"
    if not args.summary_only:
        if not args.chosen.exists():
            parser.error(f"{args.chosen} does not exist: tune the candidate first (`python -m "
                         "experiments.tune --algos vaco_kl --out experiments/results/moonshot/"
                         "tuning`)")
        chosen = json.loads(args.chosen.read_text())
        if CANDIDATE not in chosen:
            parser.error(f"{args.chosen} has no {CANDIDATE!r}: its tuning is not finished")
        args.out.mkdir(parents=True, exist_ok=True)
        run_spec(moonshot_sweep(chosen[CANDIDATE], args.out, args.envs or HELD_OUT_ENVS,
                                args.seeds), csv_path)
    if not csv_path.exists():
        raise SystemExit(f"{csv_path} does not exist: run `python -m experiments.moonshot` "
                         "first")
    text = summary(comparison_rows(csv_path))
    (args.out / "summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

"""The fair lag study's final sweep (issue 11, stage 3): tuned algorithms × K × seeds.

Every algorithm runs with its frozen configuration from the equal-tuning search
(`experiments/results/tuning/chosen.json`, written by `python -m experiments.tune`); the
tuned PPO-clip uses the learner's critic, and the same configuration with the recorded
behaviour critic gets its own row (`ppo (behaviour critic)`); PPO-KL and SPO, tuned with
the recorded critic, get a row with the learner's (`ppo_kl (learner critic)`,
`spo (learner critic)`), so that the critic's effect is visible beside every algorithm's.
Each (env, variant) is one program: K ∈ {0, 2, 4, 8, 16} (`uniform` lag, 4 groups) ×
seeds, vmapped.

    python -m experiments.fair_study                        # every env (finished cells kept)
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
per K; the mean TV distance one update moves the policy at K = 16, beside the lag's),
robustness.md (retention and difference in differences of the learner-critic variants,
`robustness_tables`), {greedy,training}_return_vs_lag.{png,pdf} and
learning_curves_K{0,16}.{png,pdf} (training return against env steps, one panel per
environment).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from experiments.common import SWEEPS, experiment_spec, parse_with_retries, run_spec
from experiments.markdown import table
from jaxvaco.core.config import option_path
from jaxvaco.lab import lag_plots, plots, robustness, stats
from jaxvaco.lab.results import last_evaluated, read_results, write_rows
from jaxvaco.lab.tables import format_estimate, format_number

OUT = Path(__file__).resolve().parent / "results" / "fair_study"
CHOSEN = Path(__file__).resolve().parent / "results" / "tuning" / "chosen.json"
SPEC = SWEEPS / "fair_study.toml"
"""Everything of the study's sweep but its variants (envs, budgets, shared settings)."""
LAGS = (0, 2, 4, 8, 16)
"""The columns of the summary: the spec's lag_delays."""
DEV_ENVS = ("CartPole-v1", "Acrobot-v1", "Breakout-MinAtar")
HELD_OUT_BY_DOMAIN = {"MinAtar": ("Asterix-MinAtar", "SpaceInvaders-MinAtar", "Freeway-MinAtar"),
                      "Brax": ("hopper", "inverted_double_pendulum", "reacher")}
HELD_OUT_ENVS = HELD_OUT_BY_DOMAIN["MinAtar"] + HELD_OUT_BY_DOMAIN["Brax"]
"""The held-out environments (issue 11), declared on 2026-12-03 with their reference scores
(`jaxvaco.lab.stats.REFERENCE_SCORES`; random returns measured by
`python -m experiments.random_scores`) before any agent ran on them."""
TUNED_OPTIONS = ("update_epochs", "num_minibatches", "learning_rate", "ent_coef", "clip_coef",
                 "target_kl", "delta")
"""The options of the tuning search's chosen.json that a variant sets (`option_path` gives
each one's field: delta -> vaco.delta)."""
TREATMENT = "vaco"
MOVEMENT_LAG = 16
"""The lag whose policy movement (`movement_rows`) the summary reports."""


TUNED_CRITIC = {"ppo": "learner"}
"""Critic settings of the tuning search (experiments/tune.py) beyond the defaults: PPO-clip
was tuned with the learner's critic, PPO-KL and SPO with their default, the recorded
behaviour critic; VACO's learner critic is part of its design, and IMPALA recomputes
V-trace with the learner's critic per minibatch."""
OTHER_CRITIC = {"ppo": "behaviour", "ppo_kl": "learner", "spo": "learner"}
"""Algorithms that also run with their tuned values and the other critic, as a row of its
own ("ppo (behaviour critic)", "ppo_kl (learner critic)", "spo (learner critic)")."""


def tuned_variants(chosen: dict[str, dict]) -> dict[str, dict]:
    """variant label -> TrainConfig overrides: each tuned algorithm with the critic it was
    tuned with, and each algorithm of OTHER_CRITIC with its other critic."""
    variants = {}
    for algo, values in chosen.items():
        overrides = {"algo": algo, **{option_path(algo, k): v for k, v in values.items()
                                      if k in TUNED_OPTIONS}}
        if algo in TUNED_CRITIC:
            overrides[f"{algo}.critic"] = TUNED_CRITIC[algo]
        variants[algo] = overrides
        if other := OTHER_CRITIC.get(algo):
            variants[f"{algo} ({other} critic)"] = {**overrides, f"{algo}.critic": other}
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
    final = last_evaluated(rows, "variant")
    unfinished = [key for key, row in final.items() if row.get("return") is None]
    if unfinished:
        raise SystemExit(f"{len(unfinished)} runs finished no training episode (first: "
                         f"{unfinished[0]}), so they have no training return: give them more "
                         "env steps (--steps) than one episode per env")
    return [{"env": env, "variant": variant, "K": k, "seed": seed, "step": row["step"],
             "greedy": float(row["eval/greedy_return"]), "training": float(row["return"])}
            for (env, variant, k, seed), row in final.items()]


def mean_ci(values: np.ndarray, decimals: int) -> str:
    """'mean [lower, upper]' over seeds (stats.seed_mean_ci)."""
    point, lo, hi = stats.seed_mean_ci(values)
    return f"{point:.{decimals}f} [{lo:.{decimals}f}, {hi:.{decimals}f}]"


def cell_values(final: list[dict], env: str, variant: str, k: int, kind: str) -> np.ndarray:
    """One (env, variant, K)'s final `kind` return over seeds."""
    return np.array([r[kind] for r in final if (r["env"], r["variant"], r["K"]) ==
                     (env, variant, k)])


def decimals_for(final: list[dict], env: str) -> int:
    return 1 if max(abs(r["greedy"]) for r in final if r["env"] == env) < 50 else 0


def variants_of(final: list[dict], envs: list[str]) -> list[str]:
    """The variants run on any of `envs`, alphabetical (an algorithm's two critics adjacent)."""
    return sorted({r["variant"] for r in final if r["env"] in envs})


def env_rows(final: list[dict], env: str, kind: str) -> list[list[str]]:
    """Table rows of one environment and return kind: variant × K, mean [95% CI] over seeds."""
    decimals = decimals_for(final, env)
    rows = [["variant"] + [f"K={k}" for k in LAGS]]
    for variant in variants_of(final, [env]):
        cells = [cell_values(final, env, variant, k, kind) for k in LAGS]
        rows.append([variant] + [mean_ci(c, decimals) if len(c) else "—" for c in cells])
    return rows


def env_means_rows(final: list[dict], env: str) -> list[list[str]]:
    """Compact rows of one environment: variant × K, 'mean greedy / mean training' return."""
    decimals = decimals_for(final, env)
    rows = [["variant"] + [f"K={k}" for k in LAGS]]
    for variant in variants_of(final, [env]):
        means = [[cell_values(final, env, variant, k, kind) for kind in ("greedy", "training")]
                 for k in LAGS]
        rows.append([variant] + [" / ".join(f"{v.mean():.{decimals}f}" for v in pair)
                                 if len(pair[0]) else "—" for pair in means])
    return rows


def score_matrix(final: list[dict], variant: str, k: int, envs: list[str],
                 kind: str) -> np.ndarray:
    """[seeds, envs] normalised scores of one variant at one K; empty ([0, envs]) unless
    every env of `envs` has the same number of seeds of it (a partial study)."""
    columns = [stats.normalize_score(env, cell_values(final, env, variant, k, kind))
               for env in envs]
    if len({len(c) for c in columns}) != 1:
        return np.empty((0, len(envs)))
    return np.array(columns, dtype=np.float64).T


def paired_envs(final: list[dict], envs: Sequence[str], variants: Sequence[str],
                lags: Sequence[int]) -> list[str]:
    """The envs of `envs` (in their order) where every variant of `variants` has the same,
    non-empty set of seeds at every K of `lags`: the envs a paired comparison can use."""
    def seeds(env, variant, k):
        return frozenset(r["seed"] for r in final
                         if (r["env"], r["variant"], r["K"]) == (env, variant, k))

    return [env for env in envs
            if len({seeds(env, v, k) for v in variants for k in lags}) == 1
            and seeds(env, variants[0], lags[0])]


def present_envs(final: list[dict], envs: Sequence[str] = DEV_ENVS + HELD_OUT_ENVS) -> list[str]:
    """The envs of `envs` that `final` has results on, in the order of `envs`."""
    return [e for e in envs if any(r["env"] == e for r in final)]


def aggregate_rows(final: list[dict], envs: list[str]) -> list[list[str]]:
    """Rows: IQM of the normalised final return per variant, return kind and K [95%
    stratified-bootstrap CI]; then P(VACO > variant) per baseline, kind and K (rliable's
    probability of improvement, averaged over `envs`)."""
    present = present_envs(final, envs)
    variants = variants_of(final, present)
    rows = [["variant", "return"] + [f"K={k}" for k in LAGS]]
    for variant in variants:
        for kind in ("greedy", "training"):
            scores = {k: score_matrix(final, variant, k, present, kind) for k in LAGS}
            points, cis = stats.stratified_bootstrap_ci(
                {k: s for k, s in scores.items() if s.size}, {"IQM": stats.iqm})
            rows.append([variant, kind] + [
                f"{points[k][0]:.2f} [{cis[k][0, 0]:.2f}, {cis[k][1, 0]:.2f}]"
                if k in points else "—" for k in LAGS])
    for variant in variants if TREATMENT in variants else []:
        for kind in ("greedy", "training") if variant != TREATMENT else ():
            cells = []
            for k in LAGS:
                treated, other = (score_matrix(final, v, k, present, kind)
                                  for v in (TREATMENT, variant))
                cells.append(f"{stats.probability_of_improvement(treated, other):.2f}"
                             if treated.size and other.size else "—")
            rows.append([f"P(VACO > {variant})", kind] + cells)
    return rows


def aggregate_tables(final: list[dict]) -> dict[str, list[list[str]]]:
    """`aggregate_rows` of the development environments, of the held-out ones, of each
    held-out domain once both domains have results (a baseline that has run on one domain's envs
    only gets an aggregate there) and, once development and held-out envs have results, of
    all of them, each keyed 'Title (env, env, ...)'."""
    groups = {"Development environments": present_envs(final, list(DEV_ENVS)),
              "Held-out environments": present_envs(final, list(HELD_OUT_ENVS))}
    domains = {f"Held-out {domain}": present_envs(final, list(envs))
               for domain, envs in HELD_OUT_BY_DOMAIN.items()}
    if all(domains.values()):
        groups |= domains
    if groups["Development environments"] and groups["Held-out environments"]:
        groups["All environments"] = groups["Development environments"] + groups[
            "Held-out environments"]
    return {f"{title} ({', '.join(envs)})": aggregate_rows(final, envs)
            for title, envs in groups.items() if envs}


def movement_rows(rows: list[dict], k: int = MOVEMENT_LAG) -> list[list[str]]:
    """Rows: per variant and env, how far one update moves the policy against how far the
    policy acted on lags behind it, at lag K = `k`: the mean of `tv/forward`
    (E_s TV(π_T, π_T+1)) / the mean of `tv/backward` (E_s TV(β, π_T)) over every logged
    iteration of every seed."""
    at_k = [r for r in rows if r["K"] == k]
    envs = present_envs(at_k)
    table_rows = [["variant"] + envs]
    for variant in variants_of(at_k, envs):
        cells = []
        for env in envs:
            cell = [r for r in at_k if (r["env"], r["variant"]) == (env, variant)]
            means = [np.mean([r[column] for r in cell if r.get(column) is not None] or np.nan)
                     for column in ("tv/forward", "tv/backward")]
            cells.append(" / ".join(f"{m:.2f}" for m in means) if cell else "—")
        table_rows.append([variant] + cells)
    return table_rows


LEARNER_CRITIC = ("vaco", "ppo", "ppo_kl (learner critic)", "spo (learner critic)", "impala")
"""The variants whose advantages and value targets use the learner's critic (IMPALA: V-trace
recomputed with it), whose robustness to lag `robustness_results` measures."""
ROBUSTNESS_BASELINES = ("ppo", "ppo_kl (learner critic)")
"""What each learner-critic variant's retention is compared with (difference in
differences): PPO-clip and PPO-KL with the learner's critic."""
ROBUSTNESS_POOLS = {"Held-out": HELD_OUT_ENVS,
                    **{f"Held-out {domain}": envs for domain, envs in HELD_OUT_BY_DOMAIN.items()},
                    "Development": DEV_ENVS}
KINDS = ("training", "greedy")
SHORT = {"ppo": "PPO-clip(L)", "ppo_kl (learner critic)": "PPO-KL(L)",
         "spo (learner critic)": "SPO(L)", "vaco": "VACO", "impala": "IMPALA",
         "vaco_kl": "VACO+KL"}
"""Short names of the learner-critic variants in the robustness tables (and of the
candidate of experiments/moonshot.py)."""


def robustness_results(final: list[dict], envs: Sequence[str],
                       variants: Sequence[str] = LEARNER_CRITIC,
                       baselines: Sequence[str] = ROBUSTNESS_BASELINES,
                       lags: Sequence[int] = LAGS[1:]) -> dict[tuple, robustness.RobustnessResult]:
    """Robustness [ours] on the pool `envs`, per return kind and K > 0, paired by env and seed
    (`jaxvaco.lab.robustness`: normalised scores, pooled = mean over envs of the per-env
    seed means, stratified bootstrap, 2000 replicates, seed 0):
    ``(variant, None, kind, K)`` -> retention of `variant` at K against its own K = 0;
    ``(variant, baseline, kind, K)`` -> difference in differences, variant − baseline (> 0:
    the variant keeps more of its K = 0 score), once per pair (two baselines are compared in
    the order of `variants`). Variants absent from `final` are skipped."""
    keep = [r for r in final if r["env"] in envs and r["variant"] in variants]
    columns = {c: np.asarray([r[c] for r in keep]) for c in ("env", "variant", "K", "seed",
                                                            *KINDS)}
    present = [v for v in variants if v in set(columns["variant"])]
    pairs = [(v, None) for v in present] + [
        (v, b) for i, v in enumerate(present) for b in baselines
        if b in present and b != v and not (b in present[:i] and v in baselines)]
    return robustness.paired_effects(columns, pairs, lags, KINDS, method_key="variant",
                                     lag_key="K", step_key="step")


def pooled_mean(final: list[dict], variant: str, k: int, envs: Sequence[str],
                kind: str) -> tuple[float, float, float] | None:
    """Mean over `envs` of the per-env seed mean of the normalised final `kind` return, with
    its 95% stratified-bootstrap CI: the pooled level that trims no environment (beside the
    IQM); None unless every env has the same number of seeds of it."""
    scores = score_matrix(final, variant, k, list(envs), kind)
    if not scores.size:
        return None
    points, cis = stats.stratified_bootstrap_ci({"x": scores}, {"Mean": stats.mean})
    return float(points["x"][0]), float(cis["x"][0, 0]), float(cis["x"][1, 0])


def pooled_iqm(final: list[dict], variant: str, k: int, envs: Sequence[str], kind: str
               ) -> float | None:
    scores = score_matrix(final, variant, k, list(envs), kind)
    return stats.iqm(scores) if scores.size else None


def retention_rows(final: list[dict], envs: Sequence[str], results: dict,
                   variants: Sequence[str] = LEARNER_CRITIC, digits: int = 3
                   ) -> list[list[str]]:
    """Rows per variant and return kind: the pooled level at K = 0 and at the largest K (mean
    over envs [95% CI], then the IQM), and the retention at every K > 0 (`results` of
    `robustness_results` on the same `envs`)."""
    lags = sorted({key[3] for key in results})
    last = lags[-1]
    rows = [["variant", "return", "mean K=0", "IQM K=0", f"mean K={last}", f"IQM K={last}"]
            + [f"retention K={k}" for k in lags]]
    for variant in (v for v in variants if (v, None, KINDS[0], last) in results):
        for kind in KINDS:
            levels = []
            for k in (0, last):
                iqm = pooled_iqm(final, variant, k, envs, kind)
                levels += [format_estimate(pooled_mean(final, variant, k, envs, kind), digits),
                           format_number(iqm, digits)]
            rows.append([SHORT.get(variant, variant), kind, *levels,
                         *(results[variant, None, kind, k].format(digits=digits)
                           for k in lags)])
    return rows


def did_rows(results: dict, variants: Sequence[str] = LEARNER_CRITIC,
             baselines: Sequence[str] = ROBUSTNESS_BASELINES, digits: int = 3
             ) -> list[list[str]]:
    """Rows per (variant − baseline) pair and return kind: the pooled difference in
    differences [95% CI] at every K > 0 (`results` of `robustness_results`)."""
    lags = sorted({key[3] for key in results})
    rows = [["variant − baseline", "return"] + [f"DiD K={k}" for k in lags]]
    for variant in variants:
        for baseline in baselines:
            if (variant, baseline, KINDS[0], lags[-1]) not in results:
                continue
            for kind in KINDS:
                rows.append([f"{SHORT.get(variant, variant)} − {SHORT.get(baseline, baseline)}",
                             kind, *(results[variant, baseline, kind, k].format(digits=digits)
                                     for k in lags)])
    return rows


def robustness_env_rows(results: dict, envs: Sequence[str], k: int = LAGS[-1],
                        variants: Sequence[str] = LEARNER_CRITIC,
                        baselines: Sequence[str] = ROBUSTNESS_BASELINES, digits: int = 3
                        ) -> list[list[str]]:
    """Per env at lag `k`: each variant's retention, then each (variant − baseline) difference
    in differences, per return kind, in normalised score [95% CI over that env's seeds] (the
    per-env estimates of the pooled `results`)."""
    rows = [["statistic", "return", *envs]]
    pairs = [(v, None) for v in variants] + [(v, b) for v in variants for b in baselines]
    for variant, baseline in pairs:
        if (variant, baseline, KINDS[0], k) not in results:
            continue
        label = (f"retention {SHORT.get(variant, variant)}" if baseline is None else
                 f"DiD {SHORT.get(variant, variant)} − {SHORT.get(baseline, baseline)}")
        for kind in KINDS:
            result = results[variant, baseline, kind, k]
            rows.append([label, kind, *(result.format(env, digits) for env in envs)])
    return rows


def robustness_tables(final: list[dict]) -> dict[str, list[list[str]]]:
    """The robustness report [ours]: per pool of `ROBUSTNESS_POOLS` the retention table
    (levels, mean and IQM, and retention at each K) and the difference-in-differences table;
    then, per env, retention and DiD at the largest K of the held-out and development pools."""
    tables, per_env = {}, {}
    for pool, envs in ROBUSTNESS_POOLS.items():
        present = present_envs(final, envs)
        if not present:
            continue
        results = robustness_results(final, present)
        title = f"{pool} ({', '.join(present)})"
        tables[f"Retention: {title}"] = retention_rows(final, present, results)
        tables[f"DiD: {title}"] = did_rows(results)
        if pool in ("Held-out", "Development"):
            per_env[f"Per environment, K = {LAGS[-1]}: {pool}"] = robustness_env_rows(
                results, present)
    return tables | per_env


def robustness_markdown(final: list[dict]) -> str:
    """`robustness_tables` as markdown (robustness.md)."""
    return "\n".join(f"\n**{title}**\n\n{table(rows)}"
                     for title, rows in robustness_tables(final).items())


def summary_markdown(final: list[dict], rows: list[dict]) -> str:
    """Aggregates (development, held-out, all), the policy movement at K = 16
    (`movement_rows` of study.csv's `rows`), then each environment's two tables."""
    lines = []
    for title, aggregate in aggregate_tables(final).items():
        lines += [f"\n**{title}**: IQM of the normalised final return [95% "
                  "stratified-bootstrap CI]; P(VACO > variant)\n", table(aggregate)]
    lines += [f"\n**Policy movement at K = {MOVEMENT_LAG}**: mean `tv/forward` (one update) / "
              "mean `tv/backward` (the lag acted under) over logged iterations and seeds\n",
              table(movement_rows(rows))]
    for env in present_envs(final):
        for kind in ("greedy", "training"):
            lines += [f"\n**{env}**, final {kind} return, mean [95% CI] over seeds\n"]
            lines.append(table(env_rows(final, env, kind)))
    return "\n".join(lines)


def plot_learning_curves(rows: list[dict], out: Path, lags: tuple[int, ...] = (0, 16)) -> None:
    """learning_curves_K{k}: training return vs env steps per variant, one figure per K."""
    for k in lags:
        at_k = [{**r, "algo": r["variant"]} for r in rows if r["K"] == k]
        if at_k:
            plots.plot_learning_curves(at_k, out, by_k=False, stem=f"learning_curves_K{k}",
                                      title=f"Training return at K = {k}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", action="store_true",
                        help="the development envs (neither flag: all)")
    parser.add_argument("--held-out", action="store_true",
                        help="the held-out envs (neither flag: all)")
    parser.add_argument("--envs", nargs="+", help="only these envs (of the chosen sets)")
    parser.add_argument("--variants", nargs="+", help="only these variants (by label)")
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
        both = not (args.dev or args.held_out)
        chosen_envs = ((DEV_ENVS if args.dev or both else ())
                       + (HELD_OUT_ENVS if args.held_out or both else ()))
        envs = [e for e in chosen_envs if not args.envs or e in args.envs]
        if not envs:
            parser.error(f"none of --envs {' '.join(args.envs)} is in the chosen sets: "
                         f"{', '.join(chosen_envs)}")
        args.out.mkdir(parents=True, exist_ok=True)
        spec = write_study_spec(json.loads(args.chosen.read_text()), args.out / "study.toml")
        run_spec(experiment_spec(spec, args.out, envs, args.seeds, args.steps,
                                 args.variants), args.out / "study.csv")
    rows = read_results(args.out / "study.csv")
    final = final_table(rows)
    write_rows(args.out / "final.csv", final)
    table = summary_markdown(final, rows)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)
    (args.out / "robustness.md").write_text(robustness_markdown(final) + "\n")
    for kind in ("greedy", "training"):
        lag_plots.plot_return_vs_lag([{**r, "algo": r["variant"]} for r in final], args.out,
                                    metric=kind, stem=f"{kind}_return_vs_lag")
    plot_learning_curves(rows, args.out)


if __name__ == "__main__":
    main()

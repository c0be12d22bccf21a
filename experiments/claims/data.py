"""Tables recomputed from the committed results, with the experiments' own functions (the
cheap, deterministic `data` claims): each `measure_*(ctx, folder=None)` returns {table name:
rows}, the folder defaulting to the committed one."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments import (
    ablation,
    async_tables,
    default_sweep,
    entropy_swap,
    fair_study,
    held_out_2,
    moonshot,
    sync_sweep,
    vaco_design,
)
from experiments.claims.record import RESULTS, Context
from experiments.markdown import table_rows
from jaxvaco.lab.results import read_results, read_rows

ABLATION_OBJECTIVES = ("clip β", "clip π_T (decoupled)", "TV batch β", "TV batch π_T",
                       "TV sample β", "none (IS gradient)")
ABLATION_COLUMNS = (("behaviour", "gae"), ("behaviour", "vtrace"), ("learner", "gae"),
                    ("learner", "vtrace"))


def measure_ablation(ctx: Context, folder: Path | None = None) -> dict:
    """Per env: objective × (critic, advantages), each cell 'mean final greedy return at
    K = 0 → at K = 16 / mean final training return at K = 16', recomputed from the
    committed ablation.csv (whose final.csv must agree)."""
    folder = folder or RESULTS / "ablation"
    final = ablation.final_table(read_results(folder / "ablation.csv"))
    committed = [(r["env"], r["cell"], int(r["K"]), int(r["seed"]), float(r["greedy"]))
                 for r in read_rows(folder / "final.csv")]
    if committed != [(r["env"], r["cell"], r["K"], r["seed"], r["greedy"]) for r in final]:
        raise RuntimeError("final.csv is not what ablation.csv gives")
    low, high = min(ablation.LAGS), max(ablation.LAGS)

    def cell(env: str, label: str, decimals: int) -> str:
        def mean(k: int, metric: str) -> float:
            return float(np.mean([r[metric] for r in final
                                  if (r["env"], r["cell"], r["K"]) == (env, label, k)]))
        if not any((r["env"], r["cell"]) == (env, label) for r in final):
            return "—"
        return (f"{mean(low, 'greedy'):.{decimals}f} → {mean(high, 'greedy'):.{decimals}f}"
                f" / {mean(high, 'training'):.{decimals}f}")

    tables = {}
    for env in dict.fromkeys(r["env"] for r in final):
        decimals = 1 if max(abs(r["greedy"]) for r in final if r["env"] == env) < 50 else 0
        rows = [["objective \\ critic, advantages"]
                + [f"{critic}, {estimator}" for critic, estimator in ABLATION_COLUMNS]]
        for objective in ABLATION_OBJECTIVES:
            rows.append([objective] + [cell(env, f"{objective} | {critic} | {estimator}",
                                            decimals)
                                       for critic, estimator in ABLATION_COLUMNS])
        tables[env] = rows
    return tables


def measure_fair_study(ctx: Context, folder: Path | None = None) -> dict:
    """The fair study's aggregates (IQM [95% CI] of the normalised final greedy and training
    return, P(VACO > baseline); development, held-out and all: `fair_study.aggregate_tables`),
    the policy movement at K = 16 (`fair_study.movement_rows`) and per env the compact
    'mean greedy / mean training' table, recomputed from the committed study.csv (whose
    final.csv must agree)."""
    folder = folder or RESULTS / "fair_study"
    rows = read_results(folder / "study.csv")
    final = fair_study.final_table(rows)
    committed = [(r["env"], r["variant"], int(r["K"]), int(r["seed"]), float(r["greedy"]),
                  float(r["training"])) for r in read_rows(folder / "final.csv")]
    if committed != [(r["env"], r["variant"], r["K"], r["seed"], r["greedy"], r["training"])
                     for r in final]:
        raise RuntimeError("final.csv is not what study.csv gives")
    tables = fair_study.aggregate_tables(final)
    tables[f"Policy movement at K = {fair_study.MOVEMENT_LAG}"] = fair_study.movement_rows(rows)
    for env in fair_study.present_envs(final):
        tables[env] = fair_study.env_means_rows(final, env)
    return tables


def fair_study_final(folder: Path) -> list[dict]:
    """The committed final.csv of the fair study, typed (the `fair-study` claim checks that
    it is what study.csv gives)."""
    return [{"env": r["env"], "variant": r["variant"], "K": int(r["K"]), "seed": int(r["seed"]),
             "step": int(r["step"]), "greedy": float(r["greedy"]),
             "training": float(r["training"])} for r in read_rows(folder / "final.csv")]


def measure_fair_study_robustness(ctx: Context, folder: Path | None = None) -> dict:
    """The fair study's robustness [ours] (`fair_study.robustness_tables`): per pool the
    levels (mean over envs and IQM) with the retention of every learner-critic variant at
    each K, and its difference in differences against PPO-clip and PPO-KL with the learner's
    critic; per env at K = 16. Recomputed from the committed final.csv."""
    return fair_study.robustness_tables(fair_study_final(folder or RESULTS / "fair_study"))


def measure_ablation_robustness(ctx: Context, folder: Path | None = None) -> dict:
    """Retention and difference in differences against `ablation.BASELINE_CELL` of every
    learner-critic cell of the ablation, pooled over the three envs and per env at K = 16,
    recomputed from the committed ablation.csv."""
    final = ablation.final_table(read_results((folder or RESULTS / "ablation") / "ablation.csv"))
    results = ablation.robustness_results(final)
    envs = ", ".join(dict.fromkeys(r["env"] for r in final))
    return {f"Pooled ({envs})": ablation.robustness_rows(results),
            f"Per environment, K = {ablation.LAGS[-1]}": ablation.robustness_env_rows(results)}


def measure_ablation_matched_tv(ctx: Context, folder: Path | None = None) -> dict:
    """Per env: the clip's (ε) and the filter's (δ) realised mean TV(π_θ, β) and final
    training and greedy return at K = 0 and 16 (`ablation.matched_tv_tables`), recomputed
    from the committed ablation.csv."""
    rows = read_results((folder or RESULTS / "ablation") / "ablation.csv")
    return ablation.matched_tv_tables(ablation.final_table(rows), ablation.realised_tv(rows))


def measure_entropy_swap(ctx: Context, folder: Path | None = None) -> dict:
    """The entropy swap [ours] (`entropy_swap.swap_tables`): level gaps VACO − PPO-clip(L)
    at K = 0 and 16, retentions and DiDs with the tuned, swapped and equal entropy
    coefficients, per pool and per env, recomputed from the committed results.csv and the
    fair study's study.csv."""
    folder = folder or RESULTS
    swap = folder / "entropy_swap" / "entropy_swap" / "results.csv"
    return entropy_swap.swap_tables(entropy_swap.final_runs(folder / "fair_study" / "study.csv",
                                                            swap))


def measure_gpu_throughput(ctx: Context, folder: Path | None = None) -> dict:
    """The throughput ratios of the GPU check (experiments/gpu_check.sh, step 'cartpole'),
    read from its committed JSON: comparison, ratio, env-steps/s of the pair, goal."""
    path = (folder or RESULTS / "gpu_check") / "throughput_cartpole.json"
    rows = [["comparison", "ratio", "env-steps/s", "goal"]]
    for result in json.loads(path.read_text()):
        pair = " vs ".join(f"{name} {sps / 1e6:.1f}M" for name, sps in result["sps"].items())
        rows.append([result["title"], f"**{result['ratio']:.2f}**", pair, result["goal"]])
    return {"gpu_throughput": rows}


def measure_vaco_design(stage: str) -> Callable[[Context], dict]:
    def measure(ctx: Context) -> dict:
        csv = RESULTS / "vaco_design" / f"{stage}.csv"
        return {stage: table_rows(vaco_design.summary_table(csv))}
    return measure


def measure_sync_sweep(ctx: Context, folder: Path | None = None) -> dict:
    rows = [{k: float(v) if k != "sync_interval" else int(v) for k, v in r.items()}
            for r in read_rows((folder or RESULTS / "sync_sweep") / "sync_sweep.csv")]
    intervals = list(dict.fromkeys(r["sync_interval"] for r in rows))
    return {"sync": table_rows(sync_sweep.markdown(rows, intervals))}


LLM_LAG = RESULTS / "llm_lag_working"
"""Issue 15's lag comparison on the working RL stage (`llm_lag.py`'s default)."""
LLM_LAG_DELTA = RESULTS / "llm_lag_delta"
"""`vaco β` of that comparison with δ near its token TVs (`--delta 0.005`), same keys."""


def llm_lag_tables(folder: Path) -> dict:
    """From llm_lag.py's summary.csv: final held-out greedy and sampled accuracy per variant
    and K ('mean ± 95% t half-width' over seeds, '—' where a (variant, K) has not run), and
    in the greedy table the token TV to the behaviour policy and the clip/filter fraction
    (averaged over training) at the largest K."""
    rows = read_rows(folder / "summary.csv")
    ks = sorted({int(r["K"]) for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    by = {(r["method"], int(r["K"])): r for r in rows}

    def accuracy_table(acc: str, ci: str) -> list[list[str]]:
        return [["variant"] + [f"K = {k}" for k in ks]] + [
            [m] + [f"{float(by[m, k][acc]):.3f} ± {float(by[m, k][ci]):.3f}"
                   if (m, k) in by else "—" for k in ks] for m in methods]

    greedy = accuracy_table("final_acc", "ci95")
    greedy[0] += [f"tv/backward at K = {ks[-1]}", f"clip/filter frac at K = {ks[-1]}"]
    for row, method in zip(greedy[1:], methods, strict=True):
        last = by.get((method, ks[-1]))
        row += ["—", "—"] if last is None else [f"{float(last['tv/backward']):.3f}",
                                                 f"{float(last['fraction']):.3f}"]
    return {"greedy": greedy, "sampled": accuracy_table("sampled_acc", "sampled_ci95")}


def measure_llm_lag(ctx: Context) -> dict:
    return llm_lag_tables(LLM_LAG)


def measure_llm_lag_delta(ctx: Context) -> dict:
    return llm_lag_tables(LLM_LAG_DELTA)


def measure_default_sweep(ctx: Context) -> dict:
    summary = default_sweep.summarize(read_rows(default_sweep.OUT / "runs.csv"))
    return {"default_sweep": table_rows(default_sweep.summary_markdown(summary))}




def measure_async_validation(ctx: Context, folder: Path | None = None) -> dict:
    """Asynchronous runs against their replays and `uniform` (`async_tables.validation_table`)
    and replay against its own run paired by seed (`paired_tv_table`), recomputed from the
    committed runs.csv of experiments/async_validation.py."""
    rows = read_rows((folder or RESULTS / "async_validation") / "runs.csv")
    return {"validation": async_tables.validation_table(rows),
            "paired": async_tables.paired_tv_table(rows)}


def measure_async_pays(ctx: Context, folder: Path | None = None) -> dict:
    """Asynchronous against synchronous (`async_tables.pays_table`), from the committed JSON
    of experiments/async_pays.py with its date, commit and load average."""
    record = json.loads(((folder or RESULTS / "async_pays") / "async_pays.json").read_text())
    measured = [["date", "commit", "load average at start / end", "CPUs", "options"],
                [record["date"], record["commit"], " / ".join(map(str, record["load"])),
                 str(record["cpus"]), " ".join(record["argv"]) or "(defaults)"]]
    return {"pays": async_tables.pays_table(record["results"]), "measured": measured}


def measure_moonshot(ctx: Context, folder: Path | None = None) -> dict:
    """The moonshot's retention, DiD, K = 0 level and per-env tables over the held-out envs
    complete so far and its declared criterion (`moonshot.tables`), recomputed from the
    committed moonshot.csv and the fair study's study.csv."""
    data = (folder or RESULTS / "moonshot") / "moonshot.csv"
    return moonshot.tables(moonshot.comparison_rows(data))[0]


def measure_held_out_2(ctx: Context, folder: Path | None = None) -> dict:
    """The second held-out pool's retention and DiD tables (`held_out_2.held_out_2_tables`)
    over the environments complete so far, recomputed from the committed results.csv."""
    data = (folder or RESULTS / "held_out_2") / "held_out_2" / "results.csv"
    return held_out_2.held_out_2_tables(fair_study.final_table(read_results(data)))

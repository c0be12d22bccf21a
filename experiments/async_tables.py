"""The tables of the asynchronous experiments, apart from their scripts (which set XLA_FLAGS
before JAX starts) so that the claims can build them from the committed data:
`validation_table` and `paired_tv_table` from experiments/async_validation.py's runs.csv,
`pays_table` from
experiments/async_pays.py's JSON."""

from __future__ import annotations

import numpy as np

from jaxvaco.lab.stats import seed_mean_ci

ALGO_NAMES = {"ppo": "PPO-clip(L)", "vaco": "VACO"}


def overlaps(a: tuple, b: tuple) -> bool:
    return a[1] <= b[2] and b[1] <= a[2]


FIGURES = (("greedy", "greedy return", "{:.1f}"), ("train", "training return", "{:.1f}"),
           ("tv", "tv/total", "{:.4f}"))
"""The validation's figures per run (runs.csv column, table heading, format): the final
greedy return, the final training return (the last chunk's mean episode return of the
stochastic policy) and the run's mean tv/total."""


def ci_cell(ci: tuple[float, float, float], fmt: str) -> str:
    """'mean [lower, upper]' of a `seed_mean_ci` result."""
    mean, lo, hi = ci
    return f"{fmt.format(mean)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def validation_table(rows: list[dict]) -> list[list[str]]:
    """The validation table from runs.csv's rows: per env × algo × arm, the mean over seeds
    and 95% stratified-bootstrap CI (`seed_mean_ci`) of each of `FIGURES`, the mean lag, and
    whether replay's and uniform's CIs overlap async's on every figure."""
    out = [["env", "algo", "arm", "seeds", *(f"{name} [95% CI]" for _, name, _ in FIGURES),
            "mean lag", "agree"]]
    for env, algo in dict.fromkeys((r["env"], r["algo"]) for r in rows):
        arms: dict[str, list[dict]] = {}
        for r in rows:
            if (r["env"], r["algo"]) == (env, algo):
                arms.setdefault(r["arm"], []).append(r)
        ref = {k: seed_mean_ci([float(r[k]) for r in arms["async"]]) for k, _, _ in FIGURES}
        for arm in ("async", "replay", "uniform"):
            runs = arms.get(arm, [])
            if not runs:
                continue
            cis = {k: seed_mean_ci([float(r[k]) for r in runs]) for k, _, _ in FIGURES}
            agree = "" if arm == "async" else (
                "yes" if all(overlaps(cis[k], ref[k]) for k in cis) else "no")
            label = f"uniform (K = {runs[0]['k']})" if arm == "uniform" else arm
            out.append([env, ALGO_NAMES.get(algo, algo), label, str(len(runs)),
                        *(ci_cell(cis[k], fmt) for k, _, fmt in FIGURES),
                        f"{np.mean([float(r['lag']) for r in runs]):.2f}", agree])
    return out


def paired_tv_table(rows: list[dict]) -> list[list[str]]:
    """Replay against its own asynchronous run, paired by seed: the relative difference of
    the run's mean tv/total, replay / async − 1, mean [95% stratified-bootstrap CI] per
    env × algo and pooled over every pair, and how many pairs have replay above."""
    out = [["env", "algo", "pairs", "replay / async − 1 of mean tv/total [95% CI]",
            "replay above"]]
    runs = {(r["env"], r["algo"], r["arm"], r["seed"]): float(r["tv"]) for r in rows}
    pairs: dict[tuple[str, str], list[float]] = {}
    for (env, algo, arm, seed), tv in runs.items():
        if arm == "async" and (env, algo, "replay", seed) in runs:
            pairs.setdefault((env, algo), []).append(runs[env, algo, "replay", seed] / tv - 1)
    pooled = [x for values in pairs.values() for x in values]
    for (env, algo), values in [*pairs.items(), (("all", "pooled"), pooled)]:
        mean, lo, hi = seed_mean_ci(values)
        out.append([env, ALGO_NAMES.get(algo, algo), str(len(values)),
                    f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]",
                    f"{sum(x > 0 for x in values)} of {len(values)}"])
    return out


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def seconds(t: float | None) -> str:
    return "never" if t is None else f"{t:.1f}"


def pays_table(results: dict[str, dict[str, dict]]) -> list[list[str]]:
    """The comparison as table rows, from {algo: {"sync": measure, "async": measure}}:
    env-steps/s and its ratio async / sync; wall seconds to the threshold from the start
    and from the end of the first chunk, with their speed-ups sync / async (> 1: async
    reached it sooner); final greedy returns; the asynchronous run's mean lag."""
    rows = [["algo", "env-steps/s sync", "async", "async / sync", "t→R sync (s)", "async (s)",
             "sync / async", "train t→R sync / async (s)", "sync / async",
             "greedy sync / async", "mean lag"]]
    for algo, pair in results.items():
        sync, asyn = pair["sync"], pair["async"]
        rows.append([ALGO_NAMES.get(algo, algo), f"{sync['sps']:.0f}", f"{asyn['sps']:.0f}",
                     ratio(asyn["sps"], sync["sps"]), seconds(sync["time_to_threshold"]),
                     seconds(asyn["time_to_threshold"]),
                     ratio(sync["time_to_threshold"], asyn["time_to_threshold"]),
                     f"{seconds(sync['train_time_to_threshold'])} / "
                     f"{seconds(asyn['train_time_to_threshold'])}",
                     ratio(sync["train_time_to_threshold"], asyn["train_time_to_threshold"]),
                     f"{sync['greedy']:.0f} / {asyn['greedy']:.0f}", f"{asyn['mean_lag']:.2f}"])
    return rows

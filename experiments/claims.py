"""Every figure the README states, as data: what it is, the command behind it, how to
measure it again, and the rule under which a new measurement reproduces it.

The recorded values live in experiments/results/claims.json (one entry per claim: the
value, the commit it was measured on, the date). `python -m experiments.check_claims`
measures the claims again and compares; `python -m experiments.render_readme` writes the
README's tables from the recorded values (between `<!-- claims:BLOCK -->` markers).

Kinds of claim and their tolerance rules:

* data: a table recomputed from the committed tidy CSVs (deterministic; must be equal to
  the printed precision). These are cheap (`fast`): they check that the README's tables
  are what the committed data give.
* seed-count: a learning result stated as "solved in n of S seeds"; the rule is the
  stated criterion itself (e.g. >= 15 of 16 seeds with greedy return >= 475).
* statistical: a learning result stated as a mean; the new mean must lie inside the
  recorded 95% confidence interval (or, for a rerun sweep, in most cells: see the claim).
* speed: a throughput ratio, or a whole-process wall-time ratio against the reference
  (`startup`); the new ratio must lie within a band around the recorded one (CPU timings
  on a shared machine are noisy, so speed claims are never `fast`).

`minutes` is a rough cost on the 2-core development CPU; `check_claims --max-minutes`
skips the claims above it and says so in its output.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from jaxvaco.results import read_results, read_rows

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"
RECORD = RESULTS / "claims.json"
SOLVED = 475.0


@dataclasses.dataclass
class Context:
    """Where a measurement may write (a temporary folder) and which Python runs it."""

    tmp: Path
    python: str = sys.executable


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    what: str
    command: str
    kind: str  # data | seed-count | statistical | speed
    rule: str
    fast: bool
    minutes: float
    measure: Callable[[Context], dict]
    compare: Callable[[dict, dict], tuple[bool, str]]
    show: Callable[[dict], str]
    data_commit: str = ""
    """Data claims: the commit that added the data (measured on the code just before it);
    recorded instead of the commit that recomputed the table."""
    reruns: tuple[str, ...] = ()
    """Rerun claims: the data claims whose recorded values (merged) the rerun is compared
    with; a rerun records nothing of its own."""


def recorded_for(claim: Claim, record: dict) -> dict | None:
    """What `claim` is compared with: its own record, or for a rerun the merged records of
    the data claims it reruns (None while any of them is unrecorded)."""
    if not claim.reruns:
        return record.get(claim.id)
    entries = [record.get(i) for i in claim.reruns]
    if any(e is None for e in entries):
        return None
    return {"value": {k: v for e in entries for k, v in e["value"].items()},
            "commit": ", ".join(dict.fromkeys(e["commit"] for e in entries))}


# ------------------------------------------------------------------------------ helpers


def run_command(args: list[str], ctx: Context, log: str) -> float:
    """Run a command from the repository root; its wall time in seconds. Output to a log."""
    start = time.perf_counter()
    with open(ctx.tmp / log, "w") as out:
        code = subprocess.call(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    if code != 0:
        raise RuntimeError(f"{' '.join(args)} exited with {code}; see {ctx.tmp / log}")
    return time.perf_counter() - start


def final_greedy(run_dir: Path) -> list[float]:
    """The last greedy evaluation of every run in a run folder's metrics.jsonl."""
    last: dict[int, float] = {}
    with open(run_dir / "metrics.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if row.get("eval/greedy_return") is not None:
                last[row["run"]] = row["eval/greedy_return"]
    return [last[r] for r in sorted(last)]


def mean_ci(values: list[float]) -> dict:
    """Mean and 95% stratified-bootstrap CI (stats.seed_mean_ci), rounded for the record."""
    from jaxvaco.analysis import stats

    point, lo, hi = stats.seed_mean_ci(values)
    return {"mean": round(point, 2), "lo": round(lo, 2), "hi": round(hi, 2)}


def train_cli(flags: list[str], ctx: Context, name: str) -> dict:
    """`jaxvaco train FLAGS` in a subprocess: final greedy return per seed and wall time."""
    args = [ctx.python, "-m", "jaxvaco.cli", "train", *flags, "--no-progress",
            "--results-dir", str(ctx.tmp / "runs"), "--run-name", name]
    wall = run_command(args, ctx, f"{name}.log")
    greedy = [round(g, 1) for g in final_greedy(ctx.tmp / "runs" / name)]
    return {"greedy": greedy, "wall_s": round(wall)}


def same(recorded: dict, now: dict) -> tuple[bool, str]:
    """Data claims: equal to the printed precision."""
    if recorded == now:
        return True, "identical"
    diffs = [key for key in set(recorded) | set(now) if recorded.get(key) != now.get(key)]
    return False, f"differs in {', '.join(sorted(diffs))}"


def solved_at_least(need: int) -> Callable[[dict, dict], tuple[bool, str]]:
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        solved = sum(g >= SOLVED for g in now["greedy"])
        return solved >= need, f"{solved} of {len(now['greedy'])} solved (need {need})"
    return compare


def show_solved(value: dict) -> str:
    greedy = value["greedy"]
    solved = sum(g >= SOLVED for g in greedy)
    wall = f", {value['wall_s']} s" if "wall_s" in value else ""
    return f"{solved}/{len(greedy)} solved, mean {np.mean(greedy):.1f}{wall}"


def inside_ci(recorded: dict, now: dict) -> tuple[bool, str]:
    ok = recorded["lo"] <= now["mean"] <= recorded["hi"]
    return ok, f"mean {now['mean']} {'inside' if ok else 'outside'} [{recorded['lo']}, " \
               f"{recorded['hi']}]"


def show_mean_ci(value: dict) -> str:
    return f"{value['mean']} [{value['lo']}, {value['hi']}]"


def ratio_band(low: float, high: float) -> Callable[[dict, dict], tuple[bool, str]]:
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        r = now["ratio"] / recorded["ratio"]
        return low <= r <= high, f"now / recorded = {r:.2f} (band {low}–{high})"
    return compare


def show_ratio(value: dict) -> str:
    detail = " vs ".join(f"{v / 1e3:.0f}k" for v in value.get("pair", []))
    return f"{value['ratio']:.2f}" + (f" ({detail})" if detail else "")


def show_table(value: dict) -> str:
    cells = sum(len(row) - 1 for rows in value.values() for row in rows)
    return f"{len(value)} table(s), {cells} cells"


def has_interval(cell: str) -> bool:
    """Whether a table cell holds an estimate with an interval that `parse_ci` reads."""
    return " [" in cell or " ± " in cell


def parse_ci(cell: str) -> tuple[float, float, float]:
    """'0.781 [0.736, 0.811]' -> (0.781, 0.736, 0.811); '0.84 ± 0.02' -> (0.84, 0.82, 0.86)."""
    if " ± " in cell:
        point, half = map(float, cell.split(" ± "))
        return point, point - half, point + half
    point, rest = cell.split(" [")
    lo, hi = rest.rstrip("]").split(", ")
    return float(point), float(lo), float(hi)


def cells_by_label(tables: dict) -> dict[tuple[str, str, str], str]:
    """{(table, row label, column header): cell} of tables whose first row is the header
    and first column the row label, so that a rerun of some rows or columns is compared
    cell by cell with the same cells of the recorded tables."""
    return {(name, row[0], column): cell for name, rows in tables.items() for row in rows[1:]
            for column, cell in zip(rows[0][1:], row[1:], strict=False)}


def most_cells_inside(share: float) -> Callable[[dict, dict], tuple[bool, str]]:
    """Rerun of a sweep (or of some of its cells): the new point estimate inside the
    recorded 95% CI in >= share of the cells both hold (with 95% intervals, a few cells
    fall outside by chance alone)."""
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        old_cells, new_cells = cells_by_label(recorded), cells_by_label(now)
        pairs = [(old_cells[key], new) for key, new in new_cells.items()
                 if key in old_cells and has_interval(old_cells[key]) and has_interval(new)]
        inside = 0
        for old, new in pairs:
            _, lo, hi = parse_ci(old)
            inside += lo <= parse_ci(new)[0] <= hi
        ok = bool(pairs) and inside >= share * len(pairs)
        return ok, f"{inside} of {len(pairs)} cells inside the recorded CI (need {share:.0%})"
    return compare


# ------------------------------------------------------------------- learning claims


def measure_default_16(ctx: Context) -> dict:
    return train_cli(["--num-seeds", "16"], ctx, "default16")


def measure_default_1(ctx: Context) -> dict:
    return train_cli([], ctx, "default1")


def solved_and_wall(recorded: dict, now: dict) -> tuple[bool, str]:
    solved = now["greedy"][0] >= SOLVED
    wall = now["wall_s"] / recorded["wall_s"]
    ok = solved and wall <= 2.0
    return ok, f"greedy {now['greedy'][0]} ({'solved' if solved else 'NOT solved'}), " \
               f"wall {wall:.2f}× recorded (at most 2×)"


FAST_LEARNING_FLAGS = ["--num-seeds", "8", "--total-timesteps", "100000"]


def measure_fast_learning(ctx: Context) -> dict:
    """Small enough for CI: in-process, no subprocess start-up."""
    from jaxvaco.config import TrainConfig
    from jaxvaco.run_dir import RunControl
    from jaxvaco.runner import run

    config = TrainConfig(num_seeds=8, total_timesteps=100_000, progress=False,
                         results_dir=str(ctx.tmp / "runs"), run_name="fast_learning")
    result = run(config, control=RunControl(checkpoint_every=0, keep_checkpoints=0))
    greedy = [round(float(g), 1) for g in result.summary["eval/greedy_return"]]
    return {"greedy": greedy, **mean_ci(greedy)}


PRE_TUNING_FLAGS = ["--update-epochs", "4", "--num-minibatches", "4", "--clip-coef", "0.2",
                    "--ppo.critic", "behaviour"]
"""PPO's defaults before issue 30 (E, M, ε, the recorded critic; c_e 0.01 where the claim
has one), which the Breakout and Brax claims were recorded under, pinned."""
BREAKOUT_FLAGS = ["--env", "Breakout-MinAtar", "--num-envs", "64", "--num-seeds", "4",
                  "--learning-rate", "1e-3", *PRE_TUNING_FLAGS, "--ent-coef", "0.01"]
BRAX_FLAGS = ["--env", "inverted_pendulum", "--normalize-obs", "--reward-scale", "0.1",
              "--num-envs", "32", "--num-seeds", "2", "--learning-rate", "1e-3",
              *PRE_TUNING_FLAGS]
BRAX_ENTROPY = {True: ["--ent-coef", "0", "--total-timesteps", "1500000"],
                False: ["--ent-coef", "0.01", "--total-timesteps", "1000000"]}


def measure_breakout(ctx: Context) -> dict:
    value = train_cli(BREAKOUT_FLAGS, ctx, "breakout")
    return {**value, **mean_ci(value["greedy"])}


def measure_brax(ctx: Context, ent_zero: bool) -> dict:
    value = train_cli(BRAX_FLAGS + BRAX_ENTROPY[ent_zero], ctx, f"brax_{int(ent_zero)}")
    return {**value, **mean_ci(value["greedy"])}


def show_greedy(value: dict) -> str:
    return " / ".join(f"{g:g}" for g in value["greedy"]) + \
        (f" (mean {value['mean']} [{value['lo']}, {value['hi']}])" if "mean" in value else "")


# ------------------------------------------------------------------- throughput claims

THROUGHPUT = "python experiments/throughput.py --only {} --total 3e5 --repeats 2"


def measure_throughput(which: str) -> Callable[[Context], dict]:
    def measure(ctx: Context) -> dict:
        out = ctx.tmp / f"throughput_{which}.json"
        total = "2e5" if which == "devices" else "3e5"
        args = [ctx.python, "experiments/throughput.py", "--total", total, "--repeats", "2",
                "--json", str(out)]
        args += ["--devices", "4"] if which == "devices" else ["--only", which]
        run_command(args, ctx, f"throughput_{which}.log")
        result = json.loads(out.read_text())[0]
        sps = {k: round(v) for k, v in result["sps"].items()}
        names = ["4 device(s), global", "1 device(s)"] if which == "devices" else list(sps)[:2]
        return {"ratio": round(result["ratio"], 2), "pair": [sps[n] for n in names], "sps": sps}
    return measure


# --------------------------------------------------------------------- start-up claim

STARTUP = "python experiments/startup.py --repeats 3 --default-job"
STARTUP_DEFAULT = "jaxvaco train (defaults), warm"
STARTUP_RATIOS = ("jaxvaco cold", "jaxvaco warm", STARTUP_DEFAULT)
STARTUP_TARGETS = (  # (median, what the target is on, bound, the README's wording)
    ("jaxvaco cold", "ratio", 1.2, "≥ 1.2"),
    ("jaxvaco warm", "ratio", 1.8, "≥ 1.8"),
    (STARTUP_DEFAULT, "seconds", 8.0, "< 8 s on an idle CPU"),
)


def startup_value(result: dict) -> dict:
    """The record of a start-up measurement from `experiments/startup.py --json`'s output:
    medians and ratios (reference / jaxvaco), the reference's own compile and train
    seconds, the load average (1 min) at the start and the end, and the breakdown of the
    last cold and warm jaxvaco run."""
    def r2(x: float) -> float:
        return round(float(x), 2)

    reference = result["reference"]
    return {
        "repeats": result["repeats"], "total": int(result["total"]), "cpus": result["cpus"],
        "load": {"start": r2(result["load_start"]), "end": r2(result["load_end"])},
        "medians": {name: r2(v) for name, v in result["medians"].items()},
        "ratios": {name: r2(result["ratios"][name]) for name in STARTUP_RATIOS
                   if name in result["ratios"]},
        "reference_inside": {k: round(float(np.median([r[k] for r in reference])), 1)
                             for k in ("compile", "train")},
        "breakdown": {mode: {k: r2(v) for k, v in phases.items()}
                      for mode, phases in result["breakdown"].items()},
        "programs": {mode: [c["programs"], c["cache_hits"]]
                     for mode, c in result["compile"].items()},
    }


def startup_targets(value: dict) -> list[tuple[str, str, bool]]:
    """Each target: (the median it is on, its wording, met?), from the recorded numbers."""
    out = []
    for name, on, bound, wording in STARTUP_TARGETS:
        if on == "ratio":
            met = value["ratios"][name] >= bound
        else:
            met = value["medians"][name] < bound
        out.append((name, wording, met))
    return out


def measure_startup(ctx: Context) -> dict:
    out = ctx.tmp / "startup.json"
    run_command([ctx.python, *STARTUP.split()[1:], "--json", str(out)], ctx, "startup.log")
    return startup_value(json.loads(out.read_text()))


def startup_band(low: float, high: float) -> Callable[[dict, dict], tuple[bool, str]]:
    """Every ratio (reference / jaxvaco: cold, warm, default job warm) within low–high× of
    its recorded value: the whole process is timed against the reference run alternately,
    so the ratios, not the seconds, carry over between machines and loads."""
    def compare(recorded: dict, now: dict) -> tuple[bool, str]:
        notes, ok = [], True
        for name in STARTUP_RATIOS:
            if name not in recorded["ratios"]:
                continue
            r = now["ratios"][name] / recorded["ratios"][name]
            ok &= low <= r <= high
            notes.append(f"{name.removeprefix('jaxvaco ')} {r:.2f}")
        return ok, f"now / recorded: {', '.join(notes)} (band {low}–{high})"
    return compare


def show_startup(value: dict) -> str:
    m, r = value["medians"], value["ratios"]
    return (f"cold {r['jaxvaco cold']:.2f}, warm {r['jaxvaco warm']:.2f}; defaults "
            f"{m[STARTUP_DEFAULT]:.1f} s; load {value['load']['start']}")


# ------------------------------------------------------------ tables from committed data


def table_rows(markdown: str) -> list[list[str]]:
    """Cells of a markdown table (header first, the --- line dropped)."""
    rows = []
    for line in markdown.strip().splitlines():
        if not line.startswith("|") or set(line.replace("|", "").strip()) <= {"-"}:
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


ABLATION_OBJECTIVES = ("clip β", "clip π_T (decoupled)", "TV batch β", "TV batch π_T",
                       "TV sample β", "none (IS gradient)")
ABLATION_COLUMNS = (("behaviour", "gae"), ("behaviour", "vtrace"), ("learner", "gae"),
                    ("learner", "vtrace"))


def measure_ablation(ctx: Context, folder: Path | None = None) -> dict:
    """Per env: objective × (critic, advantages), each cell 'mean final greedy return at
    K = 0 → at K = 16 / mean final training return at K = 16', recomputed from the
    committed ablation.csv (whose final.csv must agree)."""
    from experiments.ablation import LAGS, final_table

    folder = folder or RESULTS / "ablation"
    final = final_table(read_results(folder / "ablation.csv"))
    committed = [(r["env"], r["cell"], int(r["K"]), int(r["seed"]), float(r["greedy"]))
                 for r in read_rows(folder / "final.csv")]
    if committed != [(r["env"], r["cell"], r["K"], r["seed"], r["greedy"]) for r in final]:
        raise RuntimeError("final.csv is not what ablation.csv gives")
    low, high = min(LAGS), max(LAGS)

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
    from experiments import fair_study

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
    from experiments import fair_study

    return fair_study.robustness_tables(fair_study_final(folder or RESULTS / "fair_study"))


def measure_ablation_robustness(ctx: Context, folder: Path | None = None) -> dict:
    """Retention and difference in differences against `ablation.BASELINE_CELL` of every
    learner-critic cell of the ablation, pooled over the three envs and per env at K = 16,
    recomputed from the committed ablation.csv."""
    from experiments import ablation

    final = ablation.final_table(read_results((folder or RESULTS / "ablation") / "ablation.csv"))
    results = ablation.robustness_results(final)
    envs = ", ".join(dict.fromkeys(r["env"] for r in final))
    return {f"Pooled ({envs})": ablation.robustness_rows(results),
            f"Per environment, K = {ablation.LAGS[-1]}": ablation.robustness_env_rows(results)}


def measure_ablation_matched_tv(ctx: Context, folder: Path | None = None) -> dict:
    """Per env: the clip's (ε) and the filter's (δ) realised mean TV(π_θ, β) and final
    training and greedy return at K = 0 and 16 (`ablation.matched_tv_tables`), recomputed
    from the committed ablation.csv."""
    from experiments import ablation

    rows = read_results((folder or RESULTS / "ablation") / "ablation.csv")
    return ablation.matched_tv_tables(ablation.final_table(rows), ablation.realised_tv(rows))


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
        from experiments.vaco_design import summary_table

        return {stage: table_rows(summary_table(RESULTS / "vaco_design" / f"{stage}.csv"))}
    return measure


def measure_sync_sweep(ctx: Context, folder: Path | None = None) -> dict:
    from experiments.sync_sweep import markdown

    rows = [{k: float(v) if k != "sync_interval" else int(v) for k, v in r.items()}
            for r in read_rows((folder or RESULTS / "sync_sweep") / "sync_sweep.csv")]
    intervals = list(dict.fromkeys(r["sync_interval"] for r in rows))
    return {"sync": table_rows(markdown(rows, intervals))}


def measure_sync_rerun(ctx: Context) -> dict:
    out = ctx.tmp / "sync_sweep"
    run_command([ctx.python, "experiments/sync_sweep.py", "--out", str(out)], ctx,
                "sync_sweep.log")
    return measure_sync_sweep(ctx, out)


def sync_means_close(recorded: dict, now: dict) -> tuple[bool, str]:
    """Each S: the new mean final return within 2 recorded standard deviations (3 seeds:
    a standard error would be too tight to call drift), lag/iterations within 0.05."""
    bad = []
    for old, new in zip(recorded["sync"][1:], now["sync"][1:], strict=True):
        (m0, s0), (m1, _) = (tuple(float(x) for x in c[1].split(" ± ")) for c in (old, new))
        lag0, lag1 = float(old[2].split(" ± ")[0]), float(new[2].split(" ± ")[0])
        if abs(m1 - m0) > 2 * s0 or abs(lag1 - lag0) > 0.05:
            bad.append(old[0])
    return not bad, "every S within 2 std" if not bad else f"S = {', '.join(bad)} outside"


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


LLM_RERUN_CELLS = ["--variants", "grpo-beta", "vaco-pit", "--ks", "0", "8"]
"""The cells `llm-lag-rerun` reruns: the paper's pair (GRPO on β, VACO on π_T) at K = 0 and
8, 4 of the comparison's 20 (≈ 40 min with the warm start, instead of ≈ 2.5 h); the
same training keys as the full run (greedy accuracy per seed as recorded); the sampled
evaluation's keys are split over the 8 runs instead of 16 (`jaxvaco.llm.evaluation`)."""


def measure_llm_lag_rerun(ctx: Context) -> dict:
    out = ctx.tmp / "llm_lag_working"
    run_command([ctx.python, "experiments/llm_lag.py", *LLM_RERUN_CELLS, "--out", str(out)],
                ctx, "llm_lag.log")
    return llm_lag_tables(out)


def measure_default_sweep(ctx: Context) -> dict:
    from experiments.default_sweep import OUT, summarize, summary_markdown

    return {"default_sweep": table_rows(summary_markdown(summarize(read_rows(OUT / "runs.csv"))))}


# ------------------------------------------------------------------------- the registry

ABLATION_DATA = "b5c21f6, c6a35c2, 6dae53a, 9a8ac49, 642dcc1, ed6639d, 672eae9"
"""The commits that added experiments/results/ablation/ablation.csv."""
FAIR_STUDY_DATA = (
    "f87b943, 08a6e09, 4ea9dbd, 82b559d, 2caef67, 062dfd7, 1afdf72, de36ec1, a2e4f65, "
    "a09b480, 5221383, d68ec86, 31512c6, a3b39af, ec3b909, 6ab0084, 0c77779, 45383da, "
    "d8b94da, 4660dba, 90dc78a, 0e277cb, 3f4e45f, 5d88802, 394a50d, 492c552, 77b09ba, "
    "2f709c7, 23799ff, cd2ca56, dbda32d, 664b022, df9455b, 417d247, ed10a2f, 015da28, "
    "2e214bb")
"""The commits that added experiments/results/fair_study/study.csv (and final.csv)."""

CLAIMS = [
    Claim("default-16-seeds", "PPO, CartPole-v1, defaults, 16 seeds in one program, 1M steps",
          "jaxvaco train --num-seeds 16", "seed-count",
          "greedy return >= 475 in at least 15 of 16 seeds", False, 5,
          measure_default_16, solved_at_least(15), show_solved),
    Claim("default-1-seed", "PPO, CartPole-v1, the default job (1 seed, 1M steps)",
          "jaxvaco train", "seed-count",
          "greedy return >= 475; wall time (with compilation) at most 2× the recorded one",
          False, 2, measure_default_1, solved_and_wall, show_solved),
    Claim("fast-learning", "PPO, CartPole-v1, defaults, 8 seeds, 100k steps (the learning "
          "claim CI reruns)", "jaxvaco train " + " ".join(FAST_LEARNING_FLAGS), "seed-count",
          "greedy return >= 475 in at least 7 of 8 seeds (the tuned defaults solve all 8, so a "
          "CI of the mean would be a point)", True, 1, measure_fast_learning,
          solved_at_least(7), show_solved),
    Claim("default-sweep", "the sweep that chose the defaults (seeds solved, mean greedy)",
          "python -m experiments.default_sweep --summary-only", "data",
          "recomputed from the committed runs.csv: identical", True, 0.1,
          measure_default_sweep, same, show_table, "a6323a5"),
    Claim("breakout-4-seeds", "PPO, Breakout-MinAtar, 4 seeds, 1M steps",
          "jaxvaco train " + " ".join(BREAKOUT_FLAGS), "statistical",
          "new mean greedy return inside the recorded 95% bootstrap CI", False, 2,
          measure_breakout, inside_ci, show_greedy),
    Claim("brax-pendulum", "PPO, Brax inverted_pendulum (spring), 2 seeds, 1.5M steps, no "
          "entropy bonus", "jaxvaco train " + " ".join(BRAX_FLAGS + BRAX_ENTROPY[True]),
          "statistical",
          "new mean greedy return inside the recorded 95% bootstrap CI", False, 2,
          lambda ctx: measure_brax(ctx, True), inside_ci, show_greedy),
    Claim("brax-pendulum-entropy", "the same with an entropy bonus of 0.01, 1M steps",
          "jaxvaco train " + " ".join(BRAX_FLAGS + BRAX_ENTROPY[False]), "statistical",
          "new mean greedy return inside the recorded 95% bootstrap CI",
          False, 2, lambda ctx: measure_brax(ctx, False), inside_ci, show_greedy),
    Claim("throughput-ref", "jaxvaco PPO / single-file reference (1 seed)",
          THROUGHPUT.format("ref"), "speed", "ratio within 0.8–1.25× of the recorded one",
          False, 3, measure_throughput("ref"), ratio_band(0.8, 1.25), show_ratio),
    Claim("throughput-vaco", "VACO (chosen defaults) / PPO at K = 0",
          THROUGHPUT.format("vaco"), "speed", "ratio within 0.8–1.25× of the recorded one",
          False, 3, measure_throughput("vaco"), ratio_band(0.8, 1.25), show_ratio),
    Claim("throughput-lag", "PPO at K = 16 (uniform, 4 groups) / K = 0",
          THROUGHPUT.format("lag"), "speed", "ratio within 0.8–1.25× of the recorded one",
          False, 3, measure_throughput("lag"), ratio_band(0.8, 1.25), show_ratio),
    Claim("throughput-seeds", "16 seeds in one program / 1 seed", THROUGHPUT.format("seeds"),
          "speed", "ratio within 0.8–1.25× of the recorded one", False, 4,
          measure_throughput("seeds"), ratio_band(0.8, 1.25), show_ratio),
    Claim("throughput-devices", "4 / 1 simulated CPU devices, data-parallel (global shuffle)",
          "python experiments/throughput.py --devices 4 --total 2e5 --repeats 2", "speed",
          "ratio within 0.8–1.25× of the recorded one", False, 5,
          measure_throughput("devices"), ratio_band(0.8, 1.25), show_ratio),
    Claim("startup", "whole process, `jaxvaco train` vs the reference: reference / jaxvaco "
          "wall time, cold and warm compilation cache, and the default job warm", STARTUP,
          "speed", "cold, warm and default-job ratios (reference / jaxvaco) each within "
          "0.8–1.25× of the recorded ones; measure on an idle CPU", False, 5,
          measure_startup, startup_band(0.8, 1.25), show_startup),
    Claim("vaco-prototype", "VACO prototype reproduction table (mean final greedy return)",
          "python -m experiments.vaco_design --stage prototype --summary-only", "data",
          "recomputed from the committed prototype.csv: identical", True, 0.1,
          measure_vaco_design("prototype"), same, show_table, "e39da00"),
    Claim("vaco-grid", "VACO design grid (mean final greedy return, IQM)",
          "python -m experiments.vaco_design --stage grid --summary-only", "data",
          "recomputed from the committed grid.csv: identical", True, 0.1,
          measure_vaco_design("grid"), same, show_table, "31e3ef0"),
    Claim("ablation", "lag ablation, per env: final greedy K = 0 → K = 16 / training K = 16",
          "python -m experiments.ablation --plot-only", "data",
          "recomputed from the committed ablation.csv (and final.csv): identical", True, 0.2,
          measure_ablation, same, show_table, ABLATION_DATA),
    Claim("ablation-robustness", "lag ablation, learner-critic cells: retention of the "
          "normalised final training and greedy return at K = 4 and 16 and difference in "
          "differences against clip β | learner | gae [95% CI], pooled and per env",
          "python -m experiments.ablation --plot-only", "data",
          "recomputed from the committed ablation.csv: identical", True, 0.2,
          measure_ablation_robustness, same, show_table, ABLATION_DATA),
    Claim("ablation-matched-tv", "lag ablation, PPO clip (ε) against VACO's TV batch filter "
          "(δ) on β: realised mean TV(π_θ, β) and final training and greedy return at K = 0 "
          "and 16 [95% CI]", "python -m experiments.ablation --plot-only", "data",
          "recomputed from the committed ablation.csv: identical", True, 0.1,
          measure_ablation_matched_tv, same, show_table, ABLATION_DATA),
    Claim("fair-study", "fair lag study: IQM of normalised final greedy / training return "
          "[95% CI], P(VACO > baseline); per env mean greedy / training return",
          "python -m experiments.fair_study --summary-only", "data",
          "recomputed from the committed study.csv (and final.csv): identical", True, 0.5,
          measure_fair_study, same, show_table, FAIR_STUDY_DATA),
    Claim("fair-study-robustness", "fair lag study, learner-critic variants: retention of the "
          "normalised final training and greedy return at each K and difference in "
          "differences against PPO-clip and PPO-KL with the learner's critic [95% CI], "
          "pooled as the mean over envs (beside the IQM) and per env",
          "python -m experiments.fair_study --summary-only", "data",
          "recomputed from the committed final.csv (study.csv's, checked by fair-study): "
          "identical", True, 0.5, measure_fair_study_robustness, same, show_table,
          FAIR_STUDY_DATA),
    Claim("gpu-throughput", "throughput ratios on an NVIDIA H200 (2048 envs, 2e7 steps)",
          "bash experiments/gpu_check.sh (device machine; step 'cartpole')", "data",
          "read from the committed throughput_cartpole.json: identical (no GPU in CI)", True,
          0.1, measure_gpu_throughput, same, show_table, "4ea9dbd"),
    Claim("sync-sweep", "delayed sync across 4 simulated devices (mean ± std over 3 seeds)",
          "python experiments/sync_sweep.py", "data",
          "recomputed from the committed sync_sweep.csv: identical", True, 0.1,
          measure_sync_sweep, same, show_table, "13b4741"),
    Claim("sync-sweep-rerun", "the sync sweep, rerun on the current code",
          "python experiments/sync_sweep.py --out DIR", "statistical",
          "every S: new mean final return within 2 recorded std, lag/iterations within 0.05",
          False, 2, measure_sync_rerun, sync_means_close, show_table, reruns=("sync-sweep",)),
    Claim("llm-lag", "LLM lag comparison on the working RL stage (final held-out greedy and "
          "sampled accuracy, mean ± 95% t-interval over 4 seeds)",
          "python experiments/llm_lag.py", "data",
          "read from the committed summary.csv: identical", True, 0.1,
          measure_llm_lag, same, show_table, "dad958e, 7de3d46, 1e70d55"),
    Claim("llm-lag-delta", "token-level VACO on β with δ = 0.005, the comparison's other "
          "settings and keys (mean ± 95% t-interval over 4 seeds)",
          "python experiments/llm_lag.py --variants vaco-beta --delta 0.005 --ks 0 4 8 "
          "--out experiments/results/llm_lag_delta", "data",
          "read from the committed summary.csv: identical", True, 0.1,
          measure_llm_lag_delta, same, show_table, "fa1f36d"),
    Claim("llm-lag-rerun", "4 of the LLM lag comparison's 20 cells (grpo β and vaco π_T at "
          "K = 0 and 8), rerun on the current code",
          "python experiments/llm_lag.py --variants grpo-beta vaco-pit --ks 0 8 --out DIR",
          "statistical",
          "new mean inside the recorded 95% t-interval in >= 6 of the 8 greedy and sampled "
          "cells (an independent 4-seed replicate lands inside in ≈ 85–90% of cells)", False,
          40, measure_llm_lag_rerun, most_cells_inside(0.75), show_table,
          reruns=("llm-lag",)),
]

BY_ID = {claim.id: claim for claim in CLAIMS}


def load_record(path: Path = RECORD) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _dump(obj, indent: str = "") -> str:
    """JSON with one line per list of scalars (a table row, a list of returns)."""
    inner = indent + " "
    if isinstance(obj, dict) and obj:
        items = [f"{inner}{json.dumps(k)}: {_dump(v, inner)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, list) and any(isinstance(x, (dict, list)) for x in obj):
        return "[\n" + ",\n".join(inner + _dump(x, inner) for x in obj) + "\n" + indent + "]"
    return json.dumps(obj, ensure_ascii=False)


def save_record(record: dict, path: Path = RECORD) -> None:
    path.write_text(_dump(record) + "\n")

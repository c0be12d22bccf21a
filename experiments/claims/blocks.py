"""The generated tables of README.md and of the results pages, one function per block
(`BLOCKS`: block name -> a function of the record that returns the block's markdown). Every
figure in them comes from experiments/results/claims.json; `render` writes them between
their markers."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments.claims.data import LLM_LAG, LLM_LAG_DELTA
from experiments.claims.record import REPO
from experiments.claims.registry import BY_ID
from experiments.claims.rules import (
    BRAX_COMPILE_TARGET,
    SOLVED,
    STARTUP_DEFAULT,
    brax_target_met,
    startup_targets,
)
from experiments.markdown import table


def at(record: dict, *ids: str) -> str:
    """'commit X (date)' for one or more claims."""
    parts = [f"`{record[i]['commit']}` ({record[i]['date'][:10]})" for i in ids]
    return ", ".join(dict.fromkeys(parts))


def footer(record: dict, ids: tuple[str, ...], data: str = "") -> str:
    """Where a generated table comes from: the claims, the commit, the data file."""
    names = ", ".join(f"`{i}`" for i in ids)
    when = f"data `{data}` committed in {at(record, *ids)}" if data else \
        f"measured at commit {at(record, *ids)}"
    return f"\n\n<sub>Generated from `experiments/results/claims.json` ({names}); {when}; " \
           f"checked by `python -m experiments.check_claims`.</sub>"


def learning(record: dict) -> str:
    rows = [["what", "result", "command", "measured at"]]

    def add(claim_id: str, what: str, result: Callable[[dict], str]) -> None:
        if claim_id in record:
            entry = record[claim_id]
            rows.append([what, result(entry["value"]), f"`{entry['command']}`",
                         f"`{entry['commit']}` ({entry['date'][:10]})"])

    def default16(v: dict) -> str:
        g = np.array(v["greedy"])
        return (f"greedy return ≥ 475 in **{int((g >= SOLVED).sum())} of {len(g)}** seeds "
                f"(≥ 15 required; mean {g.mean():.1f}, lowest {g.min():.0f}); {v['wall_s']} s "
                f"wall for all {len(g)}, with compilation, on a shared 2-core CPU")

    def brax(v: dict) -> str:
        train = " / ".join(f"{x:.0f}" for x in v.get("train", []))
        return "greedy return **" + " / ".join(f"{x:.0f}" for x in v["greedy"]) + \
            "** (of 1000)" + (f"; training return {train}" if train else "")

    add("default-16-seeds", "PPO, CartPole-v1, 16 seeds in one program, 1M steps (defaults)",
        default16)
    add("default-1-seed", "PPO, CartPole-v1, 1 seed (the default job, 1M steps)",
        lambda v: f"greedy return {v['greedy'][0]:.0f}; {v['wall_s']} s wall including "
                  "compilation")
    add("fast-learning", "PPO, CartPole-v1, 8 seeds, 100k steps (rerun in CI)",
        lambda v: f"greedy return ≥ 475 in **{sum(g >= 475 for g in v['greedy'])} of "
                  f"{len(v['greedy'])}** seeds (≥ 7 required; mean {v['mean']:.1f})")
    add("breakout-4-seeds", "PPO, Breakout-MinAtar, 4 seeds, 1M steps, lr 1e-3 (PPO's "
        "settings before the tuned defaults)",
        lambda v: "greedy return " + " / ".join(f"{x:.1f}" for x in v["greedy"])
        + " (uniform-random policy: 0.41)")
    add("brax-pendulum", "PPO, Brax inverted_pendulum (spring), 2 seeds, 1.5M steps, no "
        "entropy bonus, lr 1e-3 (PPO's settings before the tuned defaults)", brax)
    add("brax-pendulum-entropy", "the same with an entropy bonus of 0.01, 1M steps",
        lambda v: "greedy " + " / ".join(f"{x:.0f}" for x in v["greedy"]))
    return table(rows)


THROUGHPUT_ROWS = (("throughput-ref", "≥ 1.0, goal ≥ 1.2"), ("throughput-vaco", "≥ 0.9"),
                   ("throughput-lag", "≥ 0.95"),
                   ("throughput-seeds", "≥ 1.0 on CPU, > 10 on a GPU"),
                   ("throughput-devices", "overhead only on CPU"))


def throughput(record: dict) -> str:
    rows = [["comparison", "ratio", "env-steps/s", "goal", "command", "measured at"]]
    for claim_id, goal in THROUGHPUT_ROWS:
        entry = record[claim_id]
        v = entry["value"]
        sps = " vs ".join(f"{x / 1e3:.0f}k" for x in v["pair"])
        rows.append([BY_ID[claim_id].what, f"**{v['ratio']:.2f}**", sps, goal,
                     f"`{entry['command']}`", f"`{entry['commit']}` ({entry['date'][:10]})"])
    return table(rows)


def startup(record: dict) -> str:
    """The whole-process table: medians, ratios and the targets' verdicts (computed)."""
    entry = record["startup"]
    v = entry["value"]
    m, r = v["medians"], v["ratios"]
    verdict = {name: f"{wording} ({'met' if met else 'missed'})"
               for name, wording, met in startup_targets(v)}
    load = f"load average {v['load']['start']:.1f}"
    if v["load"].get("end") is not None:
        load += f" at the start, {v['load']['end']:.1f} at the end"
    inside = v["reference_inside"]
    rows = [[f"run ({entry['date'].removesuffix(' UTC')}, {load}, {v['cpus']} CPUs, median "
             f"of {v['repeats']})", "median wall", "ratio", "target"],
            [f"reference, single file (compile {inside['compile']:.1f} s, train "
             f"{inside['train']:.1f} s inside)", f"{m['reference']:.2f} s", "1.00", ""]]
    for name, label in (("jaxvaco cold", "`jaxvaco train`, cold cache"),
                        ("jaxvaco warm", "`jaxvaco train`, warm cache")):
        rows.append([label, f"{m[name]:.2f} s", f"**{r[name]:.2f}**", verdict[name]])
    rows.append(["`jaxvaco train` with no options, warm cache", f"{m[STARTUP_DEFAULT]:.2f} s",
                 "—", verdict[STARTUP_DEFAULT]])
    return table(rows) + footer(record, ("startup",))


STARTUP_PHASES = (  # timings.json phase, README label
    ("setup", "setup (make_train, init)"), ("train", "training"), ("evaluate", "evaluation"),
    ("checkpoint", "checkpoints"))


def startup_breakdown(record: dict) -> str:
    """Where the seconds of the last cold and warm jaxvaco run went; a phase with no
    compiling in either run is one figure, others 'compiling / running'."""
    v = record["startup"]["value"]
    cold, warm = v["breakdown"]["cold"], v["breakdown"]["warm"]
    source = v.get("breakdown_from", "the last cold and warm run of the measurement above")
    rows = [[f"phase ({source})", "cold", "warm"]]

    def add(label: str, key: str) -> None:
        if key in cold and key in warm:
            rows.append([label, f"{cold[key]:.2f} s", f"{warm[key]:.2f} s"])

    add("start-up (interpreter, imports, CLI)", "start-up (interpreter, imports, CLI)")
    for phase, label in STARTUP_PHASES:
        comp, run = f"{phase}: compiling", f"{phase}: running"
        if comp not in cold or comp not in warm:
            continue
        if cold[comp] or warm[comp]:
            rows.append([f"{label}: compiling / running",
                         *(f"{b[comp]:.2f} / {b[run]:.2f} s" for b in (cold, warm))])
        else:
            rows.append([label, *(f"{b[comp] + b[run]:.2f} s" for b in (cold, warm))])
    add("other host work (files, summary)", "other host work (files, summary)")
    add("exit", "exit (summary table, shutdown)")
    rows.append(["**total**", f"**{cold['total']:.1f} s**", f"**{warm['total']:.1f} s**"])
    programs = v.get("programs")
    note = ""
    if programs:
        (n_cold, hits_cold), (n_warm, hits_warm) = programs["cold"], programs["warm"]
        note = (f"\n\nCompiled programs: cold {n_cold} ({hits_cold} from the compilation "
                f"cache), warm {n_warm} ({hits_warm} from the cache).")
    if "breakdown_from" in v:  # a record whose measurement kept no breakdown of its own
        return table(rows) + note + "\n\n<sub>Generated from `experiments/results/claims." \
            f"json` (`startup`, its breakdown: {v['breakdown_from']}; the next measurement " \
            "replaces it); checked by `python -m experiments.check_claims`.</sub>"
    return table(rows) + note + footer(record, ("startup",))


def compile_programs(record: dict) -> str:
    """Cold compile time by env and program; the Brax target's verdict (computed)."""
    entry = record["compile-programs"]
    v = entry["value"]
    target_env, bound = BRAX_COMPILE_TARGET
    rows = [[f"env (cold, fresh cache; {entry['date'].removesuffix(' UTC')}, load average "
             f"{v['load']['start']:.1f} at the start, {v['load']['end']:.1f} at the end, "
             f"{v['cpus']} CPUs)", "whole process", "compiling (wall)", "XLA programs",
             "chunk: trace / lower / XLA", "evaluate", "init"]]
    for env, f in v["envs"].items():
        compile_s = f"**{f['compile_s']:.1f} s**"
        if env == target_env:
            verdict = "met" if brax_target_met(v) else "missed"
            compile_s += f" (target < {bound:g} s: {verdict})"
        rows.append([env, f"{f['seconds']:.1f} s", compile_s, str(f["programs"]),
                     *(" / ".join(f"{x:.1f}" for x in f["phases"][p]) + " s"
                       for p in ("chunk", "evaluate", "init"))])
    return table(rows) + footer(record, ("compile-programs",))


def sweep_compile(record: dict) -> str:
    entry = record["sweep-compile"]
    v = entry["value"]
    rows = [["cell", "wall", "compiling", "XLA programs (from the cache)"]]
    rows += [[f"`{c['cell']}`", f"{c['seconds']:.1f} s", f"{c['compile_s']:.1f} s",
              f"{c['programs']} ({c['cache_hits']})"] for c in v["cells"]]
    rows.append(["**the sweep**", f"{v['cells_s']:.1f} s", f"**{v['compile_s']:.1f} s "
                 f"({v['share']:.0%})**", ""])
    return table(rows) + footer(record, ("sweep-compile",))


PROTOTYPE = (  # README label, variant in prototype.csv, the spec's prototype (K = 0 / 4 / 16)
    ("`ppo` (anchor β, GAE from recorded values)", "ppo", "487 / 463 / 500"),
    ("`ppo`, anchor β, V-trace advantages", "ppo behaviour-anchor vtrace", "— / 283–312 / —"),
    ("`ppo`, anchor π_T, V-trace advantages", "ppo learner-anchor vtrace (decoupled)",
     "492 / 234 / 40"),
    ("`vaco` as in spec 3.1", "vaco spec 3.1", "484 / 33 / 59"),
    ("`vaco`, align off (GAE), anchor π_T", "vaco align gae", "495 / 76 / 383"),
)


def vaco_prototype(record: dict) -> str:
    rows = {row[0]: row[1:4] for row in record["vaco-prototype"]["value"]["prototype"][1:]}
    out = [["variant", "K = 0", "K = 4", "K = 16", "prototype (K = 0 / 4 / 16)"]]
    out += [[label, *rows[variant], spec] for label, variant, spec in PROTOTYPE]
    return table(out) + footer(record, ("vaco-prototype",),
                               "experiments/results/vaco_design/prototype.csv")


def vaco_grid(record: dict) -> str:
    return table(record["vaco-grid"]["value"]["grid"]) + footer(
        record, ("vaco-grid",), "experiments/results/vaco_design/grid.csv")


def per_env_tables(record: dict, claim_id: str, caption: str, data: str) -> str:
    """One table per environment of a claim's value ({env: rows}), each under '**env**' and
    `caption`, then the footer."""
    parts = [f"**{env}**{caption}\n\n" + table(rows)
             for env, rows in record[claim_id]["value"].items()]
    return "\n\n".join(parts) + footer(record, (claim_id,), data)


def ablation(record: dict) -> str:
    return per_env_tables(record, "ablation",
                          ": final greedy return K = 0 → K = 16 / final training return at "
                          "K = 16 (means over 8 seeds; 95% CIs in "
                          "`experiments/results/ablation/summary.md`)",
                          "experiments/results/ablation/ablation.csv")


def fair_study(record: dict) -> str:
    """The aggregates (their key names the envs) with CIs, the policy movement, then the
    compact per-env tables."""
    value = record["fair-study"]["value"]
    parts = []
    for name, rows in value.items():
        if name.endswith(")"):  # "Development environments (CartPole-v1, ...)"
            parts.append(f"**{name}**: IQM of the normalised final return [95% "
                         "stratified-bootstrap CI] over 16 seeds; P(VACO > variant) is "
                         "rliable's probability of improvement\n\n" + table(rows))
        elif name.startswith("Policy movement"):  # "Policy movement at K = 16"
            parts.append(f"**{name}**: mean TV distance one update moves the policy "
                         "(`tv/forward`) / mean TV distance between the policy acted with "
                         "and the learner's (`tv/backward`), over every logged iteration "
                         "of the 16 seeds\n\n" + table(rows))
        else:
            parts.append(f"**{name}**: mean final greedy / training return over 16 seeds "
                         "(95% CIs in `experiments/results/fair_study/summary.md`)\n\n"
                         + table(rows))
    return "\n\n".join(parts) + footer(record, ("fair-study",),
                                        "experiments/results/fair_study/study.csv")


ROBUSTNESS_CAPTIONS = {
    "Retention": "levels and retention [ours] of the normalised final return; *mean* = the "
                 "mean over the environments of the per-environment seed means (no environment "
                 "trimmed away), *IQM* = the pooled IQM of the tables above (it trims runs, at "
                 "K = 16 on the held-out pool whole environments); retention at K = score at K "
                 "− score at K = 0, paired by environment and seed, pooled as the mean; [95% "
                 "stratified-bootstrap CI] over 16 seeds; (L): with the learner's critic",
    "DiD": "difference in differences [ours]: the variant's retention − the baseline's, paired "
           "by environment and seed, mean over the environments [95% CI]; > 0: the variant "
           "keeps more of its K = 0 score",
    "Per environment": "retention and difference in differences on each environment, "
                       "normalised score [95% CI over its 16 seeds]",
}


def fair_study_robustness(record: dict) -> str:
    """The held-out and development pools' retention and DiD tables; the held-out domains
    and the per-environment tables folded away."""
    shown, folded = [], []
    for name, rows in record["fair-study-robustness"]["value"].items():
        kind, _, title = name.partition(": ")
        part = f"**{name}**: {ROBUSTNESS_CAPTIONS[kind.split(',')[0]]}\n\n" + table(rows)
        (shown if title.startswith(("Held-out (", "Development (")) else folded).append(part)
    return ("\n\n".join(shown) + "\n\n<details>\n<summary>The held-out MinAtar games and "
            "Brax tasks pooled apart; retention and DiD per environment at K = 16</summary>"
            "\n\n" + "\n\n".join(folded) + "\n\n</details>"
            + footer(record, ("fair-study-robustness",),
                     "experiments/results/fair_study/final.csv"))


def table_cell(rows: list[list[str]], label: str, kind: str, column: str) -> str:
    """The cell of a robustness table in the row (label, kind) and the column `column`."""
    row = next(r for r in rows[1:] if r[:2] == [label, kind])
    return row[rows[0].index(column)]


def robustness_headline(record: dict) -> str:
    """The README's headline numbers: retention at K = 16 of VACO, PPO-clip(L) and PPO-KL(L)
    and VACO's DiD against both, on the held-out pool, training and greedy return."""
    value = record["fair-study-robustness"]["value"]
    retention = next(r for n, r in value.items() if n.startswith("Retention: Held-out ("))
    did = next(r for n, r in value.items() if n.startswith("DiD: Held-out ("))
    parts = []
    for kind in ("training", "greedy"):
        kept = ", ".join(f"{v} {table_cell(retention, v, kind, 'retention K=16')}"
                         for v in ("VACO", "PPO-clip(L)", "PPO-KL(L)"))
        diffs = ", ".join(f"{pair} **{table_cell(did, pair, kind, 'DiD K=16')}**"
                          for pair in ("VACO − PPO-clip(L)", "VACO − PPO-KL(L)"))
        parts.append(f"{kind} return: retention {kept}; DiD {diffs}")
    return ("**Robustness to lag on the held-out pool [ours]** (normalised score at K = 16 − "
            "at K = 0, paired by seed, mean over the six held-out environments, 95% CIs; "
            "(L): with the learner's critic): " + "; ".join(parts) + ".\n\n<sub>Generated "
            "from `experiments/results/claims.json` (`fair-study-robustness`); checked by "
            "`python -m experiments.check_claims`.</sub>")


def entropy_swap(record: dict) -> str:
    """The held-out and development tables of the entropy swap; the held-out domains and the
    per-environment tables folded away."""
    shown, folded = [], []
    for name, rows in record["entropy-swap"]["value"].items():
        part = f"**{name}**\n\n" + table(rows)
        (shown if name.startswith(("Held-out (", "Development (")) else folded).append(part)
    return ("\n\n".join(shown) + "\n\n<details>\n<summary>The held-out MinAtar games and "
            "Brax tasks pooled apart; per environment</summary>\n\n" + "\n\n".join(folded)
            + "\n\n</details>" + footer(
                record, ("entropy-swap",),
                "experiments/results/entropy_swap/entropy_swap/results.csv"))


def ablation_robustness(record: dict) -> str:
    value = record["ablation-robustness"]["value"]
    (pooled, pooled_rows), (per_env, per_env_rows) = value.items()
    return (f"**{pooled}**: retention [ours] of the normalised final return of every "
            "learner-critic cell (score at K − score at K = 0, paired by environment and "
            "seed, mean over the environments) and its difference in differences against "
            "`clip β | learner | gae` (> 0: keeps more of its K = 0 score) [95% "
            "stratified-bootstrap CI] over 8 seeds\n\n" + table(pooled_rows)
            + f"\n\n<details>\n<summary>{per_env}: retention and DiD per "
            "environment</summary>\n\n" + table(per_env_rows) + "\n\n</details>"
            + footer(record, ("ablation-robustness",), "experiments/results/ablation/ablation.csv"))


def ablation_matched_tv(record: dict) -> str:
    return per_env_tables(record, "ablation-matched-tv",
                          ": PPO's clip on β (ε) and VACO's TV batch filter on β (δ), learner's "
                          "critic, GAE: realised mean TV(π_θ, β) (`tv/total`, every logged "
                          "iteration) and final training and greedy return, mean [95% CI] over "
                          "8 seeds",
                          "experiments/results/ablation/ablation.csv")


def default_sweep(record: dict) -> str:
    return table(record["default-sweep"]["value"]["default_sweep"]) + footer(
        record, ("default-sweep",), "experiments/results/default_sweep/runs.csv")


def sync_sweep(record: dict) -> str:
    return table(record["sync-sweep"]["value"]["sync"]) + footer(
        record, ("sync-sweep",), "experiments/results/sync_sweep/sync_sweep.csv")


def gpu_throughput(record: dict) -> str:
    return table(record["gpu-throughput"]["value"]["gpu_throughput"]) + footer(
        record, ("gpu-throughput",), "experiments/results/gpu_check/throughput_cartpole.json")


def llm_lag(record: dict, claim: str = "llm-lag", folder: Path = LLM_LAG) -> str:
    """The greedy and sampled accuracy tables of an llm_lag.py run (claim `claim`, data in
    `folder`, the folder its measure reads)."""
    value = record[claim]["value"]
    return ("**Greedy** held-out accuracy after 100 RL steps (mean ± 95% t-interval over "
            "seeds)\n\n" + table(value["greedy"])
            + "\n\n**Sampled** (τ = 1) held-out accuracy\n\n" + table(value["sampled"])
            + footer(record, (claim,), str((folder / "summary.csv").relative_to(REPO))))




def async_validation(record: dict) -> str:
    value = record["async-validation"]["value"]
    return (table(value["validation"]) + "\n\n**Replay against its own asynchronous run**, "
            "paired by seed\n\n" + table(value["paired"]) + footer(
        record, ("async-validation",), "experiments/results/async_validation/runs.csv"))


def async_pays(record: dict) -> str:
    value = record["async-pays"]["value"]
    return (table(value["pays"]) + "\n\n" + table(value["measured"]) + footer(
        record, ("async-pays",), "experiments/results/async_pays/async_pays.json"))


def titled_tables(record: dict, claim: str, data: str) -> str:
    """A claim whose value is {title: rows}: each table under its bold title."""
    parts = [f"**{title}**\n\n" + table(rows) for title, rows in record[claim]["value"].items()]
    return "\n\n".join(parts) + footer(record, (claim,), data)


BLOCKS: dict[str, Callable[[dict], str]] = {
    "learning": learning, "default-sweep": default_sweep, "throughput": throughput,
    "vaco-prototype": vaco_prototype, "vaco-grid": vaco_grid, "ablation": ablation,
    "sync-sweep": sync_sweep, "fair-study": fair_study, "gpu-throughput": gpu_throughput,
    "llm-lag": llm_lag, "startup": startup, "startup-breakdown": startup_breakdown,
    "llm-lag-delta": functools.partial(llm_lag, claim="llm-lag-delta", folder=LLM_LAG_DELTA),
    "fair-study-robustness": fair_study_robustness, "robustness-headline": robustness_headline,
    "ablation-robustness": ablation_robustness, "ablation-matched-tv": ablation_matched_tv,
    "entropy-swap": entropy_swap, "async-validation": async_validation,
    "async-pays": async_pays, "compile-programs": compile_programs,
    "sweep-compile": sweep_compile,
    "held-out-2": functools.partial(titled_tables, claim="held-out-2",
                                    data="experiments/results/held_out_2/held_out_2/results.csv"),
    "moonshot": functools.partial(titled_tables, claim="moonshot",
                                  data="experiments/results/moonshot/moonshot.csv"),
}

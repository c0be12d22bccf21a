"""Whole-process benchmark: how long `jaxvaco train` takes, start to exit, against the reference.

What a user waits for is the whole command: Python start-up and imports, tracing and
compiling (or loading from the persistent compilation cache), training, evaluation,
checkpoints and exit. This script runs `jaxvaco train` and the single-file reference
(../shared/bench/ref_ppo_cartpole.py) as subprocesses on the same job, alternating them,
and reports medians and ratios (shared CPUs are noisy: the ratio is the result):

    python experiments/startup.py                       # cold and warm, 3 repeats
    python experiments/startup.py --repeats 5 --json startup.json
    python experiments/startup.py --default-job         # also `jaxvaco train` as shipped
    python experiments/startup.py --programs --json programs.json  # compile time by program

The README's start-up tables are the `startup` claim (experiments/claims/registry.py), which runs
this script with `--repeats 7 --default-job --json` and records medians, ratios, the load
average at the start and the end, and the breakdown in experiments/results/claims.json;
re-measure (on an idle CPU) and re-render with

    python -m experiments.check_claims --only startup --record --render

- cold: `jaxvaco train` with a fresh, empty compilation cache directory every run;
- warm: `jaxvaco train` with a cache filled by an earlier identical run (not timed);
- reference: the reference as a user runs it (`--repeats 1`: one training run; JAX's
  persistent cache is off by default, so it compiles every time). `--reference-warm` adds
  the reference with JAX's cache switched on by hand, for context.

The job is the reference's: CartPole-v1, 256 envs × 128 steps, 4 epochs × 4 minibatches,
64×64 tanh MLP, learning rate 2.5e-4 annealed, 1M env steps, one seed. jaxvaco also
evaluates (every 5 chunks and at the end) and checkpoints (every 5 chunks and at the end),
as its default does; the reference does neither. `--default-job` also times `jaxvaco train`
with no options at all (16 envs, 1M steps) with a warm cache.

`--programs` instead times one cold `jaxvaco train` of each of `PROGRAM_JOBS` (CartPole, a
MinAtar game, a Brax task) and tables its compile time by program (init, chunk, evaluate,
and the small eager ones: eval keys, stacking rows) and phase: tracing, lowering to MLIR,
XLA compiling (`jaxvaco.host.compilation.CompileStats.phases`; a program compiled in a
background thread overlaps the others, so the phases add up to more than the wall time).

Then a breakdown of one cold and one warm jaxvaco run, from the `timings.json` the run
writes and the times seen from outside: start-up (interpreter and imports, until `run`
begins), setup (building the programs and initialising), training, evaluation and
checkpoints, each split into compiling and running, the compiled programs, and exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_REFERENCE = Path(__file__).resolve().parents[1] / ".." / "shared" / "bench"
JOB = ["--env", "CartPole-v1", "--num-envs", "256", "--num-steps", "128", "--update-epochs", "4",
       "--num-minibatches", "4", "--learning-rate", "2.5e-4", "--hidden-sizes", "64", "64",
       "--activation", "tanh", "--clip-coef", "0.2", "--ent-coef", "0.01",
       "--ppo.critic", "behaviour"]
"""The reference's PPO: its ε, c_e and GAE on the recorded values (PPO's defaults before
issue 30 made the tuned values and the learner's critic the defaults)."""


PROGRAM_JOBS = {
    "CartPole-v1": ["--env", "CartPole-v1", "--total-timesteps", "100000"],
    "Breakout-MinAtar": ["--env", "Breakout-MinAtar", "--total-timesteps", "50000"],
    "inverted_pendulum": ["--env", "inverted_pendulum", "--total-timesteps", "100000"],
}
"""The default job of each environment (its family's defaults), shortened: compiling does
not depend on the number of steps, only on the shapes."""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """Run cmd; (seconds, launch time, exit time, stdout). Fails loudly on a non-zero exit."""
    launch = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, launch, time.time(), proc.stdout


class Bench:
    def __init__(self, args, work: Path):
        self.args, self.work, self.count = args, work, 0
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE",
                                         "JAXVACO_CACHE"))}
        self.env["PYTHONUNBUFFERED"] = "1"

    def jaxvaco(self, cache: Path, job: list[str] | None = None) -> dict:
        self.count += 1
        name = f"run{self.count}"
        job = JOB + ["--total-timesteps", str(int(self.args.total))] if job is None else job
        cmd = [sys.executable, "-m", "jaxvaco", "train", *job,
               "--results-dir", str(self.work / "results"), "--run-name", name,
               "--compilation-cache", str(cache)]
        seconds, launch, end, _ = timed(cmd, self.env)
        timings = json.loads((self.work / "results" / name / "timings.json").read_text())
        shutil.rmtree(self.work / "results" / name)
        return {"seconds": seconds, "launch": launch, "end": end, "timings": timings}

    def reference(self, cache: Path | None = None) -> dict:
        cmd = [sys.executable, str(self.args.reference), "--repeats", "1",
               "--total", str(self.args.total)]
        env = dict(self.env)
        if cache is not None:
            env.update(JAX_COMPILATION_CACHE_DIR=str(cache),
                       JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                       JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
        seconds, _, _, out = timed(cmd, env)
        figures = dict(line.split(": ") for line in out.splitlines() if ": " in line)
        return {"seconds": seconds, "compile": float(figures["compile_sec"]),
                "train": float(figures["run_sec_best"])}


def git_commit() -> str:
    """The checked-out commit (short), "+dirty" when tracked files have uncommitted changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=Path(__file__).resolve().parents[1],
                              capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def breakdown(run: dict) -> dict[str, float]:
    """Where the seconds of one jaxvaco run went (see the module docstring)."""
    t = run["timings"]
    out = {"start-up (interpreter, imports, CLI)": t["started"] - run["launch"]}
    for phase, figures in t["phases"].items():
        out[f"{phase}: compiling"] = figures["compiling"]
        out[f"{phase}: running"] = figures["seconds"] - figures["compiling"]
    inside = sum(f["seconds"] for f in t["phases"].values())
    out["other host work (files, summary)"] = t["finished"] - t["started"] - inside
    out["exit (summary table, shutdown)"] = run["end"] - t["finished"]
    out["total"] = run["seconds"]
    return out


def print_breakdown(title: str, run: dict) -> None:
    print(f"\n{title}")
    for name, seconds in breakdown(run).items():
        print(f"  {name:<40} {seconds:6.2f} s")
    compile_ = run["timings"]["compile"]
    print(f"  compiled programs: {compile_['programs']} ({compile_['cache_hits']} from the "
          f"cache), {compile_['seconds']:.2f} s tracing + lowering + compiling; XLA by program:")
    for name, seconds in sorted(compile_["by_program"].items(), key=lambda kv: -kv[1])[:6]:
        print(f"    {name:<38} {seconds:6.2f} s")


def program_table(work: Path, bench: Bench) -> dict[str, dict]:
    """One cold run of each `PROGRAM_JOBS` job: its seconds, compile figures and phases."""
    out = {}
    for env, job in PROGRAM_JOBS.items():
        run = bench.jaxvaco(work / f"cold-{env}", job=[*job, "--no-progress"])
        out[env] = {"seconds": run["seconds"], "compile": run["timings"]["compile"]}
        print_programs(env, out[env])
    return out


def print_programs(env: str, figures: dict) -> None:
    compile_ = figures["compile"]
    print(f"\n{env}: whole process {figures['seconds']:.1f} s, compiling "
          f"{compile_['seconds']:.1f} s (wall), {compile_['programs']} XLA programs")
    print(f"  {'program':<24} {'trace':>7} {'lower':>7} {'compile':>8}")
    for name, phases in sorted(compile_["phases"].items(), key=lambda kv: -sum(kv[1].values())):
        if sum(phases.values()) >= 0.05:
            print(f"  {name:<24} " + " ".join(f"{phases[p]:7.2f}" for p in
                                              ("trace", "lower", "compile")))


def write_programs(args: argparse.Namespace, date: str, load_start: float,
                   table: dict[str, dict]) -> None:
    if args.json:
        args.json.write_text(json.dumps({"date": date, "commit": git_commit(),
                                         "load_start": load_start,
                                         "load_end": os.getloadavg()[0], "programs": table},
                                        indent=2))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each (median)")
    parser.add_argument("--total", type=float, default=1e6, help="env steps")
    parser.add_argument("--reference", type=Path,
                        default=DEFAULT_REFERENCE / "ref_ppo_cartpole.py")
    parser.add_argument("--reference-warm", action="store_true",
                        help="also time the reference with JAX's persistent cache on (warm)")
    parser.add_argument("--default-job", action="store_true",
                        help="also time `jaxvaco train` with its defaults, warm cache")
    parser.add_argument("--programs", action="store_true",
                        help="only the compile time by program of PROGRAM_JOBS, cold")
    parser.add_argument("--json", type=Path,
                        help="also write the results here (with the date, commit and load)")
    return parser.parse_args(argv)


def timed_repeats(args: argparse.Namespace, work: Path, bench: Bench) -> tuple[dict, dict, list]:
    """Interleaved repeats, side by side: jaxvaco cold (a fresh cache each time), the
    reference, jaxvaco warm (and the optional extras). The times per case, the last cold
    and warm jaxvaco runs, and the reference's runs."""
    warm_cache, ref_cache = work / "warm-cache", work / "ref-cache"
    bench.jaxvaco(warm_cache)  # fills the warm cache
    if args.reference_warm:
        bench.reference(ref_cache)
    if args.default_job:
        bench.jaxvaco(warm_cache, job=[])
    times: dict[str, list[float]] = {"jaxvaco cold": [], "jaxvaco warm": [], "reference": []}
    if args.reference_warm:
        times["reference, JAX cache warm"] = []
    if args.default_job:
        times["jaxvaco train (defaults), warm"] = []
    runs, ref_runs = {}, []
    for i in range(args.repeats):
        runs["cold"] = bench.jaxvaco(work / f"cold-cache-{i}")
        times["jaxvaco cold"].append(runs["cold"]["seconds"])
        ref_runs.append(bench.reference())
        times["reference"].append(ref_runs[-1]["seconds"])
        runs["warm"] = bench.jaxvaco(warm_cache)
        times["jaxvaco warm"].append(runs["warm"]["seconds"])
        if args.reference_warm:
            times["reference, JAX cache warm"].append(bench.reference(ref_cache)["seconds"])
        if args.default_job:
            times["jaxvaco train (defaults), warm"].append(
                bench.jaxvaco(warm_cache, job=[])["seconds"])
        print(f"  repeat {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
              flush=True)
    return times, runs, ref_runs


def report(args: argparse.Namespace, times: dict, runs: dict, ref_runs: list,
           load: tuple[float, float]) -> dict[str, float]:
    """Print the medians, their ratios (reference / this) and the breakdowns; the medians."""
    medians = {name: statistics.median(values) for name, values in times.items()}
    ref = medians["reference"]
    print(f"\nwhole process, median of {args.repeats} (ratio = reference / this: > 1 is faster)")
    for name, value in medians.items():
        print(f"  {name:<34} {value:6.2f} s   ratio {ref / value:.2f}")
    print(f"  reference itself: compile {statistics.median(r['compile'] for r in ref_runs):.2f} s,"
          f" train {statistics.median(r['train'] for r in ref_runs):.2f} s")
    print("  targets: cold >= 1.2, warm >= 1.8; jaxvaco train (defaults) warm < 8 s (idle CPU)")
    print(f"  load average (1 min) at the start {load[0]:.1f}, at the end {load[1]:.1f}")
    print_breakdown("breakdown of the last cold jaxvaco run", runs["cold"])
    print_breakdown("breakdown of the last warm jaxvaco run", runs["warm"])
    return medians


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.reference.exists():
        sys.exit(f"reference script not found at {args.reference}; pass --reference PATH")
    date, load_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0]
    print(f"{date}, {os.cpu_count()} CPUs, load average {load_start:.1f}; {args.repeats} "
          f"repeats, {args.total:.0f} env steps", flush=True)
    with tempfile.TemporaryDirectory(prefix="jaxvaco-startup-") as tmp:
        work = Path(tmp)
        bench = Bench(args, work)
        if args.programs:
            return write_programs(args, date, load_start, program_table(work, bench))
        times, runs, ref_runs = timed_repeats(args, work, bench)
    load_end = os.getloadavg()[0]
    medians = report(args, times, runs, ref_runs, (load_start, load_end))
    if args.json:
        args.json.write_text(json.dumps({
            "date": date, "commit": git_commit(), "cpus": os.cpu_count(),
            "load_start": load_start, "load_end": load_end, "repeats": args.repeats,
            "total": args.total, "default_job": args.default_job, "times": times,
            "medians": medians,
            "ratios": {name: medians["reference"] / value for name, value in medians.items()},
            "reference": ref_runs,
            "breakdown": {mode: breakdown(run) for mode, run in runs.items()},
            "compile": {mode: run["timings"]["compile"] for mode, run in runs.items()},
        }, indent=2))


if __name__ == "__main__":
    main()

"""A sweep's compile share, and what its second cell compiles (issue 37, item 3).

Runs a two-cell CartPole-v1 sweep whose cells differ only in hyperparameters (learning rate
and entropy coefficient: array arguments of the same programs, `jaxvaco.core.hparams`) in a
subprocess, with a fresh, empty compilation cache, and reports for each cell its wall
time, its compile time (tracing, lowering and XLA, wall clock), the XLA programs it
compiled and how many of those came from the cache; and the sweep's own line
`compiling: X s of Y s in the cells trained (Z%)`. The second cell should find every XLA
program in the cache, so what it repeats is tracing and lowering:

    python -m experiments.sweep_compile                     # prints the table
    python -m experiments.sweep_compile --json out.json     # also writes it

It is the `sweep-compile` claim (experiments/claims/registry.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """
name = "compile_share"
results_dir = "{results}"
envs = ["CartPole-v1"]
lag_delays = [0]

[base]
num_seeds = 2
num_envs = 16
num_steps = 128
total_timesteps = {steps}
progress = false

[variants."lr 2.5e-4"]
learning_rate = 2.5e-4
ent_coef = 0.01

[variants."lr 1e-3, c_e 0.02"]
learning_rate = 1e-3
ent_coef = 0.02
"""
SHARE_LINE = re.compile(r"compiling: ([\d.]+) s of ([\d.]+) s in the cells trained")


def run_sweep(work: Path, steps: int) -> dict:
    """Run the sweep in `work` with a fresh cache; its cells' figures and its share line."""
    spec = work / "sweep.toml"
    spec.write_text(SPEC.format(results=work / "results", steps=steps))
    env = {**os.environ, "JAXVACO_CACHE_DIR": str(work / "cache")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jaxvaco", "sweep", str(spec)], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"the sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    share = SHARE_LINE.search(proc.stdout + proc.stderr)
    if share is None:
        sys.exit("the sweep printed no compile share line:\n" + proc.stdout[-3000:])
    timings = {folder.name: json.loads((folder / "timings.json").read_text())
               for folder in (work / "results" / "compile_share" / "runs").iterdir()}
    cells = [{"cell": name, "seconds": t["finished"] - t["started"],
              "compile_s": t["compile"]["seconds"], "programs": t["compile"]["programs"],
              "cache_hits": t["compile"]["cache_hits"]}
             for name, t in sorted(timings.items(), key=lambda kv: kv[1]["started"])]
    return {"cells": cells, "compile_s": float(share[1]), "cells_s": float(share[2]),
            "share": float(share[1]) / float(share[2]), "wall_s": wall}


def report(result: dict) -> None:
    print(f"{'cell':<44} {'wall':>7} {'compiling':>10} {'XLA programs (cached)':>22}")
    for c in result["cells"]:
        print(f"{c['cell']:<44} {c['seconds']:6.1f}s {c['compile_s']:9.1f}s "
              f"{c['programs']:>14} ({c['cache_hits']})")
    print(f"sweep: compiling {result['compile_s']:.1f} s of {result['cells_s']:.1f} s in the "
          f"cells ({result['share']:.0%}); whole process {result['wall_s']:.1f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192, help="env steps per cell")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="jaxvaco-sweep-compile-") as tmp:
        result = run_sweep(Path(tmp), args.steps)
    result.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  load_end=os.getloadavg()[0], cpus=os.cpu_count())
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

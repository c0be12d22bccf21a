"""Shared plumbing of the experiment scripts: run a named variant as one program, with the
lag K (and any other hyperparameter) vmapped beside the seeds, append its tidy rows
(`jaxvaco.results.FIELDS`) to a CSV, and skip variants the CSV already holds (so a killed
script resumes where it stopped).

A variant interrupted midway resumes from its newest checkpoint. As a safety net for
long runs (we met an XLA CPU runtime hang, now avoided in `runner.Compiled`),
`hang_watchdog` ends the process with HANG_EXIT_CODE when it has used no CPU for a while,
and the script's `--retry-hangs` loop (`parse_with_retries`) starts it again, which resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from jaxvaco.config import TrainConfig
from jaxvaco.results import append_rows, done_keys, variant_rows
from jaxvaco.runner import run

HANG_EXIT_CODE = 75


def replace_nested(config: TrainConfig, **overrides) -> TrainConfig:
    """dataclasses.replace that also accepts 'group.field' keys (e.g. 'vaco.delta')."""
    flat = {k: v for k, v in overrides.items() if "." not in k}
    for key, value in overrides.items():
        if "." in key:
            group, field = key.split(".")
            current = flat.get(group, getattr(config, group))
            flat[group] = dataclasses.replace(current, **{field: value})
    return dataclasses.replace(config, **flat)


def run_variant(base: TrainConfig, env: str, variant: str, overrides: dict,
                lags: Sequence[int], csv_path: Path, results_dir: Path) -> None:
    """Train one variant on one env for every K in `lags` × seeds, in one program."""
    if (env, variant) in done_keys(csv_path, ("env", "variant")):
        print(f"skip {env} {variant}: already in {csv_path}")
        return
    config = replace_nested(base, env=env, run_name=f"{env}__{variant}",
                            results_dir=str(results_dir), **overrides)
    config = replace_nested(config, **{"lag.max_delay": max(lags)})
    run_dir = results_dir / config.run_name
    resume = run_dir if (run_dir / "config.json").exists() else None  # no checkpoint: restart
    result = run(config, grid={"lag_delay": list(lags)}, resume=resume)
    if result.stop_signal:  # interrupted: the checkpoint is saved, the rows are incomplete
        sys.exit(128 + result.stop_signal)
    append_rows(csv_path, variant_rows(result.rows, env, config.algo, variant))


def hang_watchdog(idle_seconds: float = 180.0, period: float = 30.0) -> None:
    """Exit with HANG_EXIT_CODE if this process uses < 1 s of CPU in `idle_seconds`."""

    def watch():
        history = []
        while True:
            time.sleep(period)
            history = (history + [time.process_time()])[-int(idle_seconds / period) - 1:]
            if len(history) > idle_seconds / period and history[-1] - history[0] < 1.0:
                print(f"watchdog: no CPU progress in {idle_seconds:.0f} s, exiting to retry",
                      file=sys.stderr, flush=True)
                os._exit(HANG_EXIT_CODE)

    threading.Thread(target=watch, daemon=True).start()


def parse_with_retries(parser: argparse.ArgumentParser, module: str) -> argparse.Namespace:
    """Parse the script's arguments, adding --retry-hangs.

    With --retry-hangs the script reruns itself as `python -m module` in a child process,
    restarted (and so resumed) while it exits with HANG_EXIT_CODE; this process then exits
    with the child's code. Otherwise it starts `hang_watchdog` and returns the arguments.
    """
    parser.add_argument("--retry-hangs", action="store_true",
                        help="run in a child process, restarted (resuming) if it hangs")
    args = parser.parse_args()
    if args.retry_hangs:
        argv = [a for a in sys.argv[1:] if a != "--retry-hangs"]
        for _ in range(5):
            code = subprocess.call([sys.executable, "-m", module, *argv])
            if code != HANG_EXIT_CODE:
                break
        sys.exit(code)
    hang_watchdog()
    return args

"""`jaxvaco sweep`: run a grid of environments × algorithms × lags × seeds; restarting it
skips finished cells."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Annotated

from jaxvaco.cli.common import Flat, parse_args, report_failure, stopped_message, warn
from jaxvaco.cli.plot import print_table
from jaxvaco.core.config import ConfigError
from jaxvaco.host.checkpoint import RunWriteError
from jaxvaco.host.run_dir import RunControl
from jaxvaco.lab.sweep import SweepConfig


@dataclasses.dataclass(frozen=True)
class SweepArgs:
    sweep: Annotated[SweepConfig, Flat] = SweepConfig()
    control: Annotated[RunControl, Flat] = RunControl()


def sweep_command(argv: list[str]) -> int:
    from jaxvaco.lab.sweep import (
        load_sweep_file,
        long_lags,
        plan_sweep,
        run_sweep,
        unlike_comparisons,
        validate_sweep,
    )

    path = argv[0] if argv and not argv[0].startswith("-") else None
    rest = argv[1:] if path else argv
    try:
        default = SweepArgs(sweep=load_sweep_file(Path(path))) if path else SweepArgs()
    except ConfigError as error:
        return report_failure(error, "")
    args = parse_args(SweepArgs, rest, default=default, prog="jaxvaco sweep [FILE.toml]",
                      description="Run a grid of envs × algos × lags × seeds; FILE.toml "
                                  "gives the defaults, flags override them.")
    try:
        spec = validate_sweep(args.sweep)
        plan = plan_sweep(spec)  # every cell validated once, before anything is made
        warn(long_lags(spec, plan) + unlike_comparisons(spec, plan))
        result = run_sweep(spec, args.control, plan=plan)
    except (ConfigError, RunWriteError, OSError) as error:
        return report_failure(error, "invalid sweep: ")
    if result.stop_signal:
        hint = f"jaxvaco sweep {' '.join(argv)}"
        print(stopped_message(result.stop_signal, result.directory, hint), file=sys.stderr)
        return 128 + result.stop_signal
    if result.ran:
        print(result.compile_share(), flush=True)
    print_sweep_answer(result.directory)
    return 1 if result.failed else 0


def print_sweep_answer(directory: Path) -> None:
    """The end of a sweep: its results table (`print_table`), then, as the last line, the
    command that plots it. Nothing when no cell is complete."""
    from jaxvaco.lab.results import load_results

    try:
        table = load_results(directory)
    except ConfigError:  # no complete cell: nothing to show or plot
        return
    print_table(table, directory)
    print(f"jaxvaco plot {shlex.quote(str(directory))}", flush=True)

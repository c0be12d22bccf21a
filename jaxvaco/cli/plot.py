"""`jaxvaco plot`: print a sweep's (or a run's) results table and plot it."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import tyro

from jaxvaco.cli.common import describe, parse_args, report_failure, warn
from jaxvaco.core.config import ConfigError


def print_table(table: dict, source: Path) -> None:
    """One row per (env, variant), a column per K (`robustness_table`, printed by
    `print_results_table`, both of `jaxvaco.lab.sweep_table`); a table it cannot
    summarise gets a warning instead."""
    from jaxvaco.lab.sweep_table import print_results_table, robustness_table

    try:
        rows = robustness_table(table)
    except (KeyError, ValueError) as error:
        warn([f"cannot summarise {source}: {describe(error)}"])
        return
    print_results_table(rows)


@dataclasses.dataclass(frozen=True)
class PlotArgs:
    directory: tyro.conf.Positional[Path]
    """A sweep directory (with results.csv), a single run directory (with metrics.jsonl), or
    a tidy CSV (an experiment's table, e.g. experiments/results/fair_study/study.csv)."""
    out: Path | None = None
    """Where the figures go; default: <directory>/plots (beside the CSV for a CSV)."""
    metric: str = "return"
    """Column plotted as the return (e.g. eval/greedy_return)."""


def plot_command(argv: list[str]) -> int:
    from jaxvaco.lab.results import load_results, plot_results

    args = parse_args(PlotArgs, argv, prog="jaxvaco plot",
                      description="Print a sweep's (or a run's) results table and plot "
                                  "it as PNG and PDF.")
    try:
        table = load_results(args.directory)
        print_table(table, args.directory)
        paths = plot_results(args.directory, args.out, args.metric, table=table)
    except (ConfigError, KeyError, ValueError) as error:
        print(f"jaxvaco: cannot plot {args.directory}: {describe(error)}", file=sys.stderr)
        return 2
    except OSError as error:
        return report_failure(error, "")
    for path in paths:
        print(path)
    return 0

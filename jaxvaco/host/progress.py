"""Progress bar and end-of-run summary table (rich), fed by the host loop only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table

from jaxvaco.core.algos.registry import fraction_metrics
from jaxvaco.core.config import TrainConfig


def _nanmean(values: list) -> float:
    finite = [v for v in values if v is not None]
    return float(np.mean(finite)) if finite else float("nan")


class Progress:
    """A bar over env steps showing env-steps/s, mean training return, tv/total and the
    algorithm's fraction metric (`AlgorithmSpec.fraction`: clipped, outside, filtered)."""

    def __init__(self, config: TrainConfig, enabled: bool = True):
        self.config = config
        self.enabled = enabled
        self._bar = RichProgress(
            TextColumn(f"[bold]{config.algo}[/] {config.env}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            disable=not enabled,
        )

    def __enter__(self):
        self._bar.__enter__()
        total = self.config.num_iterations * self.config.batch_size
        self._task = self._bar.add_task("train", total=total, status="compiling...")
        return self

    def __exit__(self, *exc):
        return self._bar.__exit__(*exc)

    def update(self, rows: list[dict], info: dict) -> None:
        mean = lambda name: _nanmean([row[name] for row in rows])  # noqa: E731
        status = (f"{info['sps']:>9,.0f} steps/s | return {mean('episode/return'):7.1f}"
                  f" | tv/total {mean('tv/total'):.3f}")
        fraction = fraction_metrics().get(self.config.algo)
        if fraction and rows and fraction in rows[0]:
            status += f" | {fraction.split('/')[1].split('_')[0]} {mean(fraction):.3f}"
        self._bar.update(self._task, completed=info["env_steps"], status=status)


def print_summary(config: TrainConfig, run_dir: Path, runs: list[dict], summary: dict) -> None:
    """One row per run (its seed and swept values); after the runs of each combination of
    swept values (each K of a lag sweep) that has several seeds, their mean over seeds. Runs
    of different K are never averaged together."""
    table = Table(title=f"{config.algo} on {config.env}: {len(runs)} run(s)")
    labels = list(runs[0])
    for name in labels:
        table.add_column(name, justify="right")
    columns = [k for k in ("train_return", "eval/greedy_return", "eval/stochastic_return")
               if k in summary]
    for name in columns:
        table.add_column(name, justify="right")
    groups: dict[tuple, list[int]] = {}
    for r, run in enumerate(runs):
        groups.setdefault(tuple(run[k] for k in labels if k != "seed"), []).append(r)
    for members in groups.values():
        for r in members:
            table.add_row(*(str(runs[r][k]) for k in labels),
                          *(f"{summary[k][r]:.1f}" for k in columns))
        if len(members) > 1:
            first = runs[members[0]]
            means = (np.nanmean(np.asarray(summary[k], dtype=float)[members]) for k in columns)
            table.add_row(*("mean" if k == "seed" else str(first[k]) for k in labels),
                          *(f"{m:.1f}" for m in means), style="bold")
    console = Console()
    console.print(table)
    console.print(f"env steps per run: {int(summary['env_steps'][0]):,}   "
                  f"throughput (after compile): {float(summary['sps']):,.0f} env-steps/s   "
                  f"results: {run_dir}", soft_wrap=True)
    if "compile_time" in summary:
        console.print(f"compile: {float(summary['compile_time']):.1f} s, "
                      f"{int(summary['compiled_programs'])} programs "
                      f"({int(summary['cache_hits'])} from the compilation cache)")

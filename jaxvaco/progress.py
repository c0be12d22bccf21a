"""Progress bar and end-of-run summary table (rich), fed by the host loop only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table
from rich.text import Text

from jaxvaco.config import TrainConfig
from jaxvaco.metric_names import FRACTIONS


def _nanmean(values: list) -> float:
    finite = [v for v in values if v is not None]
    return float(np.mean(finite)) if finite else float("nan")


class Progress:
    """A bar over env steps showing env-steps/s, mean training return, tv/total and the
    algorithm's fraction metric (`jaxvaco.metric_names.FRACTIONS`: clipped, outside, filtered)."""

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
        fraction = FRACTIONS.get(self.config.algo)
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


def results_table(rows: list[dict]) -> tuple[Table, list[str]]:
    """A rich table of `jaxvaco.analysis.sweep_table.robustness_table` rows and the footnotes
    that say what its cells are."""
    from jaxvaco.analysis.tables import format_estimate

    ks = sorted({k for row in rows for k in row["return"]})
    greedy = any(row["greedy"] for row in rows)
    retention = bool(rows) and "retention" in rows[0]
    table = Table(title="Final return by policy lag K: mean [95% CI] over seeds")
    table.add_column("env")
    table.add_column("variant")
    table.add_column("seeds", justify="right")
    for k in ks:
        table.add_column(f"K={k}\nreturn", justify="right")
        if greedy:
            table.add_column(f"K={k}\ngreedy", justify="right")
    if retention:
        k_max = rows[0]["retention_K"]
        table.add_column(f"retention\nK={k_max} − K=0", justify="right")
    for row in rows:
        counts = {k: row["return"][k].n if k in row["return"] else 0 for k in ks}
        seeds = str(row["seeds"])
        if set(counts.values()) != {row["seeds"]}:  # some K has fewer
            seeds += f" ({', '.join(f'K={k}: {n}' for k, n in counts.items())})"
        cells = [str(row["env"]), str(row["variant"]), seeds]
        for k in ks:
            cells.append(format_estimate(row["return"].get(k)))
            if greedy:
                cells.append(format_estimate(row["greedy"].get(k)))
        if retention:
            digits = 3 if row["scale"] == "normalised" else 1
            cells.append(format_estimate(row["retention"], digits))
        table.add_row(*(Text(cell) for cell in cells))
    notes = ["return: final training return (stochastic policy; each run's last chunk that "
             "finished an episode), mean [95% bootstrap CI] over seeds."]
    if greedy:
        notes.append("greedy: greedy evaluation return (eval/greedy_return) at each run's "
                     "last evaluation.")
    if retention:
        normalised = sorted({str(r["env"]) for r in rows if r["scale"] == "normalised"})
        raw = sorted({str(r["env"]) for r in rows if r["scale"] != "normalised"})
        scales = ([f"in normalised score (random = 0, reference = 1) on {', '.join(normalised)}"]
                  if normalised else []) + (
                  [f"in raw return on {', '.join(raw)} (no reference scores)"] if raw else [])
        notes.append(f"retention: final training return at K={k_max} minus at K=0, paired by "
                     f"seed, {'; '.join(scales)}; [95% CI]; negative = lost to the lag.")
    return table, notes


def print_results_table(rows: list[dict], console: Console | None = None) -> None:
    """Print `results_table` (as wide as it needs when the output is not a terminal)."""
    table, notes = results_table(rows)
    console = console or Console()
    if not console.is_terminal:
        width = Measurement.get(console, console.options.update_width(10_000), table).maximum
        console = Console(file=console.file, width=max(console.width, width))
    console.print(table)
    for note in notes:
        console.print(Text(note), soft_wrap=True)

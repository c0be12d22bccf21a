"""The answer a sweep prints: per (env, variant) the final return at each K (mean and 95%
CI over seeds) and the retention [ours] at the largest K (`robustness_table`), built from
the tidy-table helpers of `jaxvaco.lab.tables` and the retention of
`jaxvaco.lab.robustness`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from jaxvaco.lab import robustness
from jaxvaco.lab.stats import REFERENCE_SCORES, seed_mean_ci
from jaxvaco.lab.tables import (
    ENV,
    GREEDY_COLUMNS,
    LAG,
    RETURN,
    SEED,
    STEP,
    Columns,
    Estimate,
    as_columns,
    format_estimate,
    last_finite,
    method_column,
    python_scalar,
    require_columns,
    row_groups,
)


def _estimates(finals: Columns, metric: str, keys: Sequence[str]) -> dict[tuple, Estimate]:
    """``(env, method, K) -> Estimate`` of `last_finite` values over seeds."""
    out = {}
    for key, idx in row_groups(finals, keys).items():
        values = finals[metric][idx]
        out[key] = Estimate(*seed_mean_ci(values), len(values))
    return out


def robustness_table(data: Any, method_key: str | None = None, metric: str = RETURN,
                     reps: int = 2000, confidence: float = 0.95, seed: int | None = 0
                     ) -> list[dict[str, Any]]:
    """The answer of a sweep: one row per (env, variant), as dicts (`print_results_table`
    in `jaxvaco.host.progress` prints them).

    * ``env``, ``variant`` (the ``method_key`` column; default: ``variant`` when the table has
      it, else ``algo``) and ``seeds`` (the number of distinct seeds of its runs);
    * ``return``: ``{K: Estimate(mean, low, high, n)}``, the final ``metric`` of each run
      (`last_finite`: the last chunk that finished an episode) averaged over its ``n`` seeds
      with the 95% bootstrap CI of :func:`jaxvaco.lab.stats.seed_mean_ci`;
    * ``greedy``: the same for the greedy evaluation return (`GREEDY_COLUMNS`, each run's last
      evaluation), ``{}`` when the table has none;
    * only when some K > 0: ``retention``, an ``Estimate`` (point, CI, paired seeds) of
      :func:`jaxvaco.lab.robustness.retention` of this variant on this env alone at
      ``retention_K`` (the table's largest K) against K = 0, or None where either is missing;
      ``scale``: ``"normalised"`` (env in ``REFERENCE_SCORES``: a difference of normalised
      scores) or ``"return"`` (a difference of raw returns).

    Rows are sorted by env, then variant.
    """
    cols = as_columns(data)
    method_key = method_key or method_column(cols)
    require_columns(cols, (ENV, method_key, LAG, SEED, STEP, metric))
    keys = (ENV, method_key, LAG, SEED)
    finals = last_finite(cols, metric, keys)
    returns = _estimates(finals, metric, keys[:3])
    greedy_key = next((c for c in GREEDY_COLUMNS if c in cols), None)
    greedy = ({} if greedy_key is None else
              _estimates(last_finite(cols, greedy_key, keys), greedy_key, keys[:3]))
    ks = [g[0] for g in row_groups(cols, [LAG]) if g[0] is not None]
    k_max = max(ks, default=0)
    rows = []
    for (env, method), idx in row_groups(cols, [ENV, method_key]).items():
        row = {"env": env, "variant": method,
               "seeds": len({python_scalar(s) for s in cols[SEED][idx]}),
               "return": {k: returns[env, method, k] for k in ks if (env, method, k) in returns},
               "greedy": {k: greedy[env, method, k] for k in ks if (env, method, k) in greedy}}
        if k_max > 0:
            row.update(retention=None, retention_K=k_max,
                       scale=robustness.NORMALISED if env in REFERENCE_SCORES else robustness.RAW)
            if 0 in row["return"] and k_max in row["return"]:
                mine = [i for i in range(len(finals[metric]))
                        if (finals[ENV][i], finals[method_key][i]) == (env, method)]
                try:
                    result = robustness.retention(
                        {k: v[mine] for k, v in finals.items()}, method, k_max,
                        method_key=method_key, return_key=metric, reps=reps,
                        confidence=confidence, seed=seed)
                except ValueError:  # no seed run at both K
                    pass
                else:
                    row["retention"] = Estimate(*result.per_env[env])
        rows.append(row)
    return rows


def results_table(rows: list[dict]) -> tuple[Table, list[str]]:
    """A rich table of `jaxvaco.lab.sweep_table.robustness_table` rows and the footnotes
    that say what its cells are."""
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

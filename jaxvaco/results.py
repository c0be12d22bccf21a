"""Tidy results tables: one row per run and chunk, written as CSV, read back as columns.

A metrics row (as `jaxvaco.runner.run` returns it and writes it to metrics.jsonl) becomes a
tidy row by `tidy_row`: the key columns env, algo, K, seed, step, return (training episode
return) first, then every other metric under its own name (eval/greedy_return, tv/backward,
tv/forward, tv/total, lag/iterations, the algorithm's fraction metric of `FRACTIONS`, ...),
as `jaxvaco.analysis.tables` reads it.

Data written before the per-algorithm fraction names has one `filter/fraction` column
(`LEGACY_FRACTION`) for all of them: readers keep reading it by that name, and
`fraction_columns` gives a row's per-algorithm columns from either layout.

Two tables are built from such rows:

* a run folder or a sweep: `tidy_rows` (a run's metrics.jsonl, labelled with its sweep
  variant) and `write_table` (a sweep's results.csv, every metric a column), read back by
  `load_results`;
* the experiment scripts' CSVs (experiments/): `variant_rows` keeps the columns of `FIELDS`
  (a variant label beside the algo, eval metrics shortened to eval_greedy and
  eval_stochastic), `append_rows` appends each finished variant, and `done_keys` tells a
  restarted script which variants the CSV already holds. `last_evaluated` picks the last
  evaluated row of each run from such a CSV.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxvaco.config import ConfigError
from jaxvaco.metric_names import FRACTIONS
from jaxvaco.run_dir import load_run_dir
from jaxvaco.sinks import read_rows as read_metrics

KEY_COLUMNS = ("env", "algo", "K", "seed", "step", "return")
DROPPED = {"run", "env_steps", "lag_delay", "episode/return"}
"""Metrics-row fields that the key columns replace."""

FIELDS = ["env", "algo", "variant", "K", "seed", "step", "return", "eval_greedy",
          "eval_stochastic", "lag/iterations", "lag/sgd_steps", "tv/backward", "tv/forward",
          "tv/total", "ppo/clipped_fraction", "spo/outside_fraction", "vaco/filtered_fraction"]
"""Columns of the experiment scripts' tidy CSVs (a fraction column is empty for the other
algorithms)."""
SHORT_NAMES = {"eval/greedy_return": "eval_greedy", "eval/stochastic_return": "eval_stochastic"}
LEGACY_FRACTION = "filter/fraction"
"""The single column that held the three `FRACTIONS` before (and a constant 0 for PPO-KL
and IMPALA), in the committed CSVs under experiments/results/ and runs recorded before the
rename."""


def fraction_columns(row: dict) -> dict:
    """The `FRACTIONS` columns of a tidy row (None where its algorithm has none). A row
    written before the rename has only `LEGACY_FRACTION`: its value goes to the column of
    the row's algorithm (the first word of `algo`)."""
    out = {name: row.get(name) for name in FRACTIONS.values()}
    if LEGACY_FRACTION in row and all(v in (None, "") for v in out.values()):
        name = FRACTIONS.get(str(row.get("algo", "")).split(" ")[0])
        if name:
            out[name] = row[LEGACY_FRACTION]
    return out


def tidy_row(row: dict, env: str, algo: str, k: int) -> dict:
    """One metrics row with the key columns first; `k` is K when the row has no lag_delay."""
    keys = {"env": env, "algo": algo, "K": row.get("lag_delay", k), "seed": row["seed"],
            "step": row["env_steps"], "return": row["episode/return"]}
    return {**keys, **{name: v for name, v in row.items() if name not in DROPPED}}


def metrics_rows(run_dir: Path) -> list[dict]:
    """The complete rows of a run directory's metrics.jsonl (a running run may be
    mid-line)."""
    path = run_dir / "metrics.jsonl"
    return read_metrics(path, path.read_bytes().rfind(b"\n") + 1)


def tidy_rows(run_dir: str | Path, variant: str | None = None) -> list[dict]:
    """metrics.jsonl of one run directory as tidy rows, with a `variant` column (`variant`,
    e.g. a sweep's variant name; default: the algo).

    K is the run's lag_delay when swept, else lag.max_delay. Swept values other than the
    lag are appended to the algo and variant labels (e.g. "ppo learning_rate=0.001"), so
    that (env, algo, K, seed) names one run of an algorithm sweep and (env, variant, K,
    seed) one run of any sweep, as `jaxvaco.analysis.tables` expects.
    """
    run_dir = Path(run_dir)
    config, grid = load_run_dir(run_dir)
    out = []
    for row in metrics_rows(run_dir):
        swept = [f"{k}={row[k]}" for k in grid if k != "lag_delay"]
        label = " ".join([config.algo, *swept])
        tidy = tidy_row(row, config.env, label, config.lag.max_delay)
        out.append({**tidy, "variant": " ".join([variant or config.algo, *swept])})
    return out


def variant_rows(rows: Iterable[dict], env: str, algo: str, variant: str, lag: int = 0
                 ) -> list[dict]:
    """Metrics rows of a run result as rows of FIELDS, labelled with `variant`; `lag` is K
    when the rows have no lag_delay."""
    out = []
    for row in rows:
        tidy = {SHORT_NAMES.get(k, k): v for k, v in tidy_row(row, env, algo, lag).items()}
        tidy["variant"] = variant
        out.append({name: tidy.get(name) for name in FIELDS})
    return out


def read_rows(path: Path) -> list[dict]:
    """The rows of a CSV as dicts of strings ([] when the file does not exist yet)."""
    if not path.exists():
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, rows: list[dict], fields: Sequence[str] | None = None) -> None:
    """Write a CSV with a header (columns: `fields`, else the first row's keys)."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields or rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def append_rows(path: Path, rows: Iterable[dict], fields: Sequence[str] = FIELDS) -> None:
    """Append rows to a CSV, writing its header first when the file is new.

    A CSV begun before the per-algorithm fraction names keeps its header: its
    `LEGACY_FRACTION` column gets the row's fraction (0 for an algorithm without one, as
    it was written then)."""
    new = not path.exists()
    if not new and LEGACY_FRACTION not in fields:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if LEGACY_FRACTION in header:
            rows = [_legacy_row(row, header) for row in rows]
            fields = header
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def _legacy_row(row: dict, header: Sequence[str]) -> dict:
    fraction = next((v for name in FRACTIONS.values() if (v := row.get(name)) is not None), 0.0)
    return {**{k: v for k, v in row.items() if k in header}, LEGACY_FRACTION: fraction}


def done_keys(path: Path, columns: Sequence[str]) -> set[tuple]:
    """The distinct values of `columns` in a CSV: what a restarted script skips."""
    return {tuple(row[c] for c in columns) for row in read_rows(path)}


def last_evaluated(rows: list[dict], label: str) -> dict[tuple, dict]:
    """(env, row[label], K, seed) -> the run's last row with an evaluation, sorted by key."""
    last: dict[tuple, dict] = {}
    for row in rows:
        if row["eval_greedy"] == "":
            continue
        key = (row["env"], row[label], int(row["K"]), int(row["seed"]))
        if key not in last or int(row["step"]) > int(last[key]["step"]):
            last[key] = row
    return dict(sorted(last.items()))


def write_table(path: Path, rows: list[dict]) -> Path:
    """A tidy table as CSV, key columns first, then variant (when rows have it), then the
    others sorted (atomically replaced)."""
    names = {k for row in rows for k in row}
    first = list(KEY_COLUMNS) + (["variant"] if "variant" in names else [])
    columns = first + sorted(names - set(first))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as file:
        writer = csv.DictWriter(file, columns, restval="")
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    tmp.replace(path)
    return path


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def columns_from_rows(rows: list[dict]) -> dict[str, np.ndarray]:
    """Columns of a table; numeric ones as arrays with NaN for missing values."""
    names = list(dict.fromkeys(k for row in rows for k in row))
    cols = {}
    for name in names:
        values = [row.get(name) for row in rows]
        present = [v for v in values if v is not None and v != ""]
        if present and all(isinstance(v, int | float) for v in present):
            missing = len(present) < len(values)
            kind = float if missing or any(isinstance(v, float) for v in present) else int
            cols[name] = np.asarray([np.nan if v in (None, "") else v for v in values], kind)
        else:
            cols[name] = np.asarray(values, dtype=object)
    return cols


def read_table(path: Path) -> dict[str, np.ndarray]:
    """A tidy CSV (results.csv) as columns (numbers parsed, missing values NaN)."""
    with open(path, newline="") as file:
        reader = csv.DictReader(file)
        rows = []
        for row in reader:
            if None in row or None in row.values():
                raise ConfigError(
                    f"{path} line {reader.line_num} does not have the header's "
                    f"{len(reader.fieldnames or [])} fields: the file was cut or edited. A "
                    "sweep rewrites its results.csv from its cells when run again.")
            rows.append({k: _number(v) if v != "" else None for k, v in row.items()})
    return columns_from_rows(rows)


def load_results(directory: Path) -> dict[str, np.ndarray]:
    """The table of a sweep (results.csv), of a single run (its metrics.jsonl), or a tidy
    CSV given directly (an experiment's committed table, e.g. fair_study/study.csv)."""
    if directory.suffix == ".csv" and directory.is_file():
        path, table = directory, read_table(directory)
    elif (directory / "results.csv").exists():
        path, table = directory / "results.csv", read_table(directory / "results.csv")
    elif (directory / "metrics.jsonl").exists():
        path, table = directory / "metrics.jsonl", columns_from_rows(tidy_rows(directory))
    else:
        raise ConfigError(f"{directory} is not a tidy CSV and holds neither results.csv "
                          "(a sweep) nor metrics.jsonl (a run).")
    if not table or not len(table[next(iter(table))]):
        raise ConfigError(f"{path} has no rows yet: a run writes its first row after its "
                          "first chunk, a sweep after its first complete cell.")
    return table


def plot_results(directory: Path, out: Path | None = None, metric: str = "return",
                 table: dict[str, np.ndarray] | None = None) -> list[Path]:
    """Learning curves, final return, retention and TV against lag (when the table has TV
    metrics), aggregate intervals: PNG + PDF, one colour per variant in every figure.

    Scores in the aggregate chart are normalised (`jaxvaco.analysis.stats.normalize_score`)
    when every environment has reference scores, else raw (with a warning). The retention
    figure is drawn when some variant ran at K = 0 and a K > 0. `table`: the results, when
    already loaded (`load_results(directory)`).
    """
    from jaxvaco.analysis import lag_plots, plots, stats, tables

    table = load_results(Path(directory)) if table is None else table
    if "variant" in table:  # a sweep's variants (several may share an algorithm)
        table = {**table, "algo": table["variant"]}
    directory = Path(directory)
    out = Path(out) if out else (directory.parent if directory.is_file() else directory) / "plots"
    envs = set(table["env"].tolist())
    normalize = envs <= set(stats.REFERENCE_SCORES)
    if not normalize:
        warnings.warn(f"No reference scores for {sorted(envs - set(stats.REFERENCE_SCORES))}"
                      ": the aggregate chart shows raw returns.", stacklevel=2)
    colors = plots.variant_colors(table)
    finals = tables.final_scores(table)
    score_dict, _ = tables.score_dict_from_table(finals, normalize=normalize, metric=metric)
    paths = plots.plot_learning_curves(table, out, metric=metric, colors=colors)
    paths += lag_plots.plot_return_vs_lag(table, out, metric=metric, colors=colors)
    lags: dict[tuple, set] = {}
    for env, variant, k in tables.row_groups(table, ["env", "algo", "K"]):
        lags.setdefault((env, variant), set()).add(k)
    if any(0 in ks and ks - {0, None} for ks in lags.values()):  # retention needs both
        paths += lag_plots.plot_retention_vs_lag(table, out, metric=metric, colors=colors)
    paths += plots.plot_aggregate_intervals(score_dict, out, normalize=normalize,
                                            colors=colors, metric=metric)
    if any(name in table for name in ("tv/backward", "tv/forward")):  # a table may lack them
        paths += lag_plots.plot_tv_vs_lag(table, out, colors=colors)
    return paths


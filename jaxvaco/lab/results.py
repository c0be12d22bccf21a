"""The one results schema of jaxvaco, its writer and its readers (docs/results_schema.md).

Every run, sweep and experiment keeps its results as one tidy CSV: one row per run and
logged step (a chunk's end), the identity columns `ID_COLUMNS` (env, algo, variant, K,
seed, step) first, then `return` (the training episode return; runs without episodes, as
the LLM trainer's, leave it out), then every other metric under its own name, sorted
(eval/greedy_return, tv/backward, lag/iterations, the algorithm's fraction of `FRACTIONS`,
...). An empty cell is a metric not measured at that step.

* `schema_row` turns one metrics row (what `jaxvaco.host.runner.run` returns and writes to
  metrics.jsonl) into a schema row; `tidy_rows` does so for a run folder, `result_rows`
  for the rows of a run result.
* `write_results` is the one writer: a sweep's results.csv, an experiment's CSV (with
  ``append=True``, which adds a finished cell's rows to the rows already there).
* `read_results` is the one reader of such a CSV: typed rows under the schema's names,
  including files written before the schema (`RENAMED`, `LEGACY_FRACTION`; a sweep's
  results.csv without a variant column). `load_results` gives a sweep's, a run's or a CSV's
  table as columns (`columns_from_rows`), as `jaxvaco.lab.tables` reads it.

Tables derived from results (final returns per run, summaries, benchmarks) are plain CSVs
of their own columns: `read_rows`, `write_rows`, `append_rows` (the CSV reader and writer
of `jaxvaco.host.run_folder`).
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxvaco.core.algos.registry import fraction_metrics
from jaxvaco.core.config import ConfigError, from_dict
from jaxvaco.host.run_folder import RunFolder, SweepFolder, read_table, write_table
from jaxvaco.host.run_folder import read_rows as read_metrics

ID_COLUMNS = ("env", "algo", "variant", "K", "seed", "step")
"""The columns that name a row: env (or LLM task), algorithm (with swept values other than
K appended, "ppo learning_rate=0.001"), variant (a sweep's variant name, else the algo
label), lag K, seed and step (env steps; the LLM trainer's learner steps)."""
TEXT_COLUMNS = ("env", "algo", "variant")
INT_COLUMNS = ("K", "seed", "step")
RETURN = "return"
DROPPED = {"run", "env_steps", "lag_delay", "episode/return"}
"""Metrics-row fields that the identity columns and `return` replace."""

FRACTIONS = fraction_metrics()
"""{algorithm: its fraction metric} of the algorithms known when this module was imported
(`AlgorithmSpec.fraction`)."""
LEGACY_FRACTION = "filter/fraction"
"""The single column that held those three before (and a constant 0 for PPO-KL and IMPALA),
in the committed CSVs under experiments/results/ and runs recorded before the rename;
read as the row's algorithm's column of `FRACTIONS`."""
RENAMED = {"eval_greedy": "eval/greedy_return", "eval_stochastic": "eval/stochastic_return"}
"""Column names of the experiment scripts' CSVs written before the one schema (committed
under experiments/results/), read under the schema's names."""


def fraction_columns(row: dict) -> dict:
    """The `FRACTIONS` columns of a row (None where its algorithm has none). A row written
    before the rename has only `LEGACY_FRACTION`: its value goes to the column of the row's
    algorithm (the first word of `algo`)."""
    fractions = fraction_metrics()
    out = {name: row.get(name) for name in fractions.values()}
    if LEGACY_FRACTION in row and all(v in (None, "") for v in out.values()):
        name = fractions.get(str(row.get("algo", "")).split(" ")[0])
        if name:
            out[name] = row[LEGACY_FRACTION]
    return out


def canonical(row: dict) -> dict:
    """A row under the schema's names: `RENAMED` columns renamed, `LEGACY_FRACTION` moved
    to its algorithm's fraction column, variant = algo where it has none."""
    out = {RENAMED.get(name, name): value for name, value in row.items()}
    if LEGACY_FRACTION in out:
        out.update(fraction_columns(out))
        del out[LEGACY_FRACTION]
    if out.get("variant") in (None, ""):
        out["variant"] = out.get("algo")
    return out


def schema_row(row: dict, env: str, algo: str, variant: str, k: int) -> dict:
    """One metrics row as a schema row; `k` is K when the row has no lag_delay."""
    ids = {"env": env, "algo": algo, "variant": variant, "K": row.get("lag_delay", k),
           "seed": row["seed"], "step": row["env_steps"], RETURN: row["episode/return"]}
    return canonical({**ids, **{n: v for n, v in row.items() if n not in DROPPED}})


def result_rows(rows: Iterable[dict], env: str, algo: str, variant: str, k: int = 0
                ) -> list[dict]:
    """The metrics rows of a run result (`RunResult.rows`) as schema rows, labelled with
    `variant`; `k` is K when the rows have no lag_delay."""
    return [schema_row(row, env, algo, variant, k) for row in rows]


def tidy_rows(run_dir: str | Path, variant: str | None = None) -> list[dict]:
    """metrics.jsonl of one run directory as schema rows, labelled with `variant` (e.g. a
    sweep's variant name; default: the algo).

    K is the run's lag_delay when swept, else lag.max_delay. Swept values other than the
    lag are appended to the algo and variant labels (e.g. "ppo learning_rate=0.001"), so
    that (env, algo, K, seed) names one run of an algorithm sweep and (env, variant, K,
    seed) one run of any sweep, as `jaxvaco.lab.tables` expects.
    """
    folder = RunFolder(run_dir)
    config = from_dict(folder.read_config(), source=str(folder.config))
    grid = folder.read_runs()["grid"]
    out = []
    for row in read_metrics(folder.metrics):
        swept = [f"{k}={row[k]}" for k in grid if k != "lag_delay"]
        out.append(schema_row(row, config.env, " ".join([config.algo, *swept]),
                              " ".join([variant or config.algo, *swept]),
                              config.lag.max_delay))
    return out


def schema_columns(rows: Iterable[dict]) -> list[str]:
    """The columns of a results CSV holding `rows`: `ID_COLUMNS`, `return` (when some row
    has it), then every other column, sorted."""
    names = {name for row in rows for name in row}
    first = [*ID_COLUMNS, *([RETURN] if RETURN in names else [])]
    return first + sorted(names - set(first))


def write_results(path: Path, rows: Sequence[dict], append: bool = False) -> Path:
    """Write schema rows as a results CSV (`schema_columns`, None as an empty cell),
    atomically replacing `path`; returns `path`.

    With `append`, the rows already in `path` (when it exists) stay first: the new rows are
    appended to the file, its earlier lines untouched, when its header is in the schema and
    holds their columns; else the whole file is rewritten in the schema (its rows read by
    `read_results`, so a CSV written before the schema is converted once).
    """
    rows = [canonical(row) for row in rows]
    missing = [name for name in ID_COLUMNS if any(name not in row for row in rows)]
    if missing:
        raise ValueError(f"results rows need the columns {', '.join(ID_COLUMNS)}; some lack "
                         f"{', '.join(missing)}.")
    if append and path.exists():
        header = csv_header(path)
        if in_schema(header) and set(schema_columns(rows)) <= set(header):
            _write_csv(path, rows, header, "a")
            return path
        rows = read_results(path) + rows
    tmp = path.with_name(path.name + ".tmp")
    _write_csv(tmp, rows, schema_columns(rows), "w")
    tmp.replace(path)
    return path


def csv_header(path: Path) -> list[str]:
    """The column names of a CSV (its first line)."""
    with open(path, newline="") as file:
        return next(csv.reader(file), [])


def in_schema(header: Sequence[str]) -> bool:
    """Whether a CSV header is the one schema's: its columns in `schema_columns`' order and
    none of the names written before it (`RENAMED`, `LEGACY_FRACTION`)."""
    legacy = {*RENAMED, LEGACY_FRACTION}
    return list(header) == schema_columns([dict.fromkeys(header)]) and not legacy & set(header)


def _write_csv(path: Path, rows: Iterable[dict], columns: Sequence[str], mode: str) -> None:
    with open(path, mode, newline="") as file:
        writer = csv.DictWriter(file, columns, restval="")
        if mode == "w":
            writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _parser(name: str) -> Callable[[str], Any]:
    """How a results CSV's column is read: text for env, algo and variant, an int for K,
    seed and step, a number (or text) for a metric; an empty cell is None."""
    if name in TEXT_COLUMNS:
        return str
    kind = int if name in INT_COLUMNS else _number
    return lambda text: kind(text) if text != "" else None


def read_results(path: Path) -> list[dict]:
    """The rows of a results CSV, typed (`_parser`) and under the schema's names
    (`canonical`). ConfigError when a line lacks fields (a cut file) or the file is not a
    results table (it lacks identity columns other than variant)."""
    with open(path, newline="") as file:
        reader = csv.reader(file)
        names = [RENAMED.get(name, name) for name in next(reader, [])]
        missing = [n for n in ID_COLUMNS if n not in names and n != "variant"]
        if missing:
            raise ConfigError(f"{path} is not a results table: it lacks the columns "
                              f"{', '.join(missing)} (docs/results_schema.md).")
        parsers = [_parser(name) for name in names]
        rows = []
        for values in reader:
            if not values:  # a blank line
                continue
            if len(values) != len(names):
                raise ConfigError(
                    f"{path} line {reader.line_num} does not have the header's "
                    f"{len(names)} fields: the file was cut or edited. A sweep rewrites "
                    f"its {SweepFolder.RESULTS} from its cells when run again.")
            rows.append({n: parse(v) for n, parse, v in zip(names, parsers, values,
                                                            strict=True)})
    legacy = LEGACY_FRACTION in names or "variant" not in names
    return [canonical(row) for row in rows] if legacy else rows


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


def load_results(directory: Path) -> dict[str, np.ndarray]:
    """The table of a sweep (results.csv), of a single run (its metrics.jsonl), or a
    results CSV given directly (an experiment's, e.g. fair_study/study.csv), as columns."""
    directory = Path(directory)
    sweep, run = SweepFolder(directory), RunFolder(directory)
    if directory.suffix == ".csv" and directory.is_file():
        path, rows = directory, read_results(directory)
    elif sweep.results.exists():
        path, rows = sweep.results, read_results(sweep.results)
    elif run.metrics.exists():
        path, rows = run.metrics, tidy_rows(directory)
    else:
        raise ConfigError(f"{directory} is not a results CSV and holds neither "
                          f"{sweep.RESULTS} (a sweep) nor {run.METRICS} (a run).")
    if not rows:
        raise ConfigError(f"{path} has no rows yet: a run writes its first row after its "
                          "first chunk, a sweep after its first complete cell.")
    return columns_from_rows(rows)


def done_keys(path: Path, columns: Sequence[str]) -> set[tuple]:
    """The distinct values of `columns` in a results CSV (none when it does not exist yet):
    what a restarted script skips."""
    if not path.exists():
        return set()
    return {tuple(row[c] for c in columns) for row in read_results(path)}


def last_evaluated(rows: Iterable[dict], label: str) -> dict[tuple, dict]:
    """(env, row[label], K, seed) -> the run's last row with a greedy evaluation, sorted by
    key (`rows`: schema rows, as `read_results` gives them)."""
    last: dict[tuple, dict] = {}
    for row in rows:
        if row.get("eval/greedy_return") is None:
            continue
        key = (row["env"], row[label], row["K"], row["seed"])
        if key not in last or row["step"] > last[key]["step"]:
            last[key] = row
    return dict(sorted(last.items()))


read_rows = read_table
"""A derived table (not a results CSV) as dicts of strings ([] when the file does not exist
yet)."""


def write_rows(path: Path, rows: list[dict], fields: Sequence[str] | None = None) -> None:
    """Write a derived table with a header (columns: `fields`, else the first row's keys)."""
    write_table(path, rows, fields or list(rows[0]))


def append_rows(path: Path, rows: Iterable[dict], fields: Sequence[str]) -> None:
    """Append rows to a derived table, writing its header first when the file is new."""
    write_table(path, rows, fields, append=True)


def plot_results(directory: Path, out: Path | None = None, metric: str = "return",
                 table: dict[str, np.ndarray] | None = None) -> list[Path]:
    """Learning curves, final return, retention and TV against lag (when the table has TV
    metrics), aggregate intervals: PNG + PDF, one colour per variant in every figure.

    Scores in the aggregate chart are normalised (`jaxvaco.lab.stats.normalize_score`)
    when every environment has reference scores, else raw (with a warning). The retention
    figure is drawn when some variant ran at K = 0 and a K > 0. `table`: the results, when
    already loaded (`load_results(directory)`).
    """
    from jaxvaco.lab import lag_plots, plots, stats, tables

    table = load_results(Path(directory)) if table is None else table
    table = {**table, "algo": table["variant"]}  # a sweep's variants may share an algorithm
    directory = Path(directory)
    out = Path(out) if out else SweepFolder(directory.parent if directory.is_file()
                                            else directory).plots
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

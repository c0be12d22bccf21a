"""Tidy results tables as columns: the final row of each run, score matrices per algorithm.

A tidy table has one row per logged point with columns ``env``, ``algo``, ``K`` (policy lag),
``seed``, ``step``, ``return`` and optional metric columns such as ``tv/backward``,
``tv/forward``, ``tv/total`` or ``vaco/filtered_fraction`` (`jaxvaco.lab.results` writes them).
It can be given as a pandas ``DataFrame``, a mapping of column name to 1-D array, or a list
of row dicts; pandas is only needed when a ``DataFrame`` goes in (it then comes back out).

The answer a sweep prints (final return per K and retention) is built from these in
`jaxvaco.lab.sweep_table`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxvaco.lab.stats import normalize_score

Columns = dict[str, np.ndarray]


ENV, ALGO, LAG, SEED, STEP, RETURN = "env", "algo", "K", "seed", "step", "return"
RUN_KEYS = (ENV, ALGO, LAG, SEED)


def _is_dataframe(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and hasattr(data, "columns")


def as_columns(data: Any) -> Columns:
    """A results table as ``{column: 1-D ndarray}``.

    Accepts a pandas ``DataFrame``, a mapping of column -> sequence, or an iterable of row
    dicts (missing keys become ``None``).  All columns must have equal length.
    """
    if _is_dataframe(data):
        cols = {str(c): data[c].to_numpy() for c in data.columns}
    elif isinstance(data, Mapping):
        cols = {str(k): np.asarray(v) for k, v in data.items()}
    else:
        rows = list(data)
        names: list[str] = []
        for r in rows:
            names.extend(k for k in r if k not in names)
        cols = {k: np.asarray([r.get(k) for r in rows]) for k in names}
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns have different lengths: {sorted(lengths)}")
    return cols


def _like_input(cols: Columns, data: Any) -> Any:
    if _is_dataframe(data):
        import pandas as pd

        return pd.DataFrame(cols)
    return cols


def require_columns(cols: Columns, names: Iterable[str]) -> None:
    missing = [c for c in names if c not in cols]
    if missing:
        raise KeyError(f"results table lacks columns {missing}; it has {sorted(cols)}")


def _sort_key(v: Any) -> tuple:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return (2, 0.0, "")
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def python_scalar(v: Any) -> Any:
    """NumPy scalar -> Python scalar (hashable, NaN -> None so NaN keys group together)."""
    v = v.item() if isinstance(v, np.generic) else v
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def row_groups(cols: Columns, keys: Sequence[str]) -> dict[tuple, np.ndarray]:
    """Row indices per distinct key tuple, in sorted key order."""
    acc: dict[tuple, list[int]] = {}
    key_cols = [cols[k] for k in keys]
    n = len(next(iter(cols.values()))) if cols else 0
    for i in range(n):
        acc.setdefault(tuple(python_scalar(c[i]) for c in key_cols), []).append(i)
    ordered = sorted(acc, key=lambda t: tuple(_sort_key(v) for v in t))
    return {k: np.asarray(acc[k]) for k in ordered}


def present_columns(cols: Columns, keys: Sequence[str]) -> list[str]:
    return [k for k in keys if k in cols]


def several_lags(cols: Columns) -> bool:
    """Whether some algorithm of the table was run at more than one ``K``."""
    return any(len({python_scalar(k) for k in cols[LAG][idx]}) > 1
               for idx in row_groups(cols, [ALGO]).values())


def final_scores(data: Any) -> Any:
    """Last logged row (largest ``step``) of each run, a run being ``(env, algo, K, seed)``.

    ``K`` may be absent (then runs are ``(env, algo, seed)``).  Returns the same kind of
    table as given (``DataFrame`` in -> ``DataFrame`` out), sorted by the run keys.
    """
    cols = as_columns(data)
    require_columns(cols, (ENV, ALGO, SEED, STEP))
    keys = present_columns(cols, RUN_KEYS)
    step = cols[STEP].astype(np.float64)
    rows = [idx[np.argmax(step[idx])] for idx in row_groups(cols, keys).values()]
    rows_arr = np.asarray(rows, dtype=np.int64)
    return _like_input({k: v[rows_arr] for k, v in cols.items()}, data)


def line_label(algo: Any, k: Any, with_k: bool) -> str:
    return f"{algo} (K={k})" if with_k and k is not None else str(algo)


def split_label(label: Any) -> tuple[Any, Any]:
    """The inverse of `line_label`: ``"ppo (K=4)" -> ("ppo", 4)``, ``"ppo" -> ("ppo", None)``."""
    match = re.fullmatch(r"(.*) \(K=([^()]*)\)", str(label))
    if not match:
        return label, None
    k = match.group(2)
    try:
        return match.group(1), int(k)
    except ValueError:
        try:
            return match.group(1), float(k)
        except ValueError:
            return match.group(1), k


def score_dict_from_table(
    data: Any,
    normalize: bool = True,
    metric: str = RETURN,
    by_k: bool | None = None,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Score matrices ``{label: [num_seeds, num_envs]}`` from the final rows of a table.

    Uses :func:`final_scores`, then ``metric`` (normalised per env with
    :func:`normalize_score` when ``normalize``).  Labels are ``algo``, or ``"algo (K=k)"``
    when ``by_k`` (default: when some algorithm was run at more than one ``K``).  Each label
    needs the same number of seeds on every env; otherwise ``ValueError``.  Also returns the
    env order of the matrix columns.
    """
    cols = as_columns(final_scores(as_columns(data)))
    require_columns(cols, (ENV, ALGO, SEED, metric))
    has_k = LAG in cols
    if by_k is None:
        by_k = has_k and several_lags(cols)
    envs = [g[0] for g in row_groups(cols, [ENV])]
    label_keys = [ALGO, LAG] if (by_k and has_k) else [ALGO]
    out: dict[str, np.ndarray] = {}
    for key, idx in row_groups(cols, label_keys).items():
        label = line_label(key[0], key[1] if len(key) > 1 else None, by_k)
        per_env = []
        for env in envs:
            sel = idx[[python_scalar(cols[ENV][i]) == env for i in idx]]
            vals = cols[metric][sel].astype(np.float64)
            per_env.append(normalize_score(env, vals) if normalize else vals)
        counts = {len(v) for v in per_env}
        if len(counts) != 1 or 0 in counts:
            detail = {env: len(v) for env, v in zip(envs, per_env, strict=True)}
            raise ValueError(f"{label!r}: unequal or missing runs per env {detail}")
        out[label] = np.stack(per_env, axis=1)
    return out, envs



# --------------------------------------------------------------------------------------------
# Labels, seed counts, the final row of each run, estimates as text
# --------------------------------------------------------------------------------------------

GREEDY_COLUMNS = ("eval/greedy_return", "eval_greedy")
"""The greedy evaluation return: its name in a sweep's results.csv, in the experiments' CSVs."""

METRIC_LABELS = {
    RETURN: "training return (stochastic policy)",
    "eval/greedy_return": "greedy evaluation return",
    "eval_greedy": "greedy evaluation return",
    "eval/stochastic_return": "stochastic evaluation return",
    "eval_stochastic": "stochastic evaluation return",
}


def metric_label(metric: str) -> str:
    """What a return column holds, for axis labels ("training return (stochastic policy)",
    "greedy evaluation return"); other metrics keep their name."""
    return METRIC_LABELS.get(metric, metric)


def method_column(cols: Mapping[str, Any]) -> str:
    """The column naming a line of the results: ``variant`` when present (a sweep's results.csv
    has it; it is the algo without named variants), else ``algo``."""
    return "variant" if "variant" in cols else ALGO


def seeds_text(counts: Iterable[int]) -> str:
    """``"n = 8 seeds per cell"`` (``"n = 3–5 seeds per cell"`` when cells differ)."""
    counts = sorted(set(counts))
    if not counts:
        return "n = 0 seeds"
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}\u2013{counts[-1]}"
    return f"n = {n} seed{'s' if counts[-1] != 1 else ''} per cell"


def seed_counts(data: Any, method_key: str = ALGO) -> list[int]:
    """The number of seeds of every (env, method, K) cell of a table (K when present)."""
    cols = as_columns(data)
    keys = present_columns(cols, (ENV, method_key, LAG))
    seeds = cols[SEED]
    return [len({python_scalar(s) for s in seeds[idx]})
            for idx in row_groups(cols, keys).values()]


def last_finite(data: Any, metric: str = RETURN, keys: Sequence[str] = RUN_KEYS) -> Columns:
    """One row per run (``keys``): its row of largest ``step`` where ``metric`` is finite
    (the training return of the last chunk that finished an episode; the greedy return of
    the last evaluation). Runs where ``metric`` is never finite are left out. Columns
    ``keys``, ``step`` and ``metric``."""
    cols = as_columns(data)
    keys = present_columns(cols, keys)
    require_columns(cols, (*keys, STEP, metric))
    values = np.array([np.nan if v is None or v == "" else v for v in cols[metric].tolist()],
                      dtype=np.float64)
    step = cols[STEP].astype(np.float64)
    rows = []
    for idx in row_groups(cols, keys).values():
        idx = idx[np.isfinite(values[idx])]
        if idx.size:
            rows.append(idx[np.argmax(step[idx])])
    sel = np.asarray(rows, dtype=np.int64)
    out = {k: np.asarray([python_scalar(v) for v in cols[k][sel]], dtype=object) for k in keys}
    out[STEP] = step[sel]
    out[metric] = values[sel]
    return out


class Estimate(NamedTuple):
    """A mean over ``n`` seeds (or paired seeds) with its CI."""

    mean: float
    low: float
    high: float
    n: int


def format_number(x: float | None, digits: int = 1) -> str:
    """``x`` with ``digits`` decimals, a typographic minus and no "−0.0"; ``"—"`` for None."""
    if x is None:
        return "\u2014"
    s = f"{x:.{digits}f}"
    if float(s) == 0.0:  # no "-0.0"
        s = s.lstrip("-")
    return s.replace("-", "\u2212")


def format_estimate(estimate: Sequence[float] | None, digits: int = 1) -> str:
    """``"412.3 [380.1, 440.2]"`` from (mean, low, high, ...); ``"—"`` for None; typographic
    minus signs and no "−0.0"."""
    if estimate is None:
        return "\u2014"
    mean, low, high = estimate[:3]
    return (f"{format_number(mean, digits)} [{format_number(low, digits)}, "
            f"{format_number(high, digits)}]")

"""Plots of results tables and score matrices (learning curves, aggregate intervals,
performance profiles), saved as PNG and PDF; the plots against lag K are in `lag_plots`.

matplotlib is imported lazily, when a figure is made.  The plots are drawn on
:class:`matplotlib.figure.Figure` objects directly (no ``pyplot``, so no global backend switch
and no GUI); PNGs are rendered with Agg, PDFs with matplotlib's PDF backend.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxvaco.analysis.stats import (
    AGGREGATE_FNS,
    ScoreDict,
    normalize_score,
    performance_profile,
    stratified_bootstrap_ci,
)
from jaxvaco.analysis.tables import (
    ALGO,
    ENV,
    LAG,
    RETURN,
    SEED,
    STEP,
    Columns,
    as_columns,
    line_label,
    python_scalar,
    require_columns,
    row_groups,
    score_dict_from_table,
    several_lags,
)

OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
"""Okabe & Ito (2008) colour-blind-safe palette."""

_LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))


def palette_colors(names: Sequence[Any]) -> dict[Any, str]:
    return {n: OKABE_ITO[i % len(OKABE_ITO)] for i, n in enumerate(names)}


def new_figure(n_panels: int, ncols: int | None = None, panel: tuple[float, float] = (4.2, 3.2)):
    from matplotlib.figure import Figure

    ncols = ncols or min(n_panels, 3)
    nrows = max(1, math.ceil(n_panels / ncols))
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes[:n_panels])


def style_axes(ax) -> None:
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


def save_figure(fig, out_dir: str | Path, stem: str) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.pdf"]
    fig.savefig(paths[0], dpi=150)
    fig.savefig(paths[1])
    return paths


def save_panels(fig, axes, title: str, out_dir: str | Path, stem: str) -> list[Path]:
    """A figure of panels that share one legend: the legend in the first panel, the title
    above them all, then `save_figure`."""
    axes[0].legend(fontsize="small", frameon=False)
    fig.suptitle(title)
    return save_figure(fig, out_dir, stem)


def mean_ci(values: np.ndarray, reps: int, confidence: float, seed: int | None):
    """Mean over axis 0 (NaN-aware) with a bootstrap CI over rows; values ``[runs, ...]``."""
    x = np.asarray(values, dtype=np.float64)
    x = x.reshape(x.shape[0], 1, *x.shape[1:])  # one "task", trailing dims share the run

    def fn(s: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(s, axis=(0, 1))

    point, ci = stratified_bootstrap_ci({"x": x}, fn, reps, confidence, seed)
    return point["x"], ci["x"]


def as_float(values: np.ndarray) -> np.ndarray:
    """A column as float64; empty cells (a CSV's "" or None: a metric not logged at that
    step, e.g. no episode finished yet) become NaN."""
    return np.array([np.nan if v is None or v == "" else v for v in values.tolist()],
                    dtype=np.float64)


def _auto_by_k(cols: Columns, by_k: bool | None) -> bool:
    if LAG not in cols:
        return False
    if by_k is not None:
        return by_k
    return several_lags(cols)


def plot_learning_curves(
    data: Any,
    out_dir: str | Path,
    by_k: bool | None = None,
    metric: str = RETURN,
    normalize: bool = False,
    reps: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
    stem: str = "learning_curves",
    title: str = "Learning curves",
) -> list[Path]:
    """Mean ``metric`` vs ``step`` with bootstrap CI bands (over seeds); one panel per env.

    One line per algorithm (colour), or per ``(algo, K)`` when ``by_k`` (default: when some
    algorithm has several ``K``), with ``K`` shown by line style.  Seeds logged at different
    steps are aligned on the union of steps (missing points ignored by the NaN-aware mean).
    Saves ``<stem>.png`` and ``<stem>.pdf`` in ``out_dir``; returns their paths.
    """
    cols = as_columns(data)
    require_columns(cols, (ENV, ALGO, SEED, STEP, metric))
    by_k = _auto_by_k(cols, by_k)
    envs = [g[0] for g in row_groups(cols, [ENV])]
    algos = [g[0] for g in row_groups(cols, [ALGO])]
    ks = [g[0] for g in row_groups(cols, [LAG])] if by_k else [None]
    colors = palette_colors(algos)
    styles = {k: _LINESTYLES[i % len(_LINESTYLES)] for i, k in enumerate(ks)}
    fig, axes = new_figure(len(envs))
    line_keys = [ALGO, LAG] if by_k else [ALGO]
    for ax, env in zip(axes, envs, strict=True):
        env_idx = np.flatnonzero([python_scalar(e) == env for e in cols[ENV]])
        sub = {c: v[env_idx] for c, v in cols.items()}
        for key, idx in row_groups(sub, line_keys).items():
            algo, k = key[0], (key[1] if by_k else None)
            steps = np.unique(sub[STEP][idx].astype(np.float64))
            runs = row_groups({c: v[idx] for c, v in sub.items()}, [SEED])
            mat = np.full((len(runs), len(steps)), np.nan)
            for r, ridx in enumerate(runs.values()):
                ridx = idx[ridx]
                pos = np.searchsorted(steps, sub[STEP][ridx].astype(np.float64))
                vals = as_float(sub[metric][ridx])
                mat[r, pos] = normalize_score(env, vals) if normalize else vals
            point, ci = mean_ci(mat, reps, confidence, seed)
            kw = {"color": colors[algo], "linestyle": styles[k]}
            ax.plot(steps, point, label=line_label(algo, k, by_k), linewidth=1.6, **kw)
            ax.fill_between(steps, ci[0], ci[1], color=colors[algo], alpha=0.18, linewidth=0)
        ax.set_title(str(env))
        ax.set_xlabel("environment steps")
        ylabel = f"normalised {metric}" if normalize else metric
        ax.set_ylabel(f"mean {ylabel}")
        style_axes(ax)
    title = f"{title} (mean, {round(confidence * 100)}% bootstrap CI)"
    return save_panels(fig, axes, title, out_dir, stem)


def plot_aggregate_intervals(
    scores: Any,
    out_dir: str | Path,
    aggregate_fns: Mapping[str, Callable[[np.ndarray], float]] | None = None,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
    normalize: bool = True,
    stem: str = "aggregate_intervals",
) -> list[Path]:
    """rliable-style interval estimates: one panel per aggregate, one row per algorithm.

    ``scores`` is a score dict ``{algo: [num_runs, num_tasks]}`` or a results table (then
    :func:`score_dict_from_table` with ``normalize``).  Each bar spans the stratified
    bootstrap CI; the dark tick is the point estimate.  Returns the PNG and PDF paths.
    """
    if isinstance(scores, Mapping) and all(
        isinstance(v, np.ndarray) and v.ndim == 2 for v in scores.values()
    ):
        score_dict = dict(scores)
    else:
        score_dict, _ = score_dict_from_table(scores, normalize=normalize)
    fns = dict(aggregate_fns or AGGREGATE_FNS)
    points, cis = stratified_bootstrap_ci(score_dict, fns, reps, confidence, seed)
    algos = list(score_dict)
    colors = palette_colors(algos)
    fig, axes = new_figure(len(fns), ncols=len(fns), panel=(3.0, 0.45 * len(algos) + 1.2))
    for j, (ax, name) in enumerate(zip(axes, fns, strict=True)):
        for i, algo in enumerate(algos):
            lo, hi = cis[algo][0, j], cis[algo][1, j]
            ax.barh(i, hi - lo, left=lo, height=0.6, color=colors[algo], alpha=0.75)
            ax.vlines(points[algo][j], i - 0.3, i + 0.3, color="k", linewidth=1.6)
        ax.set_yticks(range(len(algos)))
        ax.set_yticklabels(algos if j == 0 else [])
        ax.set_ylim(-0.6, len(algos) - 0.4)
        ax.invert_yaxis()
        ax.set_title(name)
        ax.grid(True, axis="x", alpha=0.3, linewidth=0.6)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.tick_params(axis="y", length=0)
    fig.supxlabel("normalised score" if normalize else "score")
    return save_figure(fig, out_dir, stem)


def plot_performance_profile(
    score_dict: ScoreDict,
    out_dir: str | Path,
    taus: Any = None,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
    stem: str = "performance_profile",
) -> list[Path]:
    r"""Score distributions :math:`F(\tau)` (see :func:`performance_profile`) with CI bands."""
    if taus is None:
        hi = max(1.0, max(float(np.max(v)) for v in score_dict.values()))
        taus = np.linspace(0.0, hi, 101)
    taus = np.asarray(taus, dtype=np.float64)
    profiles, cis = performance_profile(score_dict, taus, reps, confidence, seed)
    colors = palette_colors(list(score_dict))
    fig, (ax,) = new_figure(1, panel=(5.0, 3.6))
    for algo, prof in profiles.items():
        ax.plot(taus, prof, color=colors[algo], label=str(algo), linewidth=1.6)
        if cis is not None:
            ax.fill_between(taus, cis[algo][0], cis[algo][1], color=colors[algo], alpha=0.18)
    ax.set_xlabel(r"normalised score $\tau$")
    ax.set_ylabel(r"fraction of runs with score $> \tau$")
    ax.set_ylim(-0.02, 1.02)
    style_axes(ax)
    ax.legend(fontsize="small", frameon=False)
    return save_figure(fig, out_dir, stem)

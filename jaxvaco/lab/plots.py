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

from jaxvaco.lab.stats import (
    AGGREGATE_FNS,
    ScoreDict,
    normalize_score,
    performance_profile,
    stratified_bootstrap_ci,
)
from jaxvaco.lab.tables import (
    ALGO,
    ENV,
    LAG,
    RETURN,
    SEED,
    STEP,
    Columns,
    _sort_key,
    as_columns,
    line_label,
    metric_label,
    python_scalar,
    require_columns,
    row_groups,
    score_dict_from_table,
    seed_counts,
    seeds_text,
    several_lags,
    split_label,
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
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""Markers for the lags K where colour already names the variant."""
NORMALISED_SCORE = "normalised score (random = 0, reference = 1)"


def palette_colors(names: Sequence[Any]) -> dict[Any, str]:
    return {n: OKABE_ITO[i % len(OKABE_ITO)] for i, n in enumerate(names)}


def variant_colors(data: Any) -> dict[Any, str]:
    """One colour per algorithm/variant (the ``algo`` column) of a results table, in sorted
    order: every figure of `jaxvaco.lab.results.plot_results` gets these, so a variant has the
    same colour in all of them."""
    return palette_colors([g[0] for g in row_groups(as_columns(data), [ALGO])])


def dodge_offsets(names: Sequence[Any], step: float = 4.0) -> dict[Any, float]:
    """Horizontal offsets in points, centred on 0, one per line: error bars of several lines
    at the same K are drawn side by side instead of on top of each other."""
    return {n: (i - (len(names) - 1) / 2) * step for i, n in enumerate(names)}


def dodged_errorbar(ax, x, y, low, high, points: float, **kwargs):
    """``ax.errorbar`` of ``y`` with the interval ``[low, high]`` at ``x``, drawn ``points``
    to the right (on any axis scale, symlog included; the data limits are those of the
    unshifted points). Returns the ErrorbarContainer."""
    from matplotlib.transforms import offset_copy

    x, y, low, high = (np.asarray(v, dtype=np.float64) for v in (x, y, low, high))
    ax.update_datalim(np.column_stack([np.concatenate([x, x]), np.concatenate([low, high])]))
    transform = offset_copy(ax.transData, fig=ax.figure, x=points, y=0.0, units="points")
    return ax.errorbar(x, y, yerr=np.vstack([y - low, high - y]), transform=transform,
                       **kwargs)


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
    colors: Mapping[Any, str] | None = None,
) -> list[Path]:
    """Mean ``metric`` vs ``step`` with bootstrap CI bands (over seeds); one panel per env.

    One line per algorithm (colour: ``colors``, default `variant_colors`), or per
    ``(algo, K)`` when ``by_k`` (default: when some algorithm has several ``K``), with ``K``
    shown by line style; the title gives the number of seeds per line.  Seeds logged at
    different steps are aligned on the union of steps (missing points ignored by the
    NaN-aware mean).
    Saves ``<stem>.png`` and ``<stem>.pdf`` in ``out_dir``; returns their paths.
    """
    cols = as_columns(data)
    require_columns(cols, (ENV, ALGO, SEED, STEP, metric))
    by_k = _auto_by_k(cols, by_k)
    envs = [g[0] for g in row_groups(cols, [ENV])]
    algos = [g[0] for g in row_groups(cols, [ALGO])]
    ks = [g[0] for g in row_groups(cols, [LAG])] if by_k else [None]
    colors = colors or palette_colors(algos)
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
        ylabel = metric_label(metric) + (f",\n{NORMALISED_SCORE}" if normalize else "")
        ax.set_ylabel(ylabel)
        style_axes(ax)
    counts = seed_counts(cols, ALGO) if by_k else seed_counts(
        {k: v for k, v in cols.items() if k != LAG}, ALGO)
    title = (f"{title} (mean, {round(confidence * 100)}% bootstrap CI; "
             f"{seeds_text(counts)})")
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
    colors: Mapping[Any, str] | None = None,
    metric: str = RETURN,
) -> list[Path]:
    """rliable-style interval estimates: one panel per aggregate, one row per algorithm.

    ``scores`` is a score dict ``{algo: [num_runs, num_tasks]}`` or a results table (then
    :func:`score_dict_from_table` with ``normalize``).  Each bar spans the stratified
    bootstrap CI; the marker is the point estimate.  The colour names the algorithm/variant
    (``colors``, keyed by algo; default: in order of first appearance) and, for labels
    ``"algo (K=k)"``, the marker's shape names K.  The x label says whether scores are
    normalised (``normalize``: random = 0, reference = 1) or raw returns of ``metric``; the
    title gives the number of seeds and that a lower optimality gap is better.  Returns the
    PNG and PDF paths.
    """
    if isinstance(scores, Mapping) and all(
        isinstance(v, np.ndarray) and v.ndim == 2 for v in scores.values()
    ):
        score_dict = dict(scores)
    else:
        score_dict, _ = score_dict_from_table(scores, normalize=normalize, metric=metric)
    fns = dict(aggregate_fns or AGGREGATE_FNS)
    points, cis = stratified_bootstrap_ci(score_dict, fns, reps, confidence, seed)
    labels = list(score_dict)
    parts = {label: split_label(label) for label in labels}
    colors = colors or palette_colors(list(dict.fromkeys(a for a, _ in parts.values())))
    ks = sorted({k for _, k in parts.values() if k is not None}, key=_sort_key)
    markers = {k: MARKERS[i % len(MARKERS)] for i, k in enumerate(ks)}
    fig, axes = new_figure(len(fns), ncols=len(fns), panel=(3.0, 0.45 * len(labels) + 1.4))
    for j, (ax, name) in enumerate(zip(axes, fns, strict=True)):
        for i, label in enumerate(labels):
            algo, k = parts[label]
            _interval_bar(ax, i, points[label][j], cis[label][:, j], colors[algo],
                          markers.get(k), label)
        _interval_axis(ax, name, labels, named=j == 0)
    if ks:
        _k_legend(fig, markers)
    scale = (f"final {metric_label(metric)}: {NORMALISED_SCORE}" if normalize
             else f"final {metric_label(metric)}: raw return (not normalised)")
    fig.supxlabel(scale)
    tasks = {v.shape[1] for v in score_dict.values()}
    fig.suptitle(f"Aggregates over {max(tasks)} env(s) ({round(confidence * 100)}% "
                 f"stratified-bootstrap CIs; {seeds_text(v.shape[0] for v in score_dict.values())}"
                 "); optimality gap: lower is better")
    return save_figure(fig, out_dir, stem)


def _interval_bar(ax: Any, row: int, point: float, ci: np.ndarray, color: str,
                  marker: str | None, label: str) -> None:
    """One row of an interval panel: the CI as a bar, the point estimate as a tick, and the
    marker of the row's K (when the label names one)."""
    ax.barh(row, ci[1] - ci[0], left=ci[0], height=0.6, color=color, alpha=0.75, label=label)
    ax.vlines(point, row - 0.3, row + 0.3, color="k", linewidth=1.2)
    if marker is not None:
        ax.plot(point, row, marker=marker, color="k", markerfacecolor="white", markersize=5,
                linestyle="none")


def _interval_axis(ax: Any, name: str, labels: list[str], named: bool) -> None:
    """An interval panel's axes: its aggregate as title, one row per label (named when
    `named`: the first panel), an x grid and no frame but the bottom."""
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels if named else [])
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.invert_yaxis()
    ax.set_title(f"{name}\n(lower is better)" if name == "Optimality Gap" else name)
    ax.grid(True, axis="x", alpha=0.3, linewidth=0.6)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)


def _k_legend(fig: Any, markers: Mapping[Any, str]) -> None:
    """The figure's legend of the markers naming K."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker=marker, color="k", markerfacecolor="white",
                      linestyle="none", label=f"K = {k}") for k, marker in markers.items()]
    fig.legend(handles=handles, loc="outside right center", frameon=False, fontsize="small")


def plot_performance_profile(
    score_dict: ScoreDict,
    out_dir: str | Path,
    taus: Any = None,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
    stem: str = "performance_profile",
    colors: Mapping[Any, str] | None = None,
) -> list[Path]:
    r"""Score distributions :math:`F(\tau)` (see :func:`performance_profile`) with CI bands;
    colour per algorithm/variant (``colors``, keyed by algo; a label ``"algo (K=k)"`` takes
    its algo's colour and a line style per K)."""
    if taus is None:
        hi = max(1.0, max(float(np.max(v)) for v in score_dict.values()))
        taus = np.linspace(0.0, hi, 101)
    taus = np.asarray(taus, dtype=np.float64)
    profiles, cis = performance_profile(score_dict, taus, reps, confidence, seed)
    parts = {label: split_label(label) for label in score_dict}
    colors = colors or palette_colors(list(dict.fromkeys(a for a, _ in parts.values())))
    ks = list(dict.fromkeys(k for _, k in parts.values()))
    styles = {k: _LINESTYLES[i % len(_LINESTYLES)] for i, k in enumerate(ks)}
    fig, (ax,) = new_figure(1, panel=(5.0, 3.6))
    for label, prof in profiles.items():
        algo, k = parts[label]
        ax.plot(taus, prof, color=colors[algo], linestyle=styles[k], label=str(label),
                linewidth=1.6)
        if cis is not None:
            ax.fill_between(taus, cis[label][0], cis[label][1], color=colors[algo], alpha=0.18)
    ax.set_xlabel(r"normalised score $\tau$")
    ax.set_ylabel(r"fraction of runs with score $> \tau$")
    ax.set_ylim(-0.02, 1.02)
    style_axes(ax)
    ax.legend(fontsize="small", frameon=False)
    return save_figure(fig, out_dir, stem)

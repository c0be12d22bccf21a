"""Plots against the policy lag K: final return and total-variation metrics, one panel per
env (and metric), mean over seeds with bootstrap CIs; PNG and PDF."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxvaco.analysis.plots import mean_ci, new_figure, palette_colors, save_panels, style_axes
from jaxvaco.analysis.stats import normalize_score
from jaxvaco.analysis.tables import (
    ALGO,
    ENV,
    LAG,
    RETURN,
    RUN_KEYS,
    SEED,
    Columns,
    as_columns,
    final_scores,
    present_columns,
    python_scalar,
    require_columns,
    row_groups,
)


def _set_lag_axis(ax, ks: Sequence[float]) -> None:
    nonzero = [k for k in ks if k > 0]
    if nonzero and max(nonzero) / min(nonzero) >= 8 and min(ks) >= 0:
        ax.set_xscale("symlog", base=2, linthresh=1)
    ax.set_xticks(sorted(set(ks)))
    ax.set_xticklabels([f"{k:g}" for k in sorted(set(ks))])
    ax.set_xlabel("policy lag K")


def _plot_vs_lag(
    ax,
    cols: Columns,
    env: Any,
    metric: str,
    colors,
    reps,
    confidence,
    seed,
    normalize=False,
    linestyle="-",
    label_suffix="",
) -> list[float]:
    env_idx = np.flatnonzero([python_scalar(e) == env for e in cols[ENV]])
    sub = {c: v[env_idx] for c, v in cols.items()}
    all_ks: list[float] = []
    algo_groups = row_groups(sub, [ALGO])
    for (algo,), idx in algo_groups.items():
        ks, pts, los, his = [], [], [], []
        for (k,), kidx in row_groups({c: v[idx] for c, v in sub.items()}, [LAG]).items():
            if k is None:
                continue
            vals = sub[metric][idx[kidx]].astype(np.float64)
            vals = vals[np.isfinite(vals)]
            if vals.size == 0:
                continue
            if normalize:
                vals = normalize_score(env, vals)
            point, ci = mean_ci(vals, reps, confidence, seed)
            ks.append(float(k))
            pts.append(float(point))
            los.append(float(ci[0]))
            his.append(float(ci[1]))
        if not ks:
            continue
        all_ks.extend(ks)
        pts_a, ks_a = np.asarray(pts), np.asarray(ks)
        yerr = np.vstack([pts_a - np.asarray(los), np.asarray(his) - pts_a])
        ax.errorbar(
            ks_a,
            pts_a,
            yerr=yerr,
            color=colors[algo],
            linestyle=linestyle,
            marker="o",
            markersize=4,
            capsize=3,
            linewidth=1.5,
            label=f"{algo}{label_suffix}",
        )
    return all_ks


def plot_return_vs_lag(
    data: Any,
    out_dir: str | Path,
    metric: str = RETURN,
    normalize: bool = False,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
    stem: str = "return_vs_lag",
) -> list[Path]:
    """Final ``metric`` (mean over seeds, bootstrap CI) against lag ``K``; one panel per env.

    Final = last logged step of each run (:func:`final_scores`).  One line per algorithm.
    Saves ``<stem>.png`` / ``<stem>.pdf`` in ``out_dir`` and returns the paths.
    """
    cols = as_columns(final_scores(as_columns(data)))
    require_columns(cols, (ENV, ALGO, LAG, SEED, metric))
    envs = [g[0] for g in row_groups(cols, [ENV])]
    colors = palette_colors([g[0] for g in row_groups(cols, [ALGO])])
    fig, axes = new_figure(len(envs))
    for ax, env in zip(axes, envs, strict=True):
        ks = _plot_vs_lag(ax, cols, env, metric, colors, reps, confidence, seed, normalize)
        if ks:
            _set_lag_axis(ax, ks)
        ax.set_title(str(env))
        ax.set_ylabel(f"final {'normalised ' if normalize else ''}{metric}")
        style_axes(ax)
    title = f"Final {metric} vs policy lag (mean, {round(confidence * 100)}% CI)"
    return save_panels(fig, axes, title, out_dir, stem)


def plot_tv_vs_lag(
    data: Any,
    out_dir: str | Path,
    metrics: Sequence[str] = ("tv/backward", "tv/forward"),
    reduce: str = "mean",
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
    stem: str = "tv_vs_lag",
) -> list[Path]:
    """Total-variation metrics against lag ``K`` per algorithm; one panel per (env, metric).

    Each run contributes one number per metric: its mean over all logged steps
    (``reduce="mean"``) or its last logged value (``reduce="final"``); the plot shows the
    mean over seeds with a bootstrap CI.  Rows are envs, columns are ``metrics``; metrics
    absent from the table are skipped.  Returns the PNG and PDF paths.
    """
    cols = as_columns(data)
    require_columns(cols, (ENV, ALGO, LAG, SEED))
    metrics = [m for m in metrics if m in cols]
    if not metrics:
        raise KeyError(f"none of the TV metrics are in the table; it has {sorted(cols)}")
    keys = present_columns(cols, RUN_KEYS)
    if reduce == "final":
        run_cols = as_columns(final_scores(cols))
    elif reduce == "mean":
        groups = row_groups(cols, keys)
        run_cols = {k: np.asarray([python_scalar(cols[k][idx[0]]) for idx in groups.values()])
                    for k in keys}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for m in metrics:
                v = cols[m].astype(np.float64)
                run_cols[m] = np.asarray([np.nanmean(v[idx]) for idx in groups.values()])
    else:
        raise ValueError("reduce must be 'mean' or 'final'")
    envs = [g[0] for g in row_groups(run_cols, [ENV])]
    colors = palette_colors([g[0] for g in row_groups(run_cols, [ALGO])])
    fig, axes = new_figure(len(envs) * len(metrics), ncols=len(metrics))
    for e_i, env in enumerate(envs):
        for m_i, m in enumerate(metrics):
            ax = axes[e_i * len(metrics) + m_i]
            ks = _plot_vs_lag(ax, run_cols, env, m, colors, reps, confidence, seed)
            if ks:
                _set_lag_axis(ax, ks)
            ax.set_title(f"{env}: {m}")
            ax.set_ylabel(f"{m} ({reduce} over training)" if reduce == "mean" else f"final {m}")
            style_axes(ax)
    title = f"Policy divergence vs lag (mean over seeds, {round(confidence * 100)}% CI)"
    return save_panels(fig, axes, title, out_dir, stem)

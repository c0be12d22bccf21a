"""Plots against the policy lag K: final return, retention and total-variation metrics, one
panel per env (and metric), mean over seeds with bootstrap CIs; PNG and PDF. One colour per
algorithm/variant; the error bars of several lines at one K are dodged sideways."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxvaco.lab.plots import (
    NORMALISED_SCORE,
    dodge_offsets,
    dodged_errorbar,
    mean_ci,
    new_figure,
    save_panels,
    style_axes,
    variant_colors,
)
from jaxvaco.lab.stats import REFERENCE_SCORES, normalize_score
from jaxvaco.lab.tables import (
    ALGO,
    ENV,
    LAG,
    RETURN,
    RUN_KEYS,
    SEED,
    Columns,
    as_columns,
    final_scores,
    last_finite,
    metric_label,
    present_columns,
    python_scalar,
    require_columns,
    row_groups,
    seed_counts,
    seeds_text,
)


def _set_lag_axis(ax, ks: Sequence[float]) -> None:
    nonzero = [k for k in ks if k > 0]
    if nonzero and max(nonzero) / min(nonzero) >= 8 and min(ks) >= 0:
        ax.set_xscale("symlog", base=2, linthresh=1)
    ax.set_xticks(sorted(set(ks)))
    ax.set_xticklabels([f"{k:g}" for k in sorted(set(ks))])
    ax.set_xlabel("policy lag K")
    ax.margins(x=0.08)  # room for the dodged error bars at the ends


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
    offsets = dodge_offsets(list(colors))
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
        dodged_errorbar(
            ax,
            ks,
            pts,
            los,
            his,
            offsets[algo],
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
    colors: Mapping[Any, str] | None = None,
) -> list[Path]:
    """Final ``metric`` (mean over seeds, bootstrap CI) against lag ``K``; one panel per env.

    Final = last logged step of each run (:func:`final_scores`).  One line per algorithm
    (colour: ``colors``, default `variant_colors`), dodged sideways.  The y label says which
    return it is; the title gives the seeds per point.  Saves ``<stem>.png`` / ``<stem>.pdf``
    in ``out_dir`` and returns the paths.
    """
    cols = as_columns(final_scores(as_columns(data)))
    require_columns(cols, (ENV, ALGO, LAG, SEED, metric))
    envs = [g[0] for g in row_groups(cols, [ENV])]
    colors = colors or variant_colors(cols)
    fig, axes = new_figure(len(envs))
    for ax, env in zip(axes, envs, strict=True):
        ks = _plot_vs_lag(ax, cols, env, metric, colors, reps, confidence, seed, normalize)
        if ks:
            _set_lag_axis(ax, ks)
        ax.set_title(str(env))
        ax.set_ylabel(f"final {metric_label(metric)}"
                      + (f",\n{NORMALISED_SCORE}" if normalize else ""))
        style_axes(ax)
    title = (f"Final {metric_label(metric)} vs policy lag (mean, "
             f"{round(confidence * 100)}% CI; {seeds_text(seed_counts(cols))})")
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
    colors: Mapping[Any, str] | None = None,
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
    colors = colors or variant_colors(run_cols)
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
    title = (f"Policy divergence vs lag (mean over seeds, {round(confidence * 100)}% CI; "
             f"{seeds_text(seed_counts(run_cols))})")
    return save_panels(fig, axes, title, out_dir, stem)


def retention_by_lag(
    data: Any,
    metric: str = RETURN,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> dict[tuple[Any, Any, Any], tuple[float, float, float, int]]:
    """``(env, algo, K) -> (point, low, high, paired seeds)``: the retention of each
    algorithm/variant on each env alone at each K > 0 against K = 0
    (:func:`jaxvaco.lab.robustness.retention` of each run's last finite ``metric``,
    `last_finite`); cells without a seed run at both K are left out."""
    from jaxvaco.lab.robustness import retention

    finals = last_finite(data, metric)
    out = {}
    for (env, algo), idx in row_groups(finals, [ENV, ALGO]).items():
        sub = {c: v[idx] for c, v in finals.items()}
        ks = {python_scalar(k) for k in sub[LAG]}
        if 0 not in ks:
            continue
        for k in sorted(k for k in ks if k is not None and k != 0):
            try:
                result = retention(sub, algo, k, return_key=metric, reps=reps,
                                   confidence=confidence, seed=seed)
            except ValueError:  # no seed paired
                continue
            out[env, algo, k] = result.per_env[env]
    return out


def plot_retention_vs_lag(
    data: Any,
    out_dir: str | Path,
    metric: str = RETURN,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
    stem: str = "retention_vs_lag",
    colors: Mapping[Any, str] | None = None,
) -> list[Path]:
    """Retention [ours] against lag ``K``: the final ``metric`` at K minus at K = 0, paired by
    seed (`retention_by_lag`), with its stratified-bootstrap CI; one panel per env, one line
    per algorithm/variant (``colors``, default `variant_colors`), dodged sideways, a dashed
    line at 0 (no loss).  A difference of normalised scores on envs with reference scores
    (`REFERENCE_SCORES`), else of raw returns: each panel's y label says which.  ``KeyError``
    when no algorithm has runs at K = 0 and some K > 0.  Returns the PNG and PDF paths.
    """
    cols = as_columns(data)
    require_columns(cols, (ENV, ALGO, LAG, SEED, metric))
    found = retention_by_lag(cols, metric, reps, confidence, seed)
    if not found:
        raise KeyError("no algorithm has runs at both K = 0 and some K > 0 with a common "
                       "seed; retention needs both")
    colors = colors or variant_colors(cols)
    offsets = dodge_offsets(list(colors))
    envs = list(dict.fromkeys(env for env, _, _ in found))
    fig, axes = new_figure(len(envs))
    counts = []
    for ax, env in zip(axes, envs, strict=True):
        ax.axhline(0.0, color="0.4", linestyle="--", linewidth=0.9)
        ks: list[float] = []
        for algo in colors:
            cells = [(k, v) for (e, a, k), v in found.items() if (e, a) == (env, algo)]
            if not cells:
                continue
            x = np.asarray([float(k) for k, _ in cells])
            point, low, high = (np.asarray([v[i] for _, v in cells]) for i in range(3))
            counts.extend(v[3] for _, v in cells)
            ks.extend(x.tolist())
            dodged_errorbar(ax, x, point, low, high, offsets[algo], color=colors[algo],
                            marker="o", markersize=4, capsize=3, linewidth=1.5,
                            label=str(algo))
        _set_lag_axis(ax, ks)
        ax.set_title(str(env))
        what = ("normalised score difference" if env in REFERENCE_SCORES
                else "return difference (raw)")
        ax.set_ylabel(f"retention: {what}\n(K minus K = 0, paired by seed)")
        style_axes(ax)
    title = (f"Retention vs policy lag (mean, {round(confidence * 100)}% CI; "
             f"{seeds_text(counts)})\nfinal {metric_label(metric)} at K minus at K = 0, "
             "paired by seed")
    return save_panels(fig, axes, title, out_dir, stem)

r"""Analysis of jaxvaco results: aggregate statistics, normalisation, tidy tables and plots.

Aggregate statistics follow *rliable* (Agarwal et al., 2021, "Deep Reinforcement Learning at
the Edge of the Statistical Precipice") and are implemented in plain NumPy.  Every aggregate
takes a score matrix ``S`` of shape ``[num_runs, num_tasks]`` (``S[n, m]`` = normalised score of
run ``n`` on task ``m``); ``N = num_runs`` and ``M = num_tasks``.

* :func:`iqm` -- interquartile mean of the ``N*M`` pooled scores (a 25% trimmed mean).
* :func:`median` -- median over tasks of the per-task mean score.
* :func:`mean` -- mean over tasks of the per-task mean score.
* :func:`optimality_gap` -- ``gamma - mean(min(S, gamma))``.
* :func:`stratified_bootstrap_ci` -- percentile confidence intervals from a bootstrap that
  resamples runs with replacement independently within each task.
* :func:`performance_profile` -- fraction of runs with score ``> tau`` (score distribution).

Results tables ("tidy" tables) have one row per logged point with columns ``env``, ``algo``,
``K`` (policy lag), ``seed``, ``step``, ``return`` and optional metric columns such as
``tv/backward``, ``tv/forward``, ``tv/total`` or ``filter/fraction``.  They can be given as a
pandas ``DataFrame``, a mapping of column name to 1-D array, or a list of row dicts; pandas is
only needed when a ``DataFrame`` goes in (it then comes back out).

Runtime dependencies: NumPy for everything; matplotlib (imported lazily) for the ``plot_*``
functions; pandas optional as above.  SciPy is not needed.

The plots are drawn on :class:`matplotlib.figure.Figure` objects directly (no ``pyplot``, so
no global backend switch and no GUI); PNGs are rendered with Agg, PDFs with matplotlib's PDF
backend.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "AGGREGATE_FNS",
    "ALGO",
    "ENV",
    "LAG",
    "OKABE_ITO",
    "REFERENCE_SCORES",
    "RETURN",
    "SEED",
    "STEP",
    "as_columns",
    "final_scores",
    "iqm",
    "mean",
    "median",
    "normalize_score",
    "optimality_gap",
    "performance_profile",
    "plot_aggregate_intervals",
    "plot_learning_curves",
    "plot_performance_profile",
    "plot_return_vs_lag",
    "plot_tv_vs_lag",
    "score_dict_from_table",
    "stratified_bootstrap_ci",
]

ScoreDict = Mapping[str, np.ndarray]
Columns = dict[str, np.ndarray]

# --------------------------------------------------------------------------------------------
# Aggregate metrics
# --------------------------------------------------------------------------------------------


def _scores(scores: Any) -> np.ndarray:
    """``scores`` as a float array with at least 2 dims ``[num_runs, num_tasks, ...]``."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim == 0:
        x = x.reshape(1, 1)
    elif x.ndim == 1:  # a vector of runs on a single task
        x = x[:, None]
    if x.size == 0:
        raise ValueError("empty score array")
    return x


def iqm(scores: Any) -> float:
    r"""Interquartile mean (IQM) of all runs x tasks scores, pooled.

    With the ``P = N*M`` pooled scores sorted, :math:`x_{(1)} \le \dots \le x_{(P)}`, and
    :math:`g = \lfloor P/4 \rfloor`,

    .. math:: \mathrm{IQM} = \frac{1}{P - 2g} \sum_{i=g+1}^{P-g} x_{(i)}.

    This is exactly ``scipy.stats.trim_mean(scores, 0.25, axis=None)``, which is what
    ``rliable.metrics.aggregate_iqm`` computes.
    """
    x = _scores(scores).ravel()
    g = int(0.25 * x.size)
    # Partition exactly as scipy does, so the summation order (hence the float) is identical.
    x = np.partition(x, (g, x.size - g - 1))
    return float(np.mean(x[g : x.size - g]))


def median(scores: Any) -> float:
    r"""Median over tasks of the per-task mean score (``rliable.metrics.aggregate_median``).

    .. math:: \mathrm{Median} = \operatorname{median}_m \Big(\frac{1}{N}\sum_n S_{nm}\Big).
    """
    return float(np.median(np.mean(_scores(scores), axis=0), axis=0))


def mean(scores: Any) -> float:
    r"""Mean over tasks of the per-task mean score (``rliable.metrics.aggregate_mean``).

    .. math:: \mathrm{Mean} = \frac{1}{M}\sum_m \frac{1}{N}\sum_n S_{nm}.
    """
    return float(np.mean(np.mean(_scores(scores), axis=0), axis=0))


def optimality_gap(scores: Any, gamma: float = 1.0) -> float:
    r"""Optimality gap: how far scores fall short of ``gamma`` (lower is better).

    .. math:: \mathrm{OG}_\gamma = \gamma - \frac{1}{NM}\sum_{n,m} \min(S_{nm}, \gamma).

    Same as ``rliable.metrics.aggregate_optimality_gap``.
    """
    return float(gamma - np.mean(np.minimum(_scores(scores), gamma)))


AGGREGATE_FNS: dict[str, Callable[[np.ndarray], float]] = {
    "IQM": iqm,
    "Median": median,
    "Mean": mean,
    "Optimality Gap": optimality_gap,
}
"""The four rliable aggregates, in rliable's usual plotting order."""

# --------------------------------------------------------------------------------------------
# Stratified bootstrap
# --------------------------------------------------------------------------------------------


def _combined_fn(aggregate_fns: Any) -> tuple[Callable[[np.ndarray], np.ndarray], list[str]]:
    if aggregate_fns is None:
        aggregate_fns = AGGREGATE_FNS
    if callable(aggregate_fns):
        fn = aggregate_fns
        name = getattr(fn, "__name__", "aggregate")
        return (lambda x: np.asarray(fn(x), dtype=np.float64)), [name]
    if isinstance(aggregate_fns, Mapping):
        names, fns = list(aggregate_fns.keys()), list(aggregate_fns.values())
    else:
        fns = list(aggregate_fns)
        names = [getattr(f, "__name__", f"fn{i}") for i, f in enumerate(fns)]
    if not fns:
        raise ValueError("aggregate_fns is empty")
    return (lambda x: np.asarray([f(x) for f in fns], dtype=np.float64)), names


def _bootstrap_distribution(
    scores: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], reps: int, seed: int | None
) -> np.ndarray:
    """``[reps, *fn_output_shape]`` bootstrap replicates of ``fn`` under stratified resampling.

    For each replicate, for every task ``m`` independently, ``N`` run indices are drawn
    uniformly with replacement.  Index draws use ``np.random.RandomState(seed).choice(N, (N, M))``
    per replicate -- the same draws rliable makes from NumPy's global RNG after
    ``np.random.seed(seed)``, so 2-D results coincide with rliable's exactly.  Trailing dims
    beyond ``[N, M]`` (e.g. training steps) share the run index of their task, so a resampled
    learning curve is a whole curve of one run.
    """
    n, m = scores.shape[:2]
    rng = np.random.RandomState(seed)
    task_idx = np.arange(m)
    out = []
    for _ in range(reps):
        run_idx = rng.choice(n, size=(n, m), replace=True)
        out.append(fn(scores[run_idx, task_idx]))
    return np.stack(out)


def stratified_bootstrap_ci(
    score_dict: ScoreDict,
    aggregate_fns: Any = None,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    r"""Point estimates and stratified-bootstrap percentile CIs per algorithm.

    ``score_dict`` maps algorithm name to a score matrix ``[num_runs, num_tasks]`` (trailing
    dims allowed; 1-D means one task).  ``aggregate_fns`` is one of

    * ``None`` -- :data:`AGGREGATE_FNS` (IQM, Median, Mean, Optimality Gap);
    * a mapping ``name -> fn`` or a sequence of ``fn``, each returning a scalar; results are
      stacked in that order to shape ``[k]``;
    * a single callable returning an array of any shape (rliable's convention).

    Stratified bootstrap: a replicate :math:`S^*` takes, for each task :math:`m`
    independently, :math:`S^*_{nm} = S_{I_{nm}, m}` with :math:`I_{nm} \sim U\{0..N-1\}` i.i.d.
    For an aggregate :math:`\phi` with ``reps`` replicates :math:`\phi(S^*_b)` and
    :math:`\alpha = 1 - \text{confidence}`, the percentile interval is

    .. math:: \big[q_{\alpha/2},\ q_{1-\alpha/2}\big] \text{ of } \{\phi(S^*_b)\}_{b=1}^{B},

    with quantiles by linear interpolation (``np.percentile``), as ``arch``'s percentile
    method used by ``rliable.library.get_interval_estimates``.  Each algorithm uses a fresh
    ``RandomState(seed)``, so algorithms with equal shapes get the same resampling indices
    (common random numbers) and adding an algorithm never changes another's CI.

    Returns ``(points, cis)``: ``points[algo]`` has the aggregate's shape (``[k]`` for several
    scalar aggregates), ``cis[algo]`` has shape ``[2, ...]`` -- row 0 lower, row 1 upper.
    """
    if reps < 1:
        raise ValueError("reps must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    fn, _ = _combined_fn(aggregate_fns)
    alpha = (1.0 - confidence) / 2.0
    q = 100.0 * np.array([alpha, 1.0 - alpha])
    points: dict[str, np.ndarray] = {}
    cis: dict[str, np.ndarray] = {}
    for algo, raw in score_dict.items():
        scores = _scores(raw)
        points[algo] = fn(scores)
        dist = _bootstrap_distribution(scores, fn, reps, seed)
        cis[algo] = np.percentile(dist, q, axis=0)
    return points, cis


def performance_profile(
    score_dict: ScoreDict,
    taus: Any,
    reps: int = 0,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    r"""Run-score distribution (performance profile) per algorithm.

    .. math:: F(\tau) = \frac{1}{NM}\sum_{n,m} \mathbb{1}[S_{nm} > \tau],

    evaluated at each ``tau`` in ``taus``; as ``rliable.library.create_performance_profile``
    with ``use_score_distribution=True``.  With ``reps > 0`` also returns stratified-bootstrap
    percentile bands ``[2, len(taus)]`` per algorithm (see :func:`stratified_bootstrap_ci`);
    otherwise the second element is ``None``.
    """
    taus = np.atleast_1d(np.asarray(taus, dtype=np.float64))

    def profile(x: np.ndarray) -> np.ndarray:
        return np.mean(x.reshape(-1, 1) > taus[None, :], axis=0)

    profiles = {algo: profile(_scores(s)) for algo, s in score_dict.items()}
    if reps <= 0:
        return profiles, None
    _, cis = stratified_bootstrap_ci(score_dict, profile, reps, confidence, seed)
    return profiles, cis


# --------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------

# env name -> (random_return, reference_return);  normalised = (G - random) / (ref - random).
#
# "random" values are MEASURED: mean undiscounted return of a uniformly random policy over
# one episode each of 1024 (brax: 256) vectorised environments, jax.random.PRNGKey(0), default
# env params (gymnax 1.0.1; brax 0.14.2 'generalized' backend, 1000-step episodes).  The
# standard error of each is given; these are not in the repo's tests (they need jit rollouts).
#
# "reference" values are CHOSEN by us as an approximate "near-best" return, so that a
# normalised score of 1 means "solved well" and the optimality gap (gamma=1) is meaningful.
# They are a fixed scale, not theoretical optima; scores may exceed 1.
REFERENCE_SCORES: dict[str, tuple[float, float]] = {
    # random: measured 22.6 (s.e. 0.4; the commonly quoted ~22).  ref: 500 = the episode cap.
    "CartPole-v1": (22.6, 500.0),
    # random: measured -498.4 (s.e. 0.4; nearly always times out at 500 steps).  ref: chosen
    # -60, roughly what strong PPO/DQN agents reach; gym's "solved" reward_threshold is -100.
    "Acrobot-v1": (-498.4, -60.0),
    # random: measured 0.41 (s.e. 0.02), 1000-step episodes.  ref: 60 is OURS, an arbitrary
    # fixed scale for a strong PPO agent in gymnax's 1000-step episodes; revisit once our own
    # baselines exist.
    "Breakout-MinAtar": (0.41, 60.0),
    # random: measured -1228 (s.e. 9), 200-step episodes.  ref: chosen -150, roughly what
    # well-tuned SAC/TD3/PPO reach averaged over random initial angles.
    "Pendulum-v1": (-1228.0, -150.0),
    # random: measured -200 exactly (a random policy never reaches the flag in 200 steps).
    # ref: chosen -100; gym's "solved" reward_threshold is -110.
    "MountainCar-v0": (-200.0, -100.0),
    # brax inverted_pendulum: +1 per step alive.  random: measured 5.7 (s.e. 0.2).  ref: 1000
    # = the 1000-step episode cap (balanced for the whole episode).
    "inverted_pendulum": (5.7, 1000.0),
}


def normalize_score(env: str, returns: Any) -> Any:
    r"""Normalise returns of ``env`` against its random and reference returns.

    .. math:: \tilde G = \frac{G - G_\text{random}}{G_\text{ref} - G_\text{random}}.

    A random policy maps to 0 and the reference return to 1 (see :data:`REFERENCE_SCORES`).
    Returns a float for scalar input, else a float ndarray.  Raises ``KeyError`` naming the
    known environments when ``env`` is not in the table.
    """
    try:
        lo, hi = REFERENCE_SCORES[env]
    except KeyError:
        known = ", ".join(sorted(REFERENCE_SCORES))
        raise KeyError(
            f"no reference scores for env {env!r}; known envs: {known}. "
            "Add (random_return, reference_return) to jaxvaco.analysis.REFERENCE_SCORES."
        ) from None
    out = (np.asarray(returns, dtype=np.float64) - lo) / (hi - lo)
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------------------------
# Tidy tables
# --------------------------------------------------------------------------------------------

ENV, ALGO, LAG, SEED, STEP, RETURN = "env", "algo", "K", "seed", "step", "return"
_RUN_KEYS = (ENV, ALGO, LAG, SEED)


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


def _require(cols: Columns, names: Iterable[str]) -> None:
    missing = [c for c in names if c not in cols]
    if missing:
        raise KeyError(f"results table lacks columns {missing}; it has {sorted(cols)}")


def _sort_key(v: Any) -> tuple:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return (2, 0.0, "")
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def _py(v: Any) -> Any:
    """NumPy scalar -> Python scalar (hashable, NaN -> None so NaN keys group together)."""
    v = v.item() if isinstance(v, np.generic) else v
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _groups(cols: Columns, keys: Sequence[str]) -> dict[tuple, np.ndarray]:
    """Row indices per distinct key tuple, in sorted key order."""
    acc: dict[tuple, list[int]] = {}
    key_cols = [cols[k] for k in keys]
    n = len(next(iter(cols.values()))) if cols else 0
    for i in range(n):
        acc.setdefault(tuple(_py(c[i]) for c in key_cols), []).append(i)
    ordered = sorted(acc, key=lambda t: tuple(_sort_key(v) for v in t))
    return {k: np.asarray(acc[k]) for k in ordered}


def _present(cols: Columns, keys: Sequence[str]) -> list[str]:
    return [k for k in keys if k in cols]


def final_scores(data: Any) -> Any:
    """Last logged row (largest ``step``) of each run, a run being ``(env, algo, K, seed)``.

    ``K`` may be absent (then runs are ``(env, algo, seed)``).  Returns the same kind of
    table as given (``DataFrame`` in -> ``DataFrame`` out), sorted by the run keys.
    """
    cols = as_columns(data)
    _require(cols, (ENV, ALGO, SEED, STEP))
    keys = _present(cols, _RUN_KEYS)
    step = cols[STEP].astype(np.float64)
    rows = [idx[np.argmax(step[idx])] for idx in _groups(cols, keys).values()]
    rows_arr = np.asarray(rows, dtype=np.int64)
    return _like_input({k: v[rows_arr] for k, v in cols.items()}, data)


def _label(algo: Any, k: Any, with_k: bool) -> str:
    return f"{algo} (K={k})" if with_k and k is not None else str(algo)


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
    _require(cols, (ENV, ALGO, SEED, metric))
    has_k = LAG in cols
    if by_k is None:
        by_k = has_k and any(
            len({_py(k) for k in cols[LAG][idx]}) > 1 for idx in _groups(cols, [ALGO]).values()
        )
    envs = [g[0] for g in _groups(cols, [ENV])]
    label_keys = [ALGO, LAG] if (by_k and has_k) else [ALGO]
    out: dict[str, np.ndarray] = {}
    for key, idx in _groups(cols, label_keys).items():
        label = _label(key[0], key[1] if len(key) > 1 else None, by_k)
        per_env = []
        for env in envs:
            sel = idx[[_py(cols[ENV][i]) == env for i in idx]]
            vals = cols[metric][sel].astype(np.float64)
            per_env.append(normalize_score(env, vals) if normalize else vals)
        counts = {len(v) for v in per_env}
        if len(counts) != 1 or 0 in counts:
            detail = {env: len(v) for env, v in zip(envs, per_env, strict=True)}
            raise ValueError(f"{label!r}: unequal or missing runs per env {detail}")
        out[label] = np.stack(per_env, axis=1)
    return out, envs


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------

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


def _colors(names: Sequence[Any]) -> dict[Any, str]:
    return {n: OKABE_ITO[i % len(OKABE_ITO)] for i, n in enumerate(names)}


def _figure(n_panels: int, ncols: int | None = None, panel: tuple[float, float] = (4.2, 3.2)):
    from matplotlib.figure import Figure

    ncols = ncols or min(n_panels, 3)
    nrows = max(1, math.ceil(n_panels / ncols))
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes[:n_panels])


def _style(ax) -> None:
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


def _save(fig, out_dir: str | Path, stem: str) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.pdf"]
    fig.savefig(paths[0], dpi=150)
    fig.savefig(paths[1])
    return paths


def _mean_ci(values: np.ndarray, reps: int, confidence: float, seed: int | None):
    """Mean over axis 0 (NaN-aware) with a bootstrap CI over rows; values ``[runs, ...]``."""
    x = np.asarray(values, dtype=np.float64)
    x = x.reshape(x.shape[0], 1, *x.shape[1:])  # one "task", trailing dims share the run

    def fn(s: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(s, axis=(0, 1))

    point, ci = stratified_bootstrap_ci({"x": x}, fn, reps, confidence, seed)
    return point["x"], ci["x"]


def _auto_by_k(cols: Columns, by_k: bool | None) -> bool:
    if LAG not in cols:
        return False
    if by_k is not None:
        return by_k
    return any(len({_py(k) for k in cols[LAG][idx]}) > 1 for idx in _groups(cols, [ALGO]).values())


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
) -> list[Path]:
    """Mean ``metric`` vs ``step`` with bootstrap CI bands (over seeds); one panel per env.

    One line per algorithm (colour), or per ``(algo, K)`` when ``by_k`` (default: when some
    algorithm has several ``K``), with ``K`` shown by line style.  Seeds logged at different
    steps are aligned on the union of steps (missing points ignored by the NaN-aware mean).
    Saves ``<stem>.png`` and ``<stem>.pdf`` in ``out_dir``; returns their paths.
    """
    cols = as_columns(data)
    _require(cols, (ENV, ALGO, SEED, STEP, metric))
    by_k = _auto_by_k(cols, by_k)
    envs = [g[0] for g in _groups(cols, [ENV])]
    algos = [g[0] for g in _groups(cols, [ALGO])]
    ks = [g[0] for g in _groups(cols, [LAG])] if by_k else [None]
    colors = _colors(algos)
    styles = {k: _LINESTYLES[i % len(_LINESTYLES)] for i, k in enumerate(ks)}
    fig, axes = _figure(len(envs))
    line_keys = [ALGO, LAG] if by_k else [ALGO]
    for ax, env in zip(axes, envs, strict=True):
        env_idx = np.flatnonzero([_py(e) == env for e in cols[ENV]])
        sub = {c: v[env_idx] for c, v in cols.items()}
        for key, idx in _groups(sub, line_keys).items():
            algo, k = key[0], (key[1] if by_k else None)
            steps = np.unique(sub[STEP][idx].astype(np.float64))
            runs = _groups({c: v[idx] for c, v in sub.items()}, [SEED])
            mat = np.full((len(runs), len(steps)), np.nan)
            for r, ridx in enumerate(runs.values()):
                ridx = idx[ridx]
                pos = np.searchsorted(steps, sub[STEP][ridx].astype(np.float64))
                vals = sub[metric][ridx].astype(np.float64)
                mat[r, pos] = normalize_score(env, vals) if normalize else vals
            point, ci = _mean_ci(mat, reps, confidence, seed)
            kw = {"color": colors[algo], "linestyle": styles[k]}
            ax.plot(steps, point, label=_label(algo, k, by_k), linewidth=1.6, **kw)
            ax.fill_between(steps, ci[0], ci[1], color=colors[algo], alpha=0.18, linewidth=0)
        ax.set_title(str(env))
        ax.set_xlabel("environment steps")
        ylabel = f"normalised {metric}" if normalize else metric
        ax.set_ylabel(f"mean {ylabel}")
        _style(ax)
    axes[0].legend(fontsize="small", frameon=False)
    fig.suptitle(f"Learning curves (mean, {round(confidence * 100)}% bootstrap CI)")
    return _save(fig, out_dir, stem)


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
    env_idx = np.flatnonzero([_py(e) == env for e in cols[ENV]])
    sub = {c: v[env_idx] for c, v in cols.items()}
    all_ks: list[float] = []
    algo_groups = _groups(sub, [ALGO])
    for (algo,), idx in algo_groups.items():
        ks, pts, los, his = [], [], [], []
        for (k,), kidx in _groups({c: v[idx] for c, v in sub.items()}, [LAG]).items():
            if k is None:
                continue
            vals = sub[metric][idx[kidx]].astype(np.float64)
            vals = vals[np.isfinite(vals)]
            if vals.size == 0:
                continue
            if normalize:
                vals = normalize_score(env, vals)
            point, ci = _mean_ci(vals, reps, confidence, seed)
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
    _require(cols, (ENV, ALGO, LAG, SEED, metric))
    envs = [g[0] for g in _groups(cols, [ENV])]
    colors = _colors([g[0] for g in _groups(cols, [ALGO])])
    fig, axes = _figure(len(envs))
    for ax, env in zip(axes, envs, strict=True):
        ks = _plot_vs_lag(ax, cols, env, metric, colors, reps, confidence, seed, normalize)
        if ks:
            _set_lag_axis(ax, ks)
        ax.set_title(str(env))
        ax.set_ylabel(f"final {'normalised ' if normalize else ''}{metric}")
        _style(ax)
    axes[0].legend(fontsize="small", frameon=False)
    fig.suptitle(f"Final {metric} vs policy lag (mean, {round(confidence * 100)}% CI)")
    return _save(fig, out_dir, stem)


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
    _require(cols, (ENV, ALGO, LAG, SEED))
    metrics = [m for m in metrics if m in cols]
    if not metrics:
        raise KeyError(f"none of the TV metrics are in the table; it has {sorted(cols)}")
    keys = _present(cols, _RUN_KEYS)
    if reduce == "final":
        run_cols = as_columns(final_scores(cols))
    elif reduce == "mean":
        groups = _groups(cols, keys)
        run_cols = {k: np.asarray([_py(cols[k][idx[0]]) for idx in groups.values()]) for k in keys}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for m in metrics:
                v = cols[m].astype(np.float64)
                run_cols[m] = np.asarray([np.nanmean(v[idx]) for idx in groups.values()])
    else:
        raise ValueError("reduce must be 'mean' or 'final'")
    envs = [g[0] for g in _groups(run_cols, [ENV])]
    colors = _colors([g[0] for g in _groups(run_cols, [ALGO])])
    fig, axes = _figure(len(envs) * len(metrics), ncols=len(metrics))
    for e_i, env in enumerate(envs):
        for m_i, m in enumerate(metrics):
            ax = axes[e_i * len(metrics) + m_i]
            ks = _plot_vs_lag(ax, run_cols, env, m, colors, reps, confidence, seed)
            if ks:
                _set_lag_axis(ax, ks)
            ax.set_title(f"{env}: {m}")
            ax.set_ylabel(f"{m} ({reduce} over training)" if reduce == "mean" else f"final {m}")
            _style(ax)
    axes[0].legend(fontsize="small", frameon=False)
    fig.suptitle(f"Policy divergence vs lag (mean over seeds, {round(confidence * 100)}% CI)")
    return _save(fig, out_dir, stem)


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
    colors = _colors(algos)
    fig, axes = _figure(len(fns), ncols=len(fns), panel=(3.0, 0.45 * len(algos) + 1.2))
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
    return _save(fig, out_dir, stem)


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
    colors = _colors(list(score_dict))
    fig, (ax,) = _figure(1, panel=(5.0, 3.6))
    for algo, prof in profiles.items():
        ax.plot(taus, prof, color=colors[algo], label=str(algo), linewidth=1.6)
        if cis is not None:
            ax.fill_between(taus, cis[algo][0], cis[algo][1], color=colors[algo], alpha=0.18)
    ax.set_xlabel(r"normalised score $\tau$")
    ax.set_ylabel(r"fraction of runs with score $> \tau$")
    ax.set_ylim(-0.02, 1.02)
    _style(ax)
    ax.legend(fontsize="small", frameon=False)
    return _save(fig, out_dir, stem)

r"""Robustness to the policy lag ``K`` as a statistic: retention and difference in differences.

NumPy only.  The definitions below are **[ours]** -- the project's, not the VACO paper's.

*Score* of a run: its final return :math:`G`, normalised with
:func:`jaxvaco.lab.stats.normalize_score` when the env is in
:data:`~jaxvaco.lab.stats.REFERENCE_SCORES`, else the raw return (scale ``"return"``).
Retention is always a *difference* of scores, never a ratio (ratios of negative returns mean
nothing).  Each result reports the scale used per env.

*Retention* [ours] of method :math:`m` at lag :math:`K` on env :math:`e`, paired by seed
:math:`s` (only seeds run at both :math:`K` and :math:`0`):

.. math:: d_m[e, s](K) = \mathrm{score}_m[e, s](K) - \mathrm{score}_m[e, s](0).

*Difference in differences* [ours] of methods :math:`A` and :math:`B` at :math:`K`, over the
seeds present in all four cells :math:`(A, K), (A, 0), (B, K), (B, 0)` of env :math:`e`:

.. math:: D[e, s] = d_A[e, s](K) - d_B[e, s](K)

(positive: :math:`A` keeps more of its :math:`K = 0` score than :math:`B`).

Per-env estimate: the mean over the env's paired seeds, :math:`\bar x_e = \frac{1}{n_e}
\sum_s x[e, s]`.  Pooled estimate: the mean over the :math:`M` envs of those,
:math:`\frac{1}{M}\sum_e \bar x_e` -- every env counts equally, none is trimmed away (unlike a
pooled IQM).  Envs with no paired seed are left out and named in ``dropped_envs``.  Pooling
envs of different scales (normalised and raw return) is allowed but check ``scale``.

CIs: percentile intervals of a stratified bootstrap (seeds resampled with replacement,
independently within each env; ``reps = 2000``, ``seed = 0`` by default).  When every env has
the same number :math:`n` of paired seeds, the paired differences form a matrix ``[n, M]`` and
:func:`~jaxvaco.lab.stats.stratified_bootstrap_ci` resamples it exactly as rliable does;
the per-env and pooled intervals come from the same replicates.  When the :math:`n_e` differ,
env number ``i`` (in sorted env order) is bootstrapped alone, with its own :math:`n_e`, by
:func:`~jaxvaco.lab.stats._bootstrap_distribution` under ``RandomState(seed + i)`` (so the
envs' draws are independent), and a pooled replicate is the mean over envs of the per-env
replicate means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jaxvaco.lab.stats import (
    REFERENCE_SCORES,
    _bootstrap_distribution,
    normalize_score,
    stratified_bootstrap_ci,
)
from jaxvaco.lab.tables import (
    ALGO,
    ENV,
    LAG,
    RETURN,
    SEED,
    STEP,
    _sort_key,
    as_columns,
    format_estimate,
    python_scalar,
    row_groups,
)

NORMALISED, RAW = "normalised", "return"


@dataclass(frozen=True)
class RobustnessResult:
    """A paired lag-robustness estimate with its stratified-bootstrap CI.

    ``per_env[env] = (point, low, high, n_seeds)``; ``scale[env]`` is ``"normalised"`` or
    ``"return"``; ``unpaired_seeds[env]`` lists seeds run in some but not all needed cells
    (left out); ``dropped_envs`` are envs of the table with no paired seed.
    """

    kind: str  # "retention" or "difference_in_differences"
    methods: tuple[Any, ...]
    lag: Any
    point: float
    ci: tuple[float, float]
    per_env: Mapping[Any, tuple[float, float, float, int]]
    scale: Mapping[Any, str]
    dropped_envs: tuple[Any, ...] = ()
    unpaired_seeds: Mapping[Any, tuple[Any, ...]] = field(default_factory=dict)
    confidence: float = 0.95
    reps: int = 2000
    seed: int | None = 0

    def format(self, env: Any = None, digits: int = 3) -> str:
        """``"−0.077 [−0.104, −0.051]"``: the pooled estimate, or env ``env``'s."""
        if env is None:
            point, (low, high) = self.point, self.ci
        else:
            point, low, high, _ = self.per_env[env]
        return format_estimate((point, low, high), digits)


def _require(cols: Mapping[str, np.ndarray], names: Sequence[str]) -> None:
    missing = [c for c in names if c not in cols]
    if missing:
        raise ValueError(f"results table lacks columns {missing}; it has {sorted(cols)}")


def _final_returns(
    cols: Mapping[str, np.ndarray], keys: Sequence[str], return_key: str, step_key: str
) -> dict[tuple, float]:
    """Final return per run ``key tuple -> G``: the row of largest ``step_key`` (as
    ``tables.final_scores``), or the only row when there is no ``step_key`` column."""
    has_step = step_key in cols
    step = cols[step_key].astype(np.float64) if has_step else None
    out: dict[tuple, float] = {}
    for key, idx in row_groups(cols, keys).items():
        if has_step:
            last = idx[step[idx] == step[idx].max()]
        else:
            last = idx
        if len(last) > 1:
            where = f"at its last {step_key!r}" if has_step else f"(no {step_key!r} column)"
            raise ValueError(
                f"{len(last)} rows for run {dict(zip(keys, key, strict=True))} {where}; "
                "several runs share these keys -- filter the table first"
            )
        g = float(cols[return_key][last[0]])
        if not math.isfinite(g):
            raise ValueError(f"non-finite {return_key!r} {g} for run "
                             f"{dict(zip(keys, key, strict=True))}")
        out[key] = g
    return out


def _score(env: Any, g: float) -> tuple[float, str]:
    if env in REFERENCE_SCORES:
        return float(normalize_score(env, g)), NORMALISED
    return g, RAW


def _bootstrap(
    diffs: dict[Any, np.ndarray], reps: int, confidence: float, seed: int | None
) -> tuple[float, tuple[float, float], dict[Any, tuple[float, float, float, int]]]:
    """Pooled and per-env means of paired differences ``env -> [n_e]`` with percentile CIs."""
    if reps < 1:
        raise ValueError("reps must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    envs = list(diffs)
    sizes = {len(v) for v in diffs.values()}
    alpha = (1.0 - confidence) / 2.0
    q = 100.0 * np.array([alpha, 1.0 - alpha])

    def env_means_and_pooled(x: np.ndarray) -> np.ndarray:
        per_env = np.mean(x, axis=0)
        return np.append(per_env, np.mean(per_env))

    if len(sizes) == 1:  # a [n, M] matrix: rliable's stratified bootstrap
        matrix = np.stack([diffs[e] for e in envs], axis=1)
        points_d, cis_d = stratified_bootstrap_ci(
            {"d": matrix}, env_means_and_pooled, reps, confidence, seed)
        points, cis = points_d["d"], cis_d["d"]
    else:  # each env alone with its own n_e, independent streams; pooled = mean per replicate
        dist = np.concatenate(
            [_bootstrap_distribution(diffs[e][:, None], lambda x: np.mean(x, axis=0), reps,
                                     None if seed is None else seed + i)
             for i, e in enumerate(envs)], axis=1)
        dist = np.concatenate([dist, np.mean(dist, axis=1, keepdims=True)], axis=1)
        points = np.asarray([np.mean(diffs[e]) for e in envs])
        points = np.append(points, np.mean(points))
        cis = np.percentile(dist, q, axis=0)
    per_env = {e: (float(points[i]), float(cis[0, i]), float(cis[1, i]), len(diffs[e]))
               for i, e in enumerate(envs)}
    return float(points[-1]), (float(cis[0, -1]), float(cis[1, -1])), per_env


def _paired_effect(
    data: Any, terms: Sequence[tuple[Any, float]], lag: Any, kind: str, *, method_key: str,
    lag_key: str, return_key: str, env_key: str, seed_key: str, step_key: str, reps: int,
    confidence: float, seed: int | None,
) -> RobustnessResult:
    r"""``x[e, s] = \sum_m w_m (\mathrm{score}_m[e, s](K) - \mathrm{score}_m[e, s](0))`` over
    ``terms = [(m, w_m), ...]``, paired over the seeds present in every needed cell."""
    cols = as_columns(data)
    _require(cols, [env_key, method_key, lag_key, seed_key, return_key])
    lag = python_scalar(lag)
    method_col = [python_scalar(v) for v in cols[method_key]]
    lag_col = [python_scalar(v) for v in cols[lag_key]]
    methods = list(dict.fromkeys(m for m, _ in terms))
    _check_lags_run(methods, method_col, lag_col, lag, method_key, lag_key)
    keep = np.asarray([mm in methods and k in (lag, 0)
                       for mm, k in zip(method_col, lag_col, strict=True)])
    sub = {c: v[keep] for c, v in cols.items()}
    final = _final_returns(sub, [env_key, method_key, lag_key, seed_key], return_key, step_key)
    cells = [(m, k) for m in methods for k in dict.fromkeys((lag, 0))]

    diffs: dict[Any, np.ndarray] = {}
    dropped: list[Any] = []
    unpaired: dict[Any, tuple[Any, ...]] = {}
    for (env,) in row_groups(cols, [env_key]):
        seeds_by_cell = [{s for (e, mm, k, s) in final if (e, mm, k) == (env, m, kk)}
                         for m, kk in cells]
        paired = sorted(set.intersection(*seeds_by_cell), key=_sort_key)
        lone = sorted(set.union(*seeds_by_cell) - set(paired), key=_sort_key)
        if lone:
            unpaired[env] = tuple(lone)
        if paired:
            diffs[env] = _weighted_change(final, env, terms, lag, paired)
        else:
            dropped.append(env)
    if not diffs:
        raise ValueError(
            f"no env has a seed run in all of the cells {cells} ({method_key}, {lag_key}); "
            f"nothing can be paired (envs: {dropped}; unpaired seeds: {unpaired})")

    point, ci, per_env = _bootstrap(diffs, reps, confidence, seed)
    scale = {env: NORMALISED if env in REFERENCE_SCORES else RAW for env in diffs}
    return RobustnessResult(kind=kind, methods=tuple(methods), lag=lag, point=point, ci=ci,
                            per_env=per_env, scale=scale, dropped_envs=tuple(dropped),
                            unpaired_seeds=unpaired, confidence=confidence, reps=reps,
                            seed=seed)


def _check_lags_run(methods: Sequence[Any], method_col: list, lag_col: list, lag: Any,
                    method_key: str, lag_key: str) -> None:
    """ValueError unless every method of `methods` ran at K = 0 and at `lag`."""
    for m in methods:
        if m not in method_col:
            have = sorted({str(v) for v in method_col})
            raise ValueError(f"method {m!r} not in column {method_key!r}; it has {have}")
        lags = sorted({k for mm, k in zip(method_col, lag_col, strict=True) if mm == m},
                      key=_sort_key)
        if 0 not in lags:
            raise ValueError(f"method {m!r} has no {lag_key}=0 runs to compare against; "
                             f"its {lag_key} values are {lags}")
        if lag not in lags:
            raise ValueError(f"lag {lag_key}={lag!r} not run for method {m!r}; "
                             f"its {lag_key} values are {lags}")


def _weighted_change(final: dict, env: Any, terms: Sequence[tuple[Any, float]], lag: Any,
                     seeds: Sequence[Any]) -> np.ndarray:
    """Per seed of `seeds`, sum over `terms` of w_m (score_m(lag) − score_m(0)) on `env`."""
    x = np.zeros(len(seeds))
    for m, w in terms:
        at_k = np.asarray([_score(env, final[(env, m, lag, s)])[0] for s in seeds])
        at_0 = np.asarray([_score(env, final[(env, m, 0, s)])[0] for s in seeds])
        x += w * (at_k - at_0)
    return x


def retention(
    data: Any,
    method: Any,
    lag: Any,
    *,
    method_key: str = ALGO,
    lag_key: str = LAG,
    return_key: str = RETURN,
    env_key: str = ENV,
    seed_key: str = SEED,
    step_key: str = STEP,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> RobustnessResult:
    r"""Retention [ours] of ``method`` at ``lag``: per env and pooled, with bootstrap CIs.

    .. math:: d_m[e, s](K) = \mathrm{score}_m[e, s](K) - \mathrm{score}_m[e, s](0),
       \qquad \bar d_m(K) = \frac{1}{M} \sum_e \frac{1}{n_e} \sum_s d_m[e, s](K),

    paired by seed (see the module docstring for scores, pairing and the CI).  ``data`` is
    any table :func:`jaxvaco.lab.tables.as_columns` accepts; with several rows per run
    (learning curves) the row of largest ``step_key`` is used.  ``ValueError`` for missing
    columns, an unknown method or lag, no ``lag_key = 0`` runs, or nothing to pair.
    """
    return _paired_effect(data, [(python_scalar(method), 1.0)], lag, "retention",
                          method_key=method_key, lag_key=lag_key, return_key=return_key,
                          env_key=env_key, seed_key=seed_key, step_key=step_key, reps=reps,
                          confidence=confidence, seed=seed)


def difference_in_differences(
    data: Any,
    method_a: Any,
    method_b: Any,
    lag: Any,
    *,
    method_key: str = ALGO,
    lag_key: str = LAG,
    return_key: str = RETURN,
    env_key: str = ENV,
    seed_key: str = SEED,
    step_key: str = STEP,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> RobustnessResult:
    r"""Difference in differences [ours]: retention of ``method_a`` minus that of ``method_b``
    at ``lag``, paired by seed across all four cells.

    .. math:: D[e, s] = d_A[e, s](K) - d_B[e, s](K), \qquad
       \bar D(K) = \frac{1}{M} \sum_e \frac{1}{n_e} \sum_s D[e, s].

    Positive: ``method_a`` keeps more of its ``K = 0`` score than ``method_b``.  Seeds are
    paired across methods by their seed value, so seed ``s`` of A and of B must be
    comparable (e.g. same environment seeds).  Arguments and errors as :func:`retention`.
    """
    a, b = python_scalar(method_a), python_scalar(method_b)
    return _paired_effect(data, [(a, 1.0), (b, -1.0)], lag, "difference_in_differences",
                          method_key=method_key, lag_key=lag_key, return_key=return_key,
                          env_key=env_key, seed_key=seed_key, step_key=step_key, reps=reps,
                          confidence=confidence, seed=seed)


def paired_effects(
    columns: Mapping[str, np.ndarray],
    pairs: Sequence[tuple[Any, Any]],
    lags: Sequence[Any],
    return_keys: Sequence[str],
    *,
    method_key: str = ALGO,
    lag_key: str = LAG,
    **options: Any,
) -> dict[tuple, RobustnessResult]:
    """Many estimates over one table of columns: for every K in ``lags``, every ``(method,
    baseline)`` in ``pairs`` and every return column in ``return_keys``,
    ``(method, baseline, return_key, K)`` -> :func:`retention` of ``method`` (``baseline``
    None) or :func:`difference_in_differences` ``method − baseline``. Each is computed on the
    rows of its methods at K and at 0 only; ``options`` go to both (``step_key``, ``reps``,
    ...)."""
    out = {}
    for k in lags:
        for method, baseline in pairs:
            rows = (np.isin(columns[method_key], [method, baseline or method])
                    & np.isin(columns[lag_key], [0, k]))
            subset = {c: v[rows] for c, v in columns.items()}
            for key in return_keys:
                common = dict(method_key=method_key, lag_key=lag_key, return_key=key,
                              **options)
                out[method, baseline, key, k] = (
                    retention(subset, method, k, **common) if baseline is None
                    else difference_in_differences(subset, method, baseline, k, **common))
    return out

"""The answer a sweep prints: per (env, variant) the final return at each K (mean and 95%
CI over seeds) and the retention [ours] at the largest K (`robustness_table`), built from
the tidy-table helpers of `jaxvaco.analysis.tables` and the retention of
`jaxvaco.analysis.robustness`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxvaco.analysis import robustness
from jaxvaco.analysis.stats import REFERENCE_SCORES, seed_mean_ci
from jaxvaco.analysis.tables import (
    ENV,
    GREEDY_COLUMNS,
    LAG,
    RETURN,
    SEED,
    STEP,
    Columns,
    Estimate,
    as_columns,
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
    in `jaxvaco.progress` prints them).

    * ``env``, ``variant`` (the ``method_key`` column; default: ``variant`` when the table has
      it, else ``algo``) and ``seeds`` (the number of distinct seeds of its runs);
    * ``return``: ``{K: Estimate(mean, low, high, n)}``, the final ``metric`` of each run
      (`last_finite`: the last chunk that finished an episode) averaged over its ``n`` seeds
      with the 95% bootstrap CI of :func:`jaxvaco.analysis.stats.seed_mean_ci`;
    * ``greedy``: the same for the greedy evaluation return (`GREEDY_COLUMNS`, each run's last
      evaluation), ``{}`` when the table has none;
    * only when some K > 0: ``retention``, an ``Estimate`` (point, CI, paired seeds) of
      :func:`jaxvaco.analysis.robustness.retention` of this variant on this env alone at
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

r"""Aggregate statistics of RL results and score normalisation.

Aggregates follow *rliable* (Agarwal et al., 2021, "Deep Reinforcement Learning at the Edge of
the Statistical Precipice") and are implemented in plain NumPy (SciPy is not needed).  Every
aggregate takes a score matrix ``S`` of shape ``[num_runs, num_tasks]`` (``S[n, m]`` =
normalised score of run ``n`` on task ``m``); ``N = num_runs`` and ``M = num_tasks``.

* :func:`iqm` -- interquartile mean of the ``N*M`` pooled scores (a 25% trimmed mean).
* :func:`median` -- median over tasks of the per-task mean score.
* :func:`mean` -- mean over tasks of the per-task mean score.
* :func:`optimality_gap` -- ``gamma - mean(min(S, gamma))``.
* :func:`stratified_bootstrap_ci` -- percentile confidence intervals from a bootstrap that
  resamples runs with replacement independently within each task.
* :func:`seed_mean_ci` -- one task's mean over runs with its CI (a table cell).
* :func:`performance_profile` -- fraction of runs with score ``> tau`` (score distribution).
* :func:`probability_of_improvement` -- P(a run of X beats a run of Y), averaged over tasks.
* :func:`normalize_score` -- returns mapped so that random play is 0 and a reference is 1
  (:data:`REFERENCE_SCORES`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

ScoreDict = Mapping[str, np.ndarray]

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


def seed_mean_ci(values: Any) -> tuple[float, float, float]:
    """Mean of one task's runs ``[N]`` and its 95% stratified-bootstrap CI (2000 reps, seed
    0): ``(mean, lower, upper)``, the cell of a per-environment results table."""
    x = np.asarray(values, dtype=np.float64)[:, None]
    points, cis = stratified_bootstrap_ci({"x": x}, {"Mean": mean})
    return float(points["x"][0]), float(cis["x"][0, 0]), float(cis["x"][1, 0])


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
    # random: `python -m experiments.random_scores ENV` (mean over every episode finished by
    # 64 envs playing randomly; s.e. in the comments).  ref: a round scale [ours] of the order
    # of what strong agents reach, not a claim about this library's agents.
    "Asterix-MinAtar": (0.50, 30.0),  # random s.e. 0.01
    "SpaceInvaders-MinAtar": (4.09, 150.0),  # random s.e. 0.03
    "Freeway-MinAtar": (0.42, 60.0),  # random s.e. 0.03
    "hopper": (124.8, 3000.0),  # random s.e. 3.1 (spring backend)
    "inverted_double_pendulum": (252.1, 9350.0),  # random s.e. 1.4; ref ≈ the 1000-step cap
    "reacher": (-833.8, -5.0),  # random s.e. 3.3; the control cost dominates random play
    # Measured and scaled as above (random: 64 envs, 512+ episodes).
    "Seaquest-MinAtar": (0.10, 50.0),  # random s.e. < 0.01
    "ant": (-258.3, 6000.0),  # random s.e. 4.9 (spring backend)
    "walker2d": (232.3, 5000.0),  # random s.e. 3.4 (spring backend)
    "halfcheetah": (-66.1, 6000.0),  # random s.e. 4.1 (spring backend)
}


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    r"""P(X > Y): how likely a run of X beats a run of Y on a random task (rliable).

    .. math:: P(X > Y) = \frac1M \sum_m \frac{1}{N_x N_y} \sum_{i,j}
       \Big([x_{im} > y_{jm}] + \tfrac12 [x_{im} = y_{jm}]\Big),

    the Mann-Whitney U statistic per task, averaged over tasks; ``x`` is ``[N_x, M]``,
    ``y`` is ``[N_y, M]``.
    """
    x, y = _scores(x), _scores(y)
    greater = (x[:, None, :] > y[None, :, :]).mean(axis=(0, 1))
    ties = (x[:, None, :] == y[None, :, :]).mean(axis=(0, 1))
    return float(np.mean(greater + 0.5 * ties))


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
            "Add (random_return, reference_return) to jaxvaco.lab.stats.REFERENCE_SCORES."
        ) from None
    out = (np.asarray(returns, dtype=np.float64) - lo) / (hi - lo)
    return float(out) if out.ndim == 0 else out


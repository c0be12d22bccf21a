"""The non-finite guard: after each chunk, the losses, gradient norms and parameters of
every run must be finite; when they are not, a replay finds the first bad iteration.

Chunks are deterministic, so replaying a failed chunk one iteration at a time from the
last good state (`locate_nonfinite`) finds the iteration it went wrong in, and
`NonFiniteError` names it with the runs and the metrics that went wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

GUARDED_METRICS = ("loss/", "grad_norm")
"""Metric names (prefixes) that must stay finite; the parameters are checked as well."""

State = TypeVar("State")
Problems = dict[int, list[str]]
"""Per run that went wrong (its index): the names of what is not finite."""


class NonFiniteError(RuntimeError):
    """A loss, gradient norm or parameter became NaN or infinite."""


def all_finite(tree: Any) -> jax.Array:
    """True when every element of every leaf is finite."""
    return jnp.all(jnp.stack([jnp.isfinite(x).all() for x in jax.tree.leaves(tree)]))


def nonfinite(sums: dict[str, np.ndarray], params_finite: np.ndarray) -> Problems:
    """Per run that went wrong: the guarded metrics that are not finite, and "params"."""
    problems: Problems = {}
    for name, values in sums.items():
        if name.startswith(GUARDED_METRICS):
            for r in np.flatnonzero(~np.isfinite(values)):
                problems.setdefault(int(r), []).append(name)
    for r in np.flatnonzero(~params_finite):
        problems.setdefault(int(r), []).append("params")
    return problems


def locate_nonfinite(step: Callable[[State], tuple[State, Problems]], good: State,
                     iteration: int, n: int) -> tuple[int, Problems] | None:
    """Replay up to n iterations one at a time (`step`: one iteration and its problems)
    from a good state at `iteration`: the first bad iteration and its problems; None if
    the replay stays finite (it should not)."""
    state = good
    for i in range(n):
        state, problems = step(state)
        if problems:
            return iteration + i + 1, problems
    return None


def describe_runs(problems: Problems, runs: list[dict]) -> str:
    """E.g. "run 1 (seed 0, learning_rate=inf): loss/policy, params"."""
    parts = []
    for r, names in problems.items():
        labels = ", ".join(f"{k}={v}" if k != "seed" else f"seed {v}" for k, v in runs[r].items())
        parts.append(f"run {r} ({labels}): {', '.join(names)}")
    return "; ".join(parts)

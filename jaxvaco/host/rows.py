"""What the host loop records of the RL trainer: one metrics row per run and chunk, and
each run's final figures.

A chunk's metrics arrive summed over its iterations, per run. A row holds their means
per iteration, and the episodes that ended in the chunk: their count, mean return and
mean length (None when none ended).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from jaxvaco.host.session import LoopState


def chunk_rows(sums: dict[str, np.ndarray], n_iter: int, info: dict[str, Any],
               runs: list[dict]) -> list[dict]:
    """One row per run from metrics summed over n_iter iterations."""
    rows = []
    for r, run in enumerate(runs):
        row = dict(info, run=r, **run)
        for name, values in sums.items():
            if not name.startswith("episode/"):
                row[name] = float(values[r]) / n_iter
        count = float(sums["episode/count"][r])
        row["episode/count"] = count
        row["episode/return"] = float(sums["episode/return_sum"][r]) / count if count else None
        row["episode/length"] = float(sums["episode/length_sum"][r]) / count if count else None
        rows.append(row)
    return rows


def summarize(rows: list[dict], loop: LoopState, num_runs: int, batch_size: int
              ) -> dict[str, np.ndarray]:
    """Per-run final train return (last chunk with episodes), eval returns, throughput."""
    final_train = np.full(num_runs, np.nan)
    for row in rows:
        if row["episode/return"] is not None:
            final_train[row["run"]] = row["episode/return"]
    return {
        "train_return": final_train,
        **{k: np.asarray(v) for k, v in loop.latest_eval.items()},
        "env_steps": np.full(num_runs, loop.iteration * batch_size),
        "sps": np.array(loop.timed_steps / loop.train_time if loop.train_time else np.nan),
    }

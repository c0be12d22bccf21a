"""The lag schedule of an asynchronous run: one line per trajectory the learner popped.

`lag_schedule.csv` in the run folder has the columns

    iteration  the learner's iteration T when it popped the trajectory
    version    the parameter version v the actor acted with (θ_v)
    lag        T − v, in learner iterations
    actor      the actor that collected it
    used       1 if the learner trained on it, 0 if it was dropped (--asynchronous.max-lag)

`read_delays(run_dir)` gives the lags of the used lines in iteration order, which
`--lag.mode replay` feeds to the jitted simulator (`jaxvaco.lag.replay`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from jaxvaco.config import ConfigError

FILE = "lag_schedule.csv"
COLUMNS = ("iteration", "version", "lag", "actor", "used")


def read_rows(run_dir: str | Path) -> list[dict[str, int]]:
    """Every line of the run's lag_schedule.csv, as ints ([] when there is none)."""
    path = Path(run_dir) / FILE
    if not path.exists():
        return []
    with path.open() as f:
        return [{k: int(row[k]) for k in COLUMNS} for row in csv.DictReader(f)]


def write_rows(run_dir: str | Path, rows: list[dict[str, int]], append: bool) -> None:
    """Write (or append) schedule lines; the header goes with a new file."""
    path = Path(run_dir) / FILE
    new = not append or not path.exists()
    with path.open("w" if new else "a", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def read_delays(run_dir: str | Path) -> np.ndarray:
    """k(T) for T = 0, 1, ...: the lag of the trajectory learner iteration T trained on."""
    rows = [row for row in read_rows(run_dir) if row["used"]]
    if not rows:
        raise ConfigError(f"--lag.replay {run_dir}: no {FILE} with trained-on trajectories "
                          "there; give the folder of a run made with --asynchronous.enabled.")
    rows.sort(key=lambda row: row["iteration"])
    return np.asarray([row["lag"] for row in rows], np.int32)

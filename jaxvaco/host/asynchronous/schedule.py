"""The lag schedule of an asynchronous run, read back: `read_delays(run_dir)` gives the lags
of the used lines of its lag_schedule.csv (`jaxvaco.host.run_folder.RunFolder.read_lag_schedule`)
in iteration order, which `--lag.mode replay` feeds to the jitted simulator
(`jaxvaco.core.lag.replay`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxvaco.core.errors import ConfigError
from jaxvaco.host.run_folder import RunFolder


def read_delays(run_dir: str | Path) -> np.ndarray:
    """k(T) for T = 0, 1, ...: the lag of the trajectory learner iteration T trained on."""
    rows = [row for row in RunFolder(run_dir).read_lag_schedule() if row["used"]]
    if not rows:
        raise ConfigError(f"--lag.replay {run_dir}: no {RunFolder.LAG_SCHEDULE} with "
                          "trained-on trajectories there; give the folder of a run made with "
                          "--asynchronous.enabled.")
    rows.sort(key=lambda row: row["iteration"])
    return np.asarray([row["lag"] for row in rows], np.int32)

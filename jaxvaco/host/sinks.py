"""Where metric rows go: metrics.jsonl always (`jaxvaco.host.run_folder.JsonlWriter`);
TensorBoard and Weights & Biases when asked.

Every sink is fed by the host loop after each chunk (never from inside jit) with the
chunk's rows, one per run. TensorBoard and W&B are imported only when enabled, so neither
is a dependency of plain training.

On resume, metrics.jsonl is cut back to its length at the checkpoint, TensorBoard drops
events past the checkpoint's step (`purge_step`), and W&B continues the same run id.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jaxvaco.core.errors import ConfigError
from jaxvaco.host.run_folder import JsonlWriter, RunFolder

LABEL_KEYS = ("chunk", "iteration", "env_steps", "run")


def run_label(run: dict) -> str:
    """A short name of one run from its seed and swept values: seed0, seed1-delta0.1, ..."""
    return "-".join(f"{key}{value}" for key, value in run.items())


def scalars(row: dict) -> dict[str, float]:
    """The numeric metrics of a row (not its labels, not missing values)."""
    return {k: float(v) for k, v in row.items()
            if k not in LABEL_KEYS and isinstance(v, int | float) and not isinstance(v, bool)}


class TensorBoardSink:
    """One event directory per run under <run>/tensorboard/, x-axis = env steps."""

    def __init__(self, run_dir: Path, runs: list[dict], resume_step: int | None):
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            raise ConfigError("--tensorboard needs tensorboardX: pip install tensorboardX "
                              "(or the jaxvaco[logging] extra).") from None
        purge = None if resume_step is None else resume_step + 1
        # Event files are named by the second they were opened in: a unique suffix keeps a
        # run resumed within the same second from overwriting the file it continues.
        suffix = f".{time.time_ns()}"
        self._writers = [SummaryWriter(str(RunFolder(run_dir).tensorboard / run_label(run)),
                                       purge_step=purge, filename_suffix=suffix)
                         for run in runs]

    def write(self, rows: list[dict], info: dict) -> None:
        for writer, row in zip(self._writers, rows, strict=True):
            for name, value in scalars(row).items():
                writer.add_scalar(name, value, global_step=info["env_steps"])
            writer.flush()

    def close(self) -> None:
        for writer in self._writers:
            writer.close()


class WandbSink:
    """One W&B run per jaxvaco run; metrics as <run label>/<name> against env_steps.

    Offline with WANDB_MODE=offline (then `wandb sync` uploads later). The W&B run id is
    kept in <run>/wandb-id so a resumed run continues the same W&B run.
    """

    def __init__(self, run_dir: Path, config: dict, runs: list[dict], project: str):
        try:
            import wandb
        except ImportError:
            raise ConfigError("--wandb needs wandb: pip install wandb "
                              "(or the jaxvaco[logging] extra).") from None
        id_file = RunFolder(run_dir).wandb_id
        run_id = id_file.read_text() if id_file.exists() else None
        self._labels = [run_label(run) for run in runs]
        self._run = wandb.init(project=project, name=run_dir.name, id=run_id, resume="allow",
                               dir=str(run_dir), config={**config, "runs": runs})
        id_file.write_text(self._run.id)
        self._run.define_metric("env_steps")
        self._run.define_metric("*", step_metric="env_steps")

    def write(self, rows: list[dict], info: dict) -> None:
        data: dict[str, Any] = {"env_steps": info["env_steps"], "sps": info["sps"]}
        for label, row in zip(self._labels, rows, strict=True):
            data.update({f"{label}/{k}": v for k, v in scalars(row).items()})
        self._run.log(data)

    def close(self) -> None:
        self._run.finish()


class Sinks:
    """All enabled sinks as one: `write` to each, `close` each."""

    def __init__(self, jsonl: JsonlWriter, others: list):
        self.jsonl = jsonl
        self._all = [jsonl, *others]

    def write(self, rows: list[dict], info: dict) -> None:
        for sink in self._all:
            sink.write(rows, info)

    def __enter__(self) -> Sinks:
        return self

    def __exit__(self, *exc) -> None:
        for sink in self._all:
            sink.close()


def open_sinks(run_dir: Path, config: dict, runs: list[dict], *, tensorboard: bool,
               wandb: bool, wandb_project: str, resume: tuple[int, int] | None) -> Sinks:
    """The JSONL sink plus those asked for; `resume` = (metrics.jsonl bytes, env steps)."""
    others: list = []
    if tensorboard:
        others.append(TensorBoardSink(run_dir, runs, resume[1] if resume else None))
    if wandb:
        others.append(WandbSink(run_dir, config, runs, wandb_project))
    jsonl = JsonlWriter(RunFolder(run_dir).metrics, resume[0] if resume else None)
    return Sinks(jsonl, others)

"""Checkpoints of the whole training state with orbax, and the rules for resuming.

A checkpoint is one orbax step (the learner iteration T) holding two items:

* ``state``: the `TrainState` of every run (params, optimizer state, lag ring buffer,
  env states, RNG keys, observation statistics, iteration counters, algo_state), saved
  with `StandardSave` and restored exactly with `StandardRestore`;
* ``host``: a small JSON dict of what the host loop needs to continue exactly (chunk
  counter, timers, the byte length of metrics.jsonl at that point, the latest evaluation).

Atomicity comes from orbax: a step is written into ``<T>.orbax-checkpoint-tmp-*`` and
renamed to ``<T>`` only once complete, so a kill at any instant leaves every finished
step readable and the half-written one invisible. A step that is there but cannot be
read (corrupted on disk) is skipped with a warning in favour of the one before it.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from jaxvaco.config import TrainConfig, to_dict

RESUMABLE_CHANGES = ("progress", "results_dir", "run_name")
"""Config fields that may differ on resume: they change where and how a run is shown, not
what it computes."""


class Checkpointer:
    """The newest `keep` checkpoints of one run under `directory` (made absolute)."""

    def __init__(self, directory: Path, keep: int):
        import orbax.checkpoint as ocp

        logging.getLogger("absl").setLevel(logging.WARNING)  # orbax logs every save at INFO
        self._ocp = ocp
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                               cleanup_tmp_directories=True)
        self._manager = ocp.CheckpointManager(self.directory, options=options)
        self.last_saved: int | None = self._manager.latest_step()

    def steps(self) -> list[int]:
        """Complete checkpoints, oldest first."""
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, host: dict) -> None:
        """Start writing checkpoint `step` (asynchronously; `close` waits for it)."""
        args = self._ocp.args
        self._manager.save(step, args=args.Composite(state=args.StandardSave(state),
                                                     host=args.JsonSave(host)), force=True)
        self.last_saved = step

    def restore(self, abstract_state: Any) -> tuple[int, Any, dict] | None:
        """(step, state, host) of the newest readable checkpoint; None when there is none.

        Unreadable newer steps are reported with a warning and deleted, so the run
        continuing from an older one can write its own steps there again.
        """
        args = self._ocp.args
        for step in reversed(self.steps()):
            try:
                out = self._manager.restore(step, args=args.Composite(
                    state=args.StandardRestore(abstract_state), host=args.JsonRestore()))
            except Exception as error:  # noqa: BLE001 - orbax raises many kinds on bad files
                warnings.warn(f"Checkpoint {self.directory / str(step)} is unreadable "
                              f"({type(error).__name__}: {error}); deleting it and falling "
                              "back to the previous one.", stacklevel=2)
                self._manager.delete(step)
                continue
            self.last_saved = step
            return step, out.state, dict(out.host)
        return None

    def close(self) -> None:
        """Wait for pending writes to finish."""
        self._manager.wait_until_finished()
        self._manager.close()


def _flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_changes(saved: TrainConfig, new: TrainConfig) -> list[str]:
    """The fields outside `RESUMABLE_CHANGES` that differ, as "--flag: old -> new"."""
    old, changed = _flatten(to_dict(saved)), _flatten(to_dict(new))
    return [f"--{name.replace('_', '-')}: {old.get(name)!r} -> {value!r}"
            for name, value in changed.items()
            if name not in RESUMABLE_CHANGES and old.get(name) != value]


def resume_conflicts(saved: TrainConfig, new: TrainConfig, iterations_done: int) -> list[str]:
    """Why `new` cannot continue a run started with `saved` (empty when it can).

    Any field outside `RESUMABLE_CHANGES` must be equal, with one exception: a different
    --total-timesteps (not below the iterations done) extends or shortens a run whose
    learning rate is constant (--no-anneal-lr) and whose chunk length is fixed
    (--chunk-iterations), since then the iterations done so far are exactly those of the
    run with the new length.
    """
    problems = config_changes(saved, new)
    if _extends(saved, new, iterations_done):
        problems = [p for p in problems if not p.startswith("--total-timesteps:")]
    return problems


def _extends(saved: TrainConfig, new: TrainConfig, iterations_done: int) -> bool:
    fixed_chunks = 0 < saved.chunk_iterations <= saved.num_iterations
    return not saved.anneal_lr and fixed_chunks and new.num_iterations >= iterations_done

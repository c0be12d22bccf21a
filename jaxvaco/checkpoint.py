"""Checkpoints of the whole training state with orbax, and the rules for resuming.

A checkpoint is one orbax step (the learner iteration T) holding two items:

* ``state``: the `TrainState` of every run (params, optimizer state, lag state, env
  states, RNG keys, observation statistics, iteration counters, algo_state), saved with
  `StandardSave` and restored exactly with `StandardRestore`;
* ``host``: a small JSON dict of what the host loop needs to continue exactly (chunk
  counter, timers, the byte length of metrics.jsonl at that point, the latest evaluation).

Atomicity comes from orbax: a step is written into ``<T>.orbax-checkpoint-tmp-*`` and
renamed to ``<T>`` only once complete, so a kill at any instant leaves every finished
step readable and the half-written one invisible. A step that is there but cannot be
read (corrupted on disk) is skipped with a warning in favour of the one before it. A
step whose `TrainState` has other fields than this version's (written by another version
of jaxvaco) is refused with a `RunFileError` and kept.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from pathlib import Path
from typing import Any

from jaxvaco.config import ALGOS, RunFileError, TrainConfig, to_dict

RESUMABLE_CHANGES = ("progress", "results_dir", "run_name")
"""Config fields that may differ on resume: they change where and how a run is shown, not
what it computes."""

HYPERPARAM_CHANGES = ("learning_rate", "gamma", "gae_lambda", "clip_coef", "ent_coef",
                      "vf_coef", "max_grad_norm", "reward_scale", "vaco.delta",
                      "ppo_kl.target_kl", *(f"{algo}.{bar}" for algo in ALGOS
                                            for bar in ("rho_bar", "c_bar")))
"""Config fields that --resume-with-changes accepts: `jaxvaco.hparams.Hyperparams` leaves,
which change no array shape, so the checkpointed state continues under the new values."""


class RunWriteError(RuntimeError):
    """A checkpoint or a results file could not be written (full disk, permissions)."""


def write_failure(what: str, error: BaseException, run_dir: Path, steps: list[int]
                  ) -> RunWriteError:
    """One line: what failed and why, which checkpoints are intact, how to continue."""
    reason = getattr(error, "strerror", None) or str(error).strip().splitlines()[0]
    kept = (f"the earlier checkpoints (iterations {', '.join(map(str, steps))}) are intact"
            if steps else "no checkpoint had been saved yet")
    return RunWriteError(f"could not write {what} ({type(error).__name__}: {reason}); {kept}. "
                         f"Free space or fix permissions, then continue with: jaxvaco train "
                         f"--resume {run_dir}")


class Checkpointer:
    """The newest `keep` checkpoints of one run under `directory` (made absolute)."""

    def __init__(self, directory: Path, keep: int):
        import orbax.checkpoint as ocp

        logging.getLogger("absl").setLevel(logging.WARNING)  # orbax logs every save at INFO
        self._ocp = ocp
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                               cleanup_tmp_directories=True)
        handlers = {"state": ocp.StandardCheckpointHandler(), "host": ocp.JsonCheckpointHandler()}
        self._manager = ocp.CheckpointManager(self.directory, options=options,
                                              item_handlers=handlers)
        self.last_saved: int | None = self._manager.latest_step()

    def steps(self) -> list[int]:
        """Complete checkpoints, oldest first."""
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, host: dict) -> None:
        """Start writing checkpoint `step` (asynchronously; `close` waits for it)."""
        args = self._ocp.args
        try:
            self._manager.save(step, args=args.Composite(state=args.StandardSave(state),
                                                         host=args.JsonSave(host)), force=True)
        except Exception as error:  # noqa: BLE001 - orbax wraps OS errors in many kinds
            raise self._failure(step, error) from error
        self.last_saved = step

    def restore(self, abstract_state: Any) -> tuple[int, Any, dict] | None:
        """(step, state, host) of the newest readable checkpoint; None when there is none.

        Unreadable newer steps are reported with a warning and deleted, so the run
        continuing from an older one can write its own steps there again. A step of
        another `TrainState` layout raises `RunFileError` (see `check_layout`).
        """
        args = self._ocp.args
        for step in reversed(self.steps()):
            self.check_layout(step, abstract_state)
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

    def check_layout(self, step: int, abstract_state: Any) -> None:
        """Refuse (RunFileError, one line) a step whose state has other top-level fields
        than `abstract_state`: another version of jaxvaco wrote it, and restoring it would
        fail as if it were corrupted. A step whose layout cannot be read is left to
        `restore`, which reports it as unreadable."""
        try:
            saved = set(self._manager.item_metadata(step)["state"].keys())
        except Exception:  # noqa: BLE001 - unreadable: restore says so and falls back
            return
        expected = {field.name for field in dataclasses.fields(abstract_state)}
        if saved != expected:
            raise RunFileError(
                f"Checkpoint {self.directory / str(step)} was written by another version of "
                f"jaxvaco (its TrainState has {sorted(saved - expected)} where this one has "
                f"{sorted(expected - saved)}), so it cannot be resumed here: resume it with "
                "the version that wrote it, or start a new run.")

    def close(self) -> None:
        """Wait for pending writes to finish."""
        try:
            self._manager.wait_until_finished()
            self._manager.close()
        except Exception as error:  # noqa: BLE001 - an asynchronous write failed
            raise self._failure(self.last_saved, error) from error

    def _failure(self, step: int | None, error: BaseException) -> RunWriteError:
        intact = [s for s in self.steps() if s != step]
        return write_failure(f"checkpoint {step} in {self.directory}", error,
                             self.directory.parent, intact)


def _flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changed_fields(saved: TrainConfig, new: TrainConfig) -> dict[str, str]:
    """The fields outside `RESUMABLE_CHANGES` that differ: dotted name -> "--flag: old -> new"."""
    old, changed = _flatten(to_dict(saved)), _flatten(to_dict(new))
    return {name: f"--{name.replace('_', '-')}: {old.get(name)!r} -> {value!r}"
            for name, value in changed.items()
            if name not in RESUMABLE_CHANGES and old.get(name) != value}


def config_changes(saved: TrainConfig, new: TrainConfig) -> list[str]:
    """The fields outside `RESUMABLE_CHANGES` that differ, as "--flag: old -> new"."""
    return list(changed_fields(saved, new).values())


def hyperparam_changes(saved: TrainConfig, new: TrainConfig) -> list[str]:
    """The changes that --resume-with-changes accepts (see `HYPERPARAM_CHANGES`)."""
    return [text for name, text in changed_fields(saved, new).items()
            if name in HYPERPARAM_CHANGES]


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

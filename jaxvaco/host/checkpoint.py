"""Checkpoints of the whole training state with orbax: saving and restoring them.

A checkpoint is one orbax step (the learner iteration T) holding two items:

* ``state``: the `TrainState` of every run (params, optimizer state, lag state, env
  states, RNG keys, observation statistics, iteration counters, algo_state), saved with
  `StandardSave` and restored exactly with `StandardRestore`;
* ``host``: a small JSON dict of what the host loop needs to continue exactly (chunk
  counter, timers, the byte length of metrics.jsonl at that point, the latest evaluation).

The host dict also records the run's whole configuration and grid (``run_record``), so
that a resume is compared with what the checkpoint was computed with, not only with
config.json (which a user may edit; the rules are `jaxvaco.host.run_dir`'s).

Atomicity comes from orbax: a step is written into ``<T>.orbax-checkpoint-tmp-*`` and
renamed to ``<T>`` only once complete, so a kill at any instant leaves every finished
step readable and the half-written one invisible. Once complete, a step is sealed with a
digest of its files (``<T>/jaxvaco_digest.json``, SHA-256 per file). On restore:

* a step whose bytes differ from its digest is proven damaged: it is deleted with a
  warning and the one before it is used;
* a step that matches its digest (or has none: written before digests) but cannot be
  restored is *not* damaged, so it is never deleted: the resume is refused with the
  reason (another configuration, another version of jaxvaco) and every file is kept;
* a step whose `TrainState` has other fields than this version's (written by another
  version of jaxvaco) is refused with a `RunFileError` and kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from jaxvaco.core.errors import RunFileError
from jaxvaco.host.run_folder import RunFolder

DIGEST = "jaxvaco_digest.json"
UNSEALED = ("_CHECKPOINT_METADATA", DIGEST)
"""Files of a step outside its digest: orbax's own metadata (rewritten after the step is
complete) and the digest itself."""
RECORD = "run_record"
"""Key of the host dict that holds the run's configuration and grid."""


def file_digests(step_dir: Path) -> dict[str, str]:
    """SHA-256 of every file of a checkpoint step (outside `UNSEALED`), by relative path."""
    return {str(path.relative_to(step_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(step_dir.rglob("*"))
            if path.is_file() and path.name not in UNSEALED}


def seal(step_dir: Path) -> None:
    """Write the step's digest (atomically), once its files are complete."""
    tmp = step_dir / (DIGEST + ".tmp")
    tmp.write_text(json.dumps(file_digests(step_dir), indent=1))
    os.replace(tmp, step_dir / DIGEST)


def damaged_files(step_dir: Path) -> list[str] | None:
    """The files of a sealed step whose bytes (or existence) differ from its digest: [] when
    it is intact, None when it has no readable digest (nothing can be proven)."""
    try:
        sealed = json.loads((step_dir / DIGEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(sealed, dict):
        return None
    now = file_digests(step_dir)
    return sorted(name for name, digest in sealed.items() if now.get(name) != digest)


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

        absl = logging.getLogger("absl")
        if absl.getEffectiveLevel() < logging.WARNING:
            absl.setLevel(logging.WARNING)  # orbax logs every save at INFO
        self._ocp = ocp
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                               cleanup_tmp_directories=True)
        handlers = {"state": ocp.StandardCheckpointHandler(), "host": ocp.JsonCheckpointHandler()}
        self._manager = ocp.CheckpointManager(self.directory, options=options,
                                              item_handlers=handlers)
        self.last_saved: int | None = self._manager.latest_step()
        self._unsealed: set[int] = set()  # steps saved here whose digest is not written yet

    def steps(self) -> list[int]:
        """Complete checkpoints, oldest first."""
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, host: dict, record: dict | None = None) -> None:
        """Start writing checkpoint `step` (asynchronously; `close` waits for it). `record`:
        the run's configuration and grid, kept in the host dict under `RECORD`."""
        args = self._ocp.args
        try:
            self._seal_finished()
        except Exception as error:  # noqa: BLE001 - the previous asynchronous write failed
            raise self._failure(self.last_saved, error) from error
        try:
            self._manager.save(step, args=args.Composite(
                state=args.StandardSave(state), host=args.JsonSave({**host, RECORD: record or {}})),
                force=True)
        except Exception as error:  # noqa: BLE001 - orbax wraps OS errors in many kinds
            raise self._failure(step, error) from error
        self._unsealed.add(step)
        self.last_saved = step

    def _seal_finished(self) -> None:
        """Wait for the write in flight, then seal the steps this object wrote (a step
        found on disk without a digest is never sealed: its bytes may already be damaged)."""
        self._manager.wait_until_finished()
        for step in sorted(self._unsealed & set(self.steps())):
            seal(self.directory / str(step))
        self._unsealed.clear()

    def recorded(self, step: int) -> dict | None:
        """The configuration and grid checkpoint `step` was written with (its host dict's
        `RECORD`); None for a step written before records, or whose host part is unreadable
        (`restore` then decides)."""
        args = self._ocp.args
        try:
            host = self._manager.restore(step, args=args.Composite(host=args.JsonRestore())).host
        except Exception:  # noqa: BLE001 - unreadable: restore reports it
            return None
        record = dict(host).get(RECORD)
        return record if isinstance(record, dict) and record else None

    def restore(self, abstract_state: Any) -> tuple[int, Any, dict] | None:
        """(step, state, host) of the newest intact checkpoint; None when there is none.

        A newer step whose files differ from its digest is proven damaged: it is reported
        with a warning and deleted, so the run continuing from an older one can write its
        own steps there again. Any other failure (a step that fits another configuration,
        or a damage no digest can prove) raises `RunFileError` and deletes nothing; so does
        a step of another `TrainState` layout (see `check_layout`).
        """
        args = self._ocp.args
        for step in reversed(self.steps()):
            step_dir = self.directory / str(step)
            damaged = damaged_files(step_dir)
            if damaged:
                warnings.warn(f"Checkpoint {step_dir} is damaged ({len(damaged)} file(s) differ "
                              f"from its digest, e.g. {damaged[0]}); deleting it and falling "
                              "back to the previous one.", stacklevel=2)
                self._manager.delete(step)
                continue
            self.check_layout(step, abstract_state)
            try:
                out = self._manager.restore(step, args=args.Composite(
                    state=args.StandardRestore(abstract_state), host=args.JsonRestore()))
            except Exception as error:  # noqa: BLE001 - orbax raises many kinds on bad files
                raise RunFileError(self._unrestorable(step, damaged, error)) from None
            self.last_saved = step
            host = dict(out.host)
            host.pop(RECORD, None)
            return step, out.state, host
        return None

    def _unrestorable(self, step: int, damaged: list[str] | None, error: BaseException
                      ) -> str:
        """Why checkpoint `step` was not restored, that it is kept, and what to do."""
        reason = " ".join(str(error).split())[:300]
        step_dir = self.directory / str(step)
        if damaged is None:
            proof = ("it has no digest (written by an older jaxvaco), so it cannot be told "
                     "damaged from written for another configuration")
        else:
            proof = ("its files match the digest written when it was saved, so it is intact "
                     f"and was written for another configuration ({RunFolder.CONFIG} or "
                     f"{RunFolder.RUNS} edited?)")
        earlier = [s for s in self.steps() if s < step]
        fallback = (f"; if it is damaged, delete {step_dir} to continue from checkpoint "
                    f"{earlier[-1]}" if earlier and damaged is None else "")
        return (f"Checkpoint {step_dir} cannot be restored ({type(error).__name__}: {reason}); "
                f"{proof}. It is kept, and nothing was changed{fallback}.")

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
        """Wait for pending writes to finish, seal them, close."""
        try:
            self._seal_finished()
            self._manager.close()
        except Exception as error:  # noqa: BLE001 - an asynchronous write failed
            raise self._failure(self.last_saved, error) from error

    def _failure(self, step: int | None, error: BaseException) -> RunWriteError:
        intact = [s for s in self.steps() if s != step]
        return write_failure(f"checkpoint {step} in {self.directory}", error,
                             self.directory.parent, intact)

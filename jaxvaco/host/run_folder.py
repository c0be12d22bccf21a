"""Every file of a run folder, a sweep folder and an exported policy, and the one reader
and writer of each file format. Nothing here imports JAX or a configuration type.

A run folder (`RunFolder`) holds

* config.json: the configuration, "control" (the host-loop options) and "resume_changes"
  (an LLM run's: {"llm": ..., "control": ...});
* runs.json: {"grid": the grid, "runs": the labels of each run (seed, swept values)};
* metrics.jsonl: one JSON object per run and chunk; metrics.before-restart-<n>.jsonl: the
  rows of a run that started again from iteration 0;
* checkpoints/<T>/: one orbax step per checkpoint (`jaxvaco.host.checkpoint`);
* lag_schedule.csv: an asynchronous run's popped trajectories, one line each: iteration
  (the learner's T), version (v of the θ_v it was collected with), lag (T − v), actor,
  used (1 trained on, 0 dropped by --asynchronous.max-lag);
* timings.json: where the seconds went; eval.json: `jaxvaco eval`'s report;
* tensorboard/<run>/, wandb/ and wandb-id: the optional sinks' files;
* DONE (a JSON summary) or FAILED (the divergence message): a sweep cell's marker;
* plots/: `jaxvaco plot`'s figures; warm_start_<...>.msgpack: an LLM run's warm start.

A sweep folder (`SweepFolder`) holds sweep.json, results.csv, runs/<cell>/ (run folders)
and plots/; an exported policy (`ExportFolder`) manifest.json, params.msgpack, eval.json.
A JSON file is written whole through `<name>.tmp` and a rename.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from jaxvaco.core.errors import ConfigError, RunFileError

LAG_SCHEDULE_COLUMNS = ("iteration", "version", "lag", "actor", "used")


# --- file formats: JSON, JSON lines, CSV with a header ---------------------------------

def write_json(path: Path, data: Any) -> None:
    """Write via a temporary file and a rename, so a kill never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)


def read_json(path: Path) -> Any:
    """A JSON file's content; RunFileError naming the file and the line when it is damaged."""
    try:
        return json.loads(path.read_bytes().decode(errors="replace"))
    except json.JSONDecodeError as error:
        raise RunFileError(f"{path} is not valid JSON ({error.msg} at line {error.lineno}, "
                           f"column {error.colno}); repair it by hand, or start a new run."
                           ) from None


def read_rows(path: Path, num_bytes: int | None = None, strict: bool = True) -> list:
    """The rows of a JSON-lines file: those in its first `num_bytes` bytes, by default its
    complete lines (a running run may be mid-line). A line that is not a JSON object raises
    RunFileError naming the file and the line; with `strict` False it reads as None."""
    with open(path, "rb") as file:
        data = file.read(-1 if num_bytes is None else num_bytes)
    if num_bytes is None:
        data = data[:data.rfind(b"\n") + 1]
    rows = []
    for number, line in enumerate(data.decode(errors="replace").splitlines(), start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            row, reason = None, f"{error.msg} at column {error.colno}"
        else:
            reason = "not a JSON object"
        if not isinstance(row, dict):
            if strict:
                raise RunFileError(f"{path} line {number} is damaged ({reason}); repair that "
                                   "line by hand (leaving the others as they are), or restore "
                                   "the file.")
            row = None
        rows.append(row)
    return rows


class JsonlWriter:
    """Appends rows to a JSON-lines file, one line each; `resume_bytes` cuts the file back
    to that length first (None: a new file)."""

    def __init__(self, path: Path, resume_bytes: int | None):
        if resume_bytes is None:
            self._file = open(path, "w")
        else:
            self._file = open(path, "r+")
            self._file.truncate(resume_bytes)
            self._file.seek(resume_bytes)

    def write(self, rows: list[dict], info: dict | None = None) -> None:
        for row in rows:
            self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def sync(self) -> int:
        """Flush to disk; the file's length in bytes (saved with each checkpoint)."""
        self._file.flush()
        os.fsync(self._file.fileno())
        return self._file.tell()

    def close(self) -> None:
        self._file.close()


def read_table(path: Path) -> list[dict[str, str]]:
    """A CSV file with a header as dicts of strings ([] when it does not exist yet)."""
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def write_table(path: Path, rows: Iterable[dict], fields: Sequence[str],
                append: bool = False) -> None:
    """Write rows under a header of `fields`; with `append`, add them to the file instead
    (the header first when it is new)."""
    new = not append or not path.exists()
    with open(path, "w" if new else "a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(fields))
        if new:
            writer.writeheader()
        writer.writerows(rows)


# --- the folders ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Folder:
    """A folder of jaxvaco's files (a str path is made a Path)."""

    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))


@dataclasses.dataclass(frozen=True)
class RunFolder(Folder):
    """The files of one run folder (see the module docstring), and their readers."""

    CONFIG: ClassVar[str] = "config.json"
    RUNS: ClassVar[str] = "runs.json"
    METRICS: ClassVar[str] = "metrics.jsonl"
    CHECKPOINTS: ClassVar[str] = "checkpoints"
    LAG_SCHEDULE: ClassVar[str] = "lag_schedule.csv"
    TIMINGS: ClassVar[str] = "timings.json"
    EVALUATION: ClassVar[str] = "eval.json"
    TENSORBOARD: ClassVar[str] = "tensorboard"
    WANDB: ClassVar[str] = "wandb"
    WANDB_ID: ClassVar[str] = "wandb-id"
    DONE: ClassVar[str] = "DONE"
    FAILED: ClassVar[str] = "FAILED"
    PLOTS: ClassVar[str] = "plots"

    @property
    def config(self) -> Path:
        return self.path / self.CONFIG

    @property
    def runs(self) -> Path:
        return self.path / self.RUNS

    @property
    def metrics(self) -> Path:
        return self.path / self.METRICS

    def set_aside(self, n: int) -> Path:
        """Where the n-th restart from iteration 0 keeps the rows written before it."""
        return self.path / f"metrics.before-restart-{n}.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.path / self.CHECKPOINTS

    @property
    def lag_schedule(self) -> Path:
        return self.path / self.LAG_SCHEDULE

    @property
    def timings(self) -> Path:
        return self.path / self.TIMINGS

    @property
    def evaluation(self) -> Path:
        return self.path / self.EVALUATION

    @property
    def tensorboard(self) -> Path:
        return self.path / self.TENSORBOARD

    @property
    def wandb(self) -> Path:
        return self.path / self.WANDB

    @property
    def wandb_id(self) -> Path:
        return self.path / self.WANDB_ID

    @property
    def done(self) -> Path:
        return self.path / self.DONE

    @property
    def failed(self) -> Path:
        return self.path / self.FAILED

    @property
    def plots(self) -> Path:
        return self.path / self.PLOTS

    def warm_start(self, tag: str) -> Path:
        """An LLM run's supervised warm start (flax msgpack), named by what it depends on."""
        return self.path / f"warm_start_{tag}.msgpack"

    def read_config(self) -> dict:
        """config.json as a dict (ConfigError when the folder holds no run)."""
        if not self.config.exists():
            sweep = (" (it is a sweep: run jaxvaco sweep again to continue it)"
                     if SweepFolder(self.path).spec.exists() else "")
            raise ConfigError(f"{self.path} has no {self.CONFIG}: not a jaxvaco run "
                              f"directory{sweep}.")
        record = read_json(self.config)
        if not isinstance(record, dict):
            raise RunFileError(f"{self.config} must hold a JSON object (key: value pairs).")
        return record

    def write_config(self, record: dict) -> None:
        write_json(self.config, record)

    def read_runs(self) -> dict:
        """runs.json ({"grid": {}} for a run recorded before it existed)."""
        runs = read_json(self.runs) if self.runs.exists() else {"grid": {}}
        if not isinstance(runs, dict) or not isinstance(runs.get("grid"), dict | list):
            raise RunFileError(f"{self.runs} lacks its 'grid' table; restore it, or start a "
                               "new run.")
        return runs

    def write_runs(self, grid: dict | list, runs: list[dict]) -> None:
        write_json(self.runs, {"grid": grid, "runs": runs})

    def trained(self) -> list[str]:
        """What makes a folder hold a run: results or checkpoints (those that exist and are
        not empty). A folder with only config.json (and runs.json) never finished its first
        chunk: a fresh run may take it over."""
        found = []
        for path in (self.metrics, self.checkpoints):
            if path.is_dir() and any(path.iterdir()) or path.is_file() and path.stat().st_size:
                found.append(path.name)
        return found

    def checkpoint_steps(self) -> list[int]:
        """The complete checkpoints, oldest first (without opening them)."""
        return sorted(int(p.name) for p in self.checkpoints.glob("[0-9]*") if p.name.isdigit())

    def recorded_iterations(self) -> int:
        """The iteration of metrics.jsonl's last line (0 when there is none, or it is
        unreadable)."""
        path = self.metrics
        rows = read_rows(path, path.stat().st_size, strict=False) if path.exists() else []
        try:
            return int(rows[-1]["iteration"]) if rows else 0
        except (ValueError, KeyError, TypeError):
            return 0

    def set_aside_metrics(self) -> Path | None:
        """Move metrics.jsonl to the first free `set_aside` path; that path (None when
        there were no rows to keep)."""
        if not self.metrics.exists() or not self.metrics.stat().st_size:
            return None
        n = 1
        while self.set_aside(n).exists():
            n += 1
        return self.metrics.replace(self.set_aside(n))

    def read_lag_schedule(self) -> list[dict[str, int]]:
        """Every line of lag_schedule.csv, as ints ([] when there is none)."""
        return [{k: int(row[k]) for k in LAG_SCHEDULE_COLUMNS}
                for row in read_table(self.lag_schedule)]

    def write_lag_schedule(self, rows: list[dict[str, int]], append: bool) -> None:
        write_table(self.lag_schedule, rows, LAG_SCHEDULE_COLUMNS, append)


@dataclasses.dataclass(frozen=True)
class SweepFolder(Folder):
    """The files of a sweep folder: its spec, its results table, its cells' run folders."""

    SPEC: ClassVar[str] = "sweep.json"
    RESULTS: ClassVar[str] = "results.csv"
    CELLS: ClassVar[str] = "runs"

    @property
    def spec(self) -> Path:
        return self.path / self.SPEC

    @property
    def results(self) -> Path:
        return self.path / self.RESULTS

    @property
    def cells(self) -> Path:
        """The results_dir of the cells' runs."""
        return self.path / self.CELLS

    def cell(self, name: str) -> RunFolder:
        return RunFolder(self.cells / name)

    @property
    def plots(self) -> Path:
        return self.path / RunFolder.PLOTS


@dataclasses.dataclass(frozen=True)
class ExportFolder(Folder):
    """The files of an exported policy (`jaxvaco.host.policy_export`)."""

    MANIFEST: ClassVar[str] = "manifest.json"
    PARAMS: ClassVar[str] = "params.msgpack"

    @property
    def manifest(self) -> Path:
        return self.path / self.MANIFEST

    @property
    def params(self) -> Path:
        return self.path / self.PARAMS

    @property
    def evaluation(self) -> Path:
        return self.path / RunFolder.EVALUATION

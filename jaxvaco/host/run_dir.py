"""A run's folder: its name, its records (config.json with the host-loop options, runs.json),
and the checks that let a run continue in it (resume) or refuse to.

A fresh run gets a new folder (`prepare_run_dir`); `open_run(..., resume=run_dir)` checks
that the configuration and grid continue the run saved there (`resume_run_dir`, by the
rules of `resume_conflicts`: which changes a resume may accept) and opens its checkpoints.
The folder's files are `jaxvaco.host.run_folder.RunFolder`'s. Nothing here imports JAX.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxvaco.core.algos.registry import algorithms
from jaxvaco.core.config import (
    ConfigError,
    TrainConfig,
    from_dict,
    from_table,
    to_dict,
)
from jaxvaco.core.hparams import SHARED
from jaxvaco.host.checkpoint import Checkpointer
from jaxvaco.host.run_folder import RunFolder


@dataclasses.dataclass(frozen=True)
class RunControl:
    """How a run is checkpointed and logged; nothing here changes what it computes."""

    checkpoint_every: int = 5
    """Save a checkpoint every this many chunks; always at the end and on SIGINT/SIGTERM
    (0 = only then)."""
    keep_checkpoints: int = 3
    """Keep the newest this many checkpoints; 0 saves none (Ctrl-C then just stops)."""
    tensorboard: bool = False
    """Also log to TensorBoard under <run>/tensorboard (needs tensorboardX)."""
    wandb: bool = False
    """Also log to Weights & Biases (needs wandb; WANDB_MODE=offline works without network)."""
    wandb_project: str = "jaxvaco"
    compilation_cache: str = "auto"
    """Persistent XLA compilation cache: a rerun of the same configuration loads its
    programs instead of compiling them. `auto`: $JAXVACO_CACHE_DIR if set (`off` or empty
    disables), else $JAX_COMPILATION_CACHE_DIR, else $XDG_CACHE_HOME/jaxvaco/jax or
    ~/.cache/jaxvaco/jax; `off` disables it; anything else is the directory."""


class RunAlreadyComplete(Exception):  # noqa: N818 - not an error: nothing is left to do
    """A resumed run has no checkpoint to continue and its metrics already reach the end."""


Grid = dict[str, Sequence[float]] | list[dict[str, float]]
"""A product grid {name: values} (every combination), or an explicit list of combinations
{name: value} (a random search: configurations that are not a product)."""


def grid_as_json(grid: Grid | None) -> dict | list:
    """The grid as runs.json stores it (lists, not tuples or arrays)."""
    if isinstance(grid, list):
        return [dict(combo) for combo in grid]
    return {k: list(v) for k, v in (grid or {}).items()}


def default_run_name(config: TrainConfig) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{config.env.replace('/', '-')}__{config.algo}__{stamp}"


def prepare_run_dir(config: TrainConfig, control: RunControl) -> tuple[TrainConfig, Path]:
    """Name and create a fresh run directory; refuse one that holds another run's results."""
    if not config.run_name:
        config = dataclasses.replace(config, run_name=default_run_name(config))
    run_dir = Path(config.results_dir) / config.run_name
    found = RunFolder(run_dir).trained()
    if found:
        raise ConfigError(f"{run_dir} already holds a run ({', '.join(found)}): continue it "
                          f"with --resume {run_dir}, pick another --run-name, or delete the "
                          "folder.")
    run_dir.mkdir(parents=True, exist_ok=True)
    write_run_record(run_dir, config, control, [])
    return config, run_dir


def write_run_record(run_dir: Path, config: TrainConfig, control: RunControl,
                     resume_changes: list[dict]) -> None:
    """config.json: the TrainConfig, the host-loop options and the accepted resume changes."""
    RunFolder(run_dir).write_config({**to_dict(config), "control": dataclasses.asdict(control),
                                     "resume_changes": resume_changes})


def load_run_dir(run_dir: Path) -> tuple[TrainConfig, Grid]:
    """The config and grid a run directory was started with."""
    folder = RunFolder(run_dir)
    return from_dict(folder.read_config(), source=str(folder.config)), folder.read_runs()["grid"]


def load_run_control(run_dir: Path) -> RunControl:
    """The host-loop options a run was last started with (defaults for older runs)."""
    folder = RunFolder(run_dir)
    control = folder.read_config().get("control", {})
    return from_table(RunControl, control, str(folder.config), "control.")


def complete_message(run_dir: Path, config: TrainConfig) -> str:
    return (f"{run_dir} is already complete ({config.num_iterations} iterations, "
            f"{config.num_iterations * config.batch_size:,} env steps per run); its results are "
            f"in {RunFolder(run_dir).metrics}. Start a new run to train more.")


RESUMABLE_CHANGES = ("progress", "results_dir", "run_name")
"""Config fields that may differ on resume: they change where and how a run is shown, not
what it computes."""

def hyperparam_fields() -> tuple[str, ...]:
    """Config fields that --resume-with-changes accepts: `jaxvaco.core.hparams.Hyperparams` leaves
    (the shared ones and every algorithm's traced options), which change no array shape, so
    the checkpointed state continues under the new values."""
    return (*SHARED, *(f"{name}.{option}" for name, spec in algorithms().items()
                       for option in spec.traced))


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
    """The changes that --resume-with-changes accepts (`hyperparam_fields`)."""
    return [text for name, text in changed_fields(saved, new).items()
            if name in hyperparam_fields()]


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


def resume_run_dir(config: TrainConfig, grid: Grid | None, run_dir: Path,
                   iterations_done: int, control: RunControl, allow_changes: bool = False,
                   record: dict | None = None) -> tuple[TrainConfig, Grid]:
    """Check that (config, grid) continue the run in run_dir; update its config.json.

    `record`: the configuration and grid the newest checkpoint was written with
    (`Checkpointer.recorded`), which decides over config.json and runs.json (a user may have
    edited or lost those); without one (no checkpoint, or one written before records) the
    files decide. Only fields that change nothing computed (see
    `resume_conflicts`) may differ; the grid must be the same (None = the
    saved one). With `allow_changes`, hyperparameters that change no array shape may differ
    too; config.json records them under "resume_changes" with the iteration they apply from.
    """
    saved, saved_grid = load_run_dir(run_dir)
    source = RunFolder.CONFIG
    if record is not None:
        saved = from_dict(record.get("config", {}), f"checkpoint {iterations_done} of {run_dir}")
        saved_grid = record.get("grid", saved_grid)
        source = f"checkpoint {iterations_done}, which records the configuration it was made with"
    config = dataclasses.replace(config, results_dir=str(run_dir.parent), run_name=run_dir.name)
    problems = resume_conflicts(saved, config, iterations_done)
    changeable = hyperparam_changes(saved, config)
    accepted = changeable if allow_changes else []
    problems = [p for p in problems if p not in accepted]
    if grid is not None and grid_as_json(grid) != saved_grid:
        problems.append(f"grid: {saved_grid} -> {grid}")
    if problems:
        raise ConfigError(resume_refusal(run_dir, problems, allow_changes,
                                         set(problems) <= set(changeable), source))
    history = RunFolder(run_dir).read_config().get("resume_changes", [])
    if accepted:
        history = [*history, {"iteration": iterations_done, "changes": accepted}]
    write_run_record(run_dir, config, control, history)
    return config, saved_grid


def resume_refusal(run_dir: Path, problems: list[str], allowed_changes: bool,
                   all_changeable: bool, source: str = RunFolder.CONFIG) -> str:
    """Why a resume is refused, and what to do instead."""
    head = (f"Cannot resume {run_dir} with a changed experiment (compared with {source}): "
            f"{'; '.join(problems)}.")
    if allowed_changes:
        return (f"{head} --resume-with-changes accepts only values that change no array shape "
                "(learning rate, γ, λ, loss coefficients, δ, ρ̄, c̄, target KL); start a new run "
                "to change the others.")
    if all_changeable:
        return (f"{head} To continue with these values from the newest checkpoint, add "
                f"--resume-with-changes ({RunFolder.CONFIG} records the change).")
    return f"{head} Start a new run to change these."


def open_run(config: TrainConfig, grid: Grid | None, control: RunControl,
             resume: Path | None, allow_changes: bool = False
             ) -> tuple[TrainConfig, Grid | None, Path, Checkpointer | None]:
    """The run's config, grid, directory and checkpoints: a fresh run or one resumed."""
    if resume is None:
        config, run_dir = prepare_run_dir(config, control)
        store = (Checkpointer(RunFolder(run_dir).checkpoints, control.keep_checkpoints)
                 if control.keep_checkpoints else None)
        return config, grid, run_dir, store
    saved = load_run_dir(resume)[0]  # fails before creating anything when no run directory
    folder = RunFolder(resume)
    if not folder.checkpoint_steps():
        if folder.recorded_iterations() >= saved.num_iterations:
            raise RunAlreadyComplete(complete_message(resume, saved))
    if not control.keep_checkpoints:
        raise ConfigError("Resuming needs checkpoints: --keep-checkpoints must be > 0.")
    store = Checkpointer(folder.checkpoints, control.keep_checkpoints)
    try:
        steps = store.steps()
        done = steps[-1] if steps else 0
        record = store.recorded(done) if steps else None
        config, grid = resume_run_dir(config, grid, resume, done, control, allow_changes,
                                      record)
    except ConfigError:
        store.close()
        raise
    return config, grid, resume, store


def set_aside_results(run_dir: Path) -> Path | None:
    """Before a run with no checkpoint to continue from starts again at iteration 0: move
    its metrics.jsonl (rows of chunks whose checkpoint never completed: a kill during the
    first chunks) to metrics.before-restart-<n>.jsonl, with a warning, so that nothing is
    written over them. Returns the new path (None when there was nothing to keep)."""
    import warnings

    folder = RunFolder(run_dir)
    iterations = folder.recorded_iterations()
    kept = folder.set_aside_metrics()
    if kept is None:
        return None
    warnings.warn(f"{run_dir} has no checkpoint to continue from: it starts again at iteration "
                  f"0, and the rows it had (up to iteration {iterations}) are kept in {kept}.",
                  stacklevel=2)
    return kept

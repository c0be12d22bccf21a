"""Command line: `jaxvaco train | sweep | plot` (see `jaxvaco COMMAND --help`)."""

from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path
from typing import Annotated

import tyro

from jaxvaco import distributed
from jaxvaco.checkpoint import RunWriteError
from jaxvaco.compilation import describe_default
from jaxvaco.config import ConfigError, RunFileError, TrainConfig
from jaxvaco.run_dir import RunControl
from jaxvaco.runner import NonFiniteError
from jaxvaco.sweep import SweepConfig

USAGE = """usage: jaxvaco COMMAND [options]

commands:
  train   train one algorithm on one environment, many seeds in one program
          (jaxvaco train --help lists every option; --resume DIR continues a run)
  sweep   run a grid of environments × algorithms × lags × seeds from a TOML file
          and/or flags; restarting it skips finished cells
  plot    plot a sweep (or a single run): learning curves, return and TV against
          lag, aggregate intervals, as PNG and PDF
"""

Flat = tyro.conf.arg(name="")


@dataclasses.dataclass(frozen=True)
class TrainArgs:
    config: Annotated[TrainConfig, Flat] = TrainConfig()
    control: Annotated[RunControl, Flat] = RunControl()
    resume: str = ""
    """Continue the run in this directory from its newest checkpoint. Its config.json gives
    every default (--checkpoint-every, --keep-checkpoints, ... included); changing an option
    that alters the experiment is refused."""
    resume_with_changes: bool = False
    """With --resume: also accept new values of options that change no array shape (learning
    rate, γ, λ, loss coefficients, δ, ...), e.g. a lower --learning-rate after a run stopped on
    non-finite values. config.json records each change and the iteration it applies from."""


def option_value(argv: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in argv, read before tyro parses."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


FAILURES = ((RunFileError, "error: ", 2), (ConfigError, None, 2), (NonFiniteError, "", 1),
            (RunWriteError, "error: ", 1), (OSError, "error: ", 1))
"""Expected failures: kind, message prefix (None: the command's own), exit status."""


def describe(error: BaseException) -> str:
    """One line; an OS error names its file and what to check."""
    if isinstance(error, OSError) and error.filename:
        return (f"cannot write {error.filename}: {error.strerror}; check that its folder "
                "exists and is writable (or choose another --results-dir / --out).")
    return " ".join(str(error).split())


def report_failure(error: BaseException, config_prefix: str) -> int:
    """Print one line to stderr for an expected failure; its exit status."""
    prefix, status = next((p, s) for kind, p, s in FAILURES if isinstance(error, kind))
    print(f"jaxvaco: {config_prefix if prefix is None else prefix}{describe(error)}",
          file=sys.stderr)
    return status


def warn(messages: list[str]) -> None:
    """One stderr line per setting that is valid but has no effect."""
    for message in messages:
        print(f"jaxvaco: warning: {message}", file=sys.stderr)


def stopped_message(signum: int, run_dir: Path, resume_hint: str) -> str:
    return (f"jaxvaco: stopped by {signal.Signals(signum).name} at a chunk boundary; "
            f"the newest checkpoint is in {run_dir}. Continue with: {resume_hint}")


def resume_defaults(run_dir: Path) -> TrainArgs:
    """The options a run was started with: the defaults of `jaxvaco train --resume`."""
    from jaxvaco.run_dir import load_run_control, load_run_dir

    return TrainArgs(config=load_run_dir(run_dir)[0], control=load_run_control(run_dir))


def train_command(argv: list[str]) -> int:
    from jaxvaco.progress import print_summary
    from jaxvaco.run_dir import RunAlreadyComplete, complete_message
    from jaxvaco.runner import run
    from jaxvaco.validation import ineffective_options, validate

    resume = option_value(argv, "--resume")
    try:
        default = resume_defaults(Path(resume)) if resume else TrainArgs()
    except ConfigError as error:
        return report_failure(error, "")
    args = tyro.cli(TrainArgs, args=argv, default=default, prog="jaxvaco train",
                    description="Train an agent; all seeds run in one compiled program. "
                                f"Compilation cache: {describe_default()} "
                                "(--compilation-cache DIR|off, $JAXVACO_CACHE_DIR).")
    if args.resume_with_changes and not args.resume:
        return report_failure(ConfigError("--resume-with-changes needs --resume DIR (the run "
                                          "to continue)."), "invalid configuration: ")
    distributed.initialize(args.config.distributed)  # multi-host: before any JAX computation
    try:
        warn(ineffective_options(validate(args.config)))
        result = run(args.config, control=args.control, resume=args.resume or None,
                     allow_changes=args.resume_with_changes)
    except RunAlreadyComplete as done:
        print(f"jaxvaco: {done}")
        return 0
    except (ConfigError, NonFiniteError, RunWriteError, OSError) as error:
        return report_failure(error, "invalid configuration: ")
    if result.stop_signal:
        hint = f"jaxvaco train --resume {result.run_dir}"
        print(stopped_message(result.stop_signal, result.run_dir, hint), file=sys.stderr)
        return 128 + result.stop_signal
    if not result.config.progress:  # --no-progress hides the bar, not the results
        print_summary(result.config, result.run_dir, result.runs, result.summary)
    if result.already_complete:
        print(f"jaxvaco: {complete_message(result.run_dir, result.config)}")
    return 0


@dataclasses.dataclass(frozen=True)
class SweepArgs:
    sweep: Annotated[SweepConfig, Flat] = SweepConfig()
    control: Annotated[RunControl, Flat] = RunControl()


def sweep_command(argv: list[str]) -> int:
    from jaxvaco.sweep import load_sweep_file, long_lags, run_sweep

    path = argv[0] if argv and not argv[0].startswith("-") else None
    rest = argv[1:] if path else argv
    try:
        default = SweepArgs(sweep=load_sweep_file(Path(path))) if path else SweepArgs()
    except ConfigError as error:
        return report_failure(error, "")
    args = tyro.cli(SweepArgs, args=rest, default=default, prog="jaxvaco sweep [FILE.toml]",
                    description="Run a grid of envs × algos × lags × seeds; FILE.toml gives "
                                "the defaults, flags override them.")
    try:
        warn(long_lags(args.sweep))
        result = run_sweep(args.sweep, args.control)
    except (ConfigError, RunWriteError, OSError) as error:
        return report_failure(error, "invalid sweep: ")
    if result.stop_signal:
        hint = f"jaxvaco sweep {' '.join(argv)}"
        print(stopped_message(result.stop_signal, result.directory, hint), file=sys.stderr)
        return 128 + result.stop_signal
    return 1 if result.failed else 0


@dataclasses.dataclass(frozen=True)
class PlotArgs:
    directory: tyro.conf.Positional[Path]
    """A sweep directory (with results.csv), a single run directory (with metrics.jsonl), or
    a tidy CSV (an experiment's table, e.g. experiments/results/fair_study/study.csv)."""
    out: Path | None = None
    """Where the figures go; default: <directory>/plots (beside the CSV for a CSV)."""
    metric: str = "return"
    """Column plotted as the return (e.g. eval/greedy_return)."""


def plot_command(argv: list[str]) -> int:
    from jaxvaco.results import plot_results

    args = tyro.cli(PlotArgs, args=argv, prog="jaxvaco plot",
                    description="Plot a sweep or a run as PNG and PDF.")
    try:
        paths = plot_results(args.directory, args.out, args.metric)
    except (ConfigError, KeyError, ValueError) as error:
        print(f"jaxvaco: cannot plot {args.directory}: {describe(error)}", file=sys.stderr)
        return 2
    except OSError as error:
        return report_failure(error, "")
    for path in paths:
        print(path)
    return 0


COMMANDS = {"train": train_command, "sweep": sweep_command, "plot": plot_command}


def main(argv: list[str] | None = None) -> int:
    as_process = argv is None  # the `jaxvaco` command itself, not a call from Python
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"jaxvaco: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    code = COMMANDS[command](rest)
    if as_process:
        fast_exit(code)
    return code


def fast_exit(code: int) -> None:
    """End the process now: run the atexit handlers and flush, then skip the interpreter's
    teardown (freeing XLA's compiled programs, thread pools and every module's objects took
    0.5-3 s at the end of each command). Every file jaxvaco writes is closed by then. Only
    when no other thread runs (a normal exit would wait for it); else return."""
    import atexit
    import os
    import threading

    if threading.active_count() > 1:
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())

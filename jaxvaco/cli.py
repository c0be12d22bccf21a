"""Command line: `jaxvaco train | sweep | plot` (see `jaxvaco COMMAND --help`)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import shlex
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

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
  plot    print a sweep's (or a run's) results table and plot it: learning curves,
          return, retention and TV against lag, aggregate intervals, as PNG and PDF
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


class UsageError(Exception):
    """The command line could not be parsed (tyro's message, as one line)."""


BOX_DRAWING = "╭╮╰╯│─┃━┏┓┗┛"


def usage_line(framed: str) -> str:
    """tyro's framed error as one line: the box's title and the text before its first rule.

    ╭─ Value error ─╮ / │ Error parsing --num-envs: ... │ / │ ──── │ / ... becomes
    "Value error: Error parsing --num-envs: ..."."""
    title, body = "", []
    for raw in framed.splitlines():
        line = raw.strip()
        if line.startswith("╭"):
            title = line.strip(BOX_DRAWING + " ")
            continue
        text = line.strip(BOX_DRAWING + " ")
        if line.startswith("│") and not text and line.strip("│ "):  # a rule: the text ended
            break
        if text:
            body.append(text)
    message = " ".join(" ".join(body).split())
    if not message.startswith(title):
        message = f"{title}: {message}" if title and message else message or title
    return message or " ".join(framed.split())


def parse_args(kind: type, argv: list[str], **options: Any) -> Any:
    """`tyro.cli(kind, args=argv, ...)`; a parse error raises UsageError with one line
    (--help still prints tyro's help and exits)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(kind, args=argv, **options)
    except SystemExit as exit_:
        if not exit_.code:
            sys.stderr.write(captured.getvalue())
            raise
        raise UsageError(f"{usage_line(captured.getvalue())} (see {options['prog']} --help)"
                         ) from None


def option_value(argv: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in argv, read before tyro parses."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


FAILURES = ((UsageError, "", 2), (RunFileError, "error: ", 2), (ConfigError, None, 2),
            (NonFiniteError, "", 1), (RunWriteError, "error: ", 1), (OSError, "error: ", 1))
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
    try:
        args = parse_args(TrainArgs, argv, default=default, prog="jaxvaco train",
                          description="Train an agent; all seeds run in one compiled program. "
                                      f"Compilation cache: {describe_default()} "
                                      "(--compilation-cache DIR|off, $JAXVACO_CACHE_DIR).")
    except UsageError as error:
        return report_failure(error, "")
    if args.resume_with_changes and not args.resume:
        return report_failure(ConfigError("--resume-with-changes needs --resume DIR (the run "
                                          "to continue)."), "invalid configuration: ")
    try:
        distributed.initialize(args.config.distributed)  # multi-host: before any JAX call
        config = validate(args.config)
        warn(ineffective_options(config))
        result = run(config, control=args.control, resume=args.resume or None,
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
    from jaxvaco.sweep import (
        load_sweep_file,
        long_lags,
        run_sweep,
        unlike_comparisons,
        validate_sweep,
    )

    path = argv[0] if argv and not argv[0].startswith("-") else None
    rest = argv[1:] if path else argv
    try:
        default = SweepArgs(sweep=load_sweep_file(Path(path))) if path else SweepArgs()
    except ConfigError as error:
        return report_failure(error, "")
    try:
        args = parse_args(SweepArgs, rest, default=default, prog="jaxvaco sweep [FILE.toml]",
                          description="Run a grid of envs × algos × lags × seeds; FILE.toml "
                                      "gives the defaults, flags override them.")
    except UsageError as error:
        return report_failure(error, "")
    try:
        spec = validate_sweep(args.sweep)
        warn(long_lags(spec) + unlike_comparisons(spec))
        result = run_sweep(args.sweep, args.control)
    except (ConfigError, RunWriteError, OSError) as error:
        return report_failure(error, "invalid sweep: ")
    if result.stop_signal:
        hint = f"jaxvaco sweep {' '.join(argv)}"
        print(stopped_message(result.stop_signal, result.directory, hint), file=sys.stderr)
        return 128 + result.stop_signal
    print_sweep_answer(result.directory)
    return 1 if result.failed else 0


def print_sweep_answer(directory: Path) -> None:
    """The end of a sweep: its results table (`print_table`), then, as the last line, the
    command that plots it. Nothing when no cell is complete."""
    from jaxvaco.results import load_results

    try:
        table = load_results(directory)
    except ConfigError:  # no complete cell: nothing to show or plot
        return
    print_table(table, directory)
    print(f"jaxvaco plot {shlex.quote(str(directory))}", flush=True)


def print_table(table: dict, source: Path) -> None:
    """One row per (env, variant), a column per K (`jaxvaco.analysis.tables.robustness_table`,
    printed by `jaxvaco.progress.print_results_table`); a table it cannot summarise gets a
    warning instead."""
    from jaxvaco.analysis.tables import robustness_table
    from jaxvaco.progress import print_results_table

    try:
        rows = robustness_table(table)
    except (KeyError, ValueError) as error:
        warn([f"cannot summarise {source}: {describe(error)}"])
        return
    print_results_table(rows)


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
    from jaxvaco.results import load_results, plot_results

    try:
        args = parse_args(PlotArgs, argv, prog="jaxvaco plot",
                          description="Print a sweep's (or a run's) results table and plot "
                                      "it as PNG and PDF.")
    except UsageError as error:
        return report_failure(error, "")
    try:
        table = load_results(args.directory)
        print_table(table, args.directory)
        paths = plot_results(args.directory, args.out, args.metric, table=table)
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
    """Run one command in this process (argv None: sys.argv[1:]); its exit status. The
    `jaxvaco` program itself is `jaxvaco.process.main`, which also owns signals and exit."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"jaxvaco: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    return COMMANDS[command](rest)


if __name__ == "__main__":
    from jaxvaco.process import main as process_main

    process_main()

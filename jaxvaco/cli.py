"""Command line: `jaxvaco train | sweep | plot | eval | export | envs` (see
`jaxvaco COMMAND --help`)."""

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
from jaxvaco.guard import NonFiniteError
from jaxvaco.run_dir import RunControl
from jaxvaco.sweep import SweepConfig

USAGE = """usage: jaxvaco COMMAND [options]

commands:
  train   train one algorithm on one environment, many seeds in one program
          (jaxvaco train --help lists every option; --resume DIR continues a run)
  sweep   run a grid of environments × algorithms × lags × seeds from a TOML file
          and/or flags; restarting it skips finished cells
  plot    print a sweep's (or a run's) results table and plot it: learning curves,
          return, retention and TV against lag, aggregate intervals, as PNG and PDF
  eval    roll a trained policy out in fresh environments: episode returns per run,
          mean [95% CI], into RUN/eval.json; --video FILE.gif|.mp4 renders an episode
          (jaxvaco eval RUN [--run I] [--episodes N] [--stochastic] [--checkpoint STEP]
          [--video FILE] [--seed S])
  export  write one run's policy (parameters + manifest.json) to a folder that
          jaxvaco.load_policy reads without the training state
          (jaxvaco export RUN --out DIR [--run I] [--checkpoint STEP])
  envs    list the environments by family, with their action and observation shapes

  jaxvaco --version prints the version.
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
    args = parse_args(TrainArgs, argv, default=default, prog="jaxvaco train",
                      description="Train an agent; all seeds run in one compiled program. "
                                  f"Compilation cache: {describe_default()} "
                                  "(--compilation-cache DIR|off, $JAXVACO_CACHE_DIR).")
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
        plan_sweep,
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
    args = parse_args(SweepArgs, rest, default=default, prog="jaxvaco sweep [FILE.toml]",
                      description="Run a grid of envs × algos × lags × seeds; FILE.toml "
                                  "gives the defaults, flags override them.")
    try:
        spec = validate_sweep(args.sweep)
        plan = plan_sweep(spec)  # every cell validated once, before anything is made
        warn(long_lags(spec, plan) + unlike_comparisons(spec, plan))
        result = run_sweep(spec, args.control, plan=plan)
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

    args = parse_args(PlotArgs, argv, prog="jaxvaco plot",
                      description="Print a sweep's (or a run's) results table and plot "
                                  "it as PNG and PDF.")
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


@dataclasses.dataclass(frozen=True)
class EvalArgs:
    run_dir: tyro.conf.Positional[Path]
    """A run directory (results/<run>) or a policy folder written by jaxvaco export."""
    run: str | None = None
    """The run to evaluate: its index (0, 1, ...) or its labels (seed=1,lag_delay=4);
    default: every run of the directory (the video shows run 0)."""
    episodes: int | None = None
    """Episodes per run, run in parallel; default: the run's --eval.num-episodes."""
    stochastic: bool = False
    """Draw actions from the policy instead of acting greedily (arg-max / mean)."""
    checkpoint: int | None = None
    """The checkpoint to evaluate (its iteration); default: the newest."""
    video: Path | None = None
    """Also render the run's first episode to this .gif (Pillow) or .mp4 (needs ffmpeg:
    pip install "jaxvaco[video]")."""
    seed: int | None = None
    """Draw other episodes (keys fold_in(PRNGKey(SEED), run seed)); default: the run's own
    evaluation keys at that checkpoint (fold_in(PRNGKey(10000 + iteration), run seed)), so
    with its episode count the returns are the run's own evaluation, bit for bit."""


def eval_command(argv: list[str]) -> int:
    args = parse_args(EvalArgs, argv, prog="jaxvaco eval",
                      description="Evaluate a trained policy in fresh environments; "
                                  "writes RUN/eval.json.")
    try:
        return evaluate(args)
    except (ConfigError, OSError) as error:
        return report_failure(error, "")


def evaluate(args: EvalArgs) -> int:
    """`jaxvaco eval`: every check first (options, video file, run, checkpoint, renderer),
    then the evaluation, the table, eval.json and the video."""
    from jaxvaco.policy import (
        choose_checkpoint,
        open_source,
        parse_run,
        select_run,
        source_state,
    )

    if args.episodes is not None and args.episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {args.episodes}.")
    if args.video is not None:
        from jaxvaco.video import check_video_path

        check_video_path(args.video)
    source = open_source(args.run_dir)
    choice = parse_run(args.run)
    chosen = [select_run(source, choice)] if choice is not None else list(range(len(
        source.runs)))
    step = choose_checkpoint(source, args.checkpoint)
    if args.video is not None:
        import matplotlib

        from jaxvaco.video import check_renderable

        matplotlib.use("Agg")
        check_renderable(source.config.env)
    from jaxvaco.policy import evaluate_runs

    episodes = args.episodes or source.config.eval.num_episodes
    greedy = not args.stochastic
    state = source_state(source, step)
    returns = evaluate_runs(source, step, episodes, greedy, args.seed, state)
    report = eval_report(source, step, episodes, greedy, args.seed, returns, chosen)
    print_eval_table(source, report)
    from jaxvaco.run_dir import write_json

    path = source.path / "eval.json"
    write_json(path, report)
    print(f"wrote {path}")
    if args.video is not None:
        print(render_video(args, source, step, episodes, greedy, state, chosen[0]))
    return 0


def eval_report(source: Any, step: int | None, episodes: int, greedy: bool,
                seed: int | None, returns: Any, chosen: list[int]) -> dict:
    """eval.json: what was evaluated, how, and per chosen run its returns, mean, 95% CI
    and, where the run evaluated the same episodes, its own recorded return."""
    import jaxvaco
    from jaxvaco.analysis.stats import seed_mean_ci
    from jaxvaco.policy import recorded_returns

    same_episodes = seed is None and episodes == source.config.eval.num_episodes
    recorded = recorded_returns(source, step, greedy) if same_episodes else {}
    means = returns.mean(axis=1)  # as the runner averages (float32)
    runs = []
    for r in chosen:
        _, low, high = seed_mean_ci(returns[r])
        runs.append({"run": r, "labels": source.runs[r], "mean": float(means[r]),
                     "ci95": [low, high], "recorded": recorded.get(r),
                     "returns": [float(x) for x in returns[r]]})
    keys = ("fold_in(PRNGKey(10000 + iteration), seed)" if seed is None
            else f"fold_in(PRNGKey({seed}), seed)")
    return {"path": str(source.path), "kind": source.kind, "env": source.config.env,
            "algo": source.config.algo, "checkpoint": step,
            "mode": "greedy" if greedy else "stochastic", "episodes": episodes,
            "seed": seed, "keys": keys, "jaxvaco_version": jaxvaco.__version__, "runs": runs}


def print_eval_table(source: Any, report: dict) -> None:
    from rich.table import Table

    from jaxvaco.analysis.tables import format_estimate, format_number

    config = source.config
    at = ("" if report["checkpoint"] is None
          else f", checkpoint {report['checkpoint']}")
    table = Table(title=f"{config.algo} on {config.env}{at}: {report['mode']} return, "
                        f"{report['episodes']} episodes per run")
    labels = list(dict.fromkeys(k for row in report["runs"] for k in row["labels"]))
    recorded = any(row["recorded"] is not None for row in report["runs"])
    for name in ["run", *labels]:
        table.add_column(name, justify="right")
    for name in ["return: mean [95% CI]", "min", "max",
                 *(["recorded", "same"] if recorded else [])]:
        table.add_column(name, justify="right")
    for row in report["runs"]:
        values = row["returns"]
        cells = [str(row["run"]), *(str(row["labels"].get(k, "")) for k in labels),
                 format_estimate((row["mean"], *row["ci95"])), format_number(min(values)),
                 format_number(max(values))]
        if recorded:
            same = row["recorded"] is not None and row["recorded"] == row["mean"]
            cells += [format_number(row["recorded"]), "yes" if same else "no"]
        table.add_row(*cells)
    console = wide_console(table)
    console.print(table)
    episodes = ("the run's own evaluation episodes at this checkpoint" if report["seed"] is None
                else f"episodes of --seed {report['seed']}")
    console.print(f"{episodes} (keys {report['keys']})" + (
        "; recorded: the run's eval/" + report["mode"] + "_return in metrics.jsonl, same: "
        "equal to the last bit" if recorded else ""), soft_wrap=True)


def wide_console(table: Any) -> Any:
    """A rich console as wide as `table` needs when stdout is not a terminal (a file or a
    pipe keeps whole rows)."""
    from rich.console import Console
    from rich.measure import Measurement

    console = Console()
    if not console.is_terminal:
        width = Measurement.get(console, console.options.update_width(10_000), table).maximum
        title = len(str(table.title or ""))
        console = Console(width=max(console.width, width, title))
    return console


def render_video(args: EvalArgs, source: Any, step: int | None, episodes: int, greedy: bool,
                 state: Any, index: int) -> str:
    """Render the first evaluation episode of run `index` to --video; what was written."""
    from jaxvaco.compiled import eval_keys
    from jaxvaco.policy import record_episode, source_policy
    from jaxvaco.video import render_episode, write_video

    policy = source_policy(source, index, step, state)
    key = eval_keys(step or 0, [source.runs[index]], args.seed)[0]
    episode = record_episode(policy, key, greedy, episodes)
    frames, fps = render_episode(episode)
    write_video(frames, args.video, fps)
    return (f"wrote {args.video}: run {index}, episode 0 (return {episode.episode_return:g}, "
            f"{episode.length} steps), {len(frames)} frames at {fps:.3g} fps")


@dataclasses.dataclass(frozen=True)
class ExportArgs:
    run_dir: tyro.conf.Positional[Path]
    """A run directory (results/<run>)."""
    out: Path
    """The folder to write (created; an earlier export there is replaced)."""
    run: str = "0"
    """The run to export: its index (0, 1, ...) or its labels (seed=1,lag_delay=4)."""
    checkpoint: int | None = None
    """The checkpoint to export (its iteration); default: the newest."""


def export_command(argv: list[str]) -> int:
    from jaxvaco.policy import export_policy, load_policy, parse_run

    args = parse_args(ExportArgs, argv, prog="jaxvaco export",
                      description="Write one run's policy (params.msgpack and "
                                  "manifest.json) for jaxvaco.load_policy(DIR).")
    try:
        policy = load_policy(args.run_dir, parse_run(args.run), args.checkpoint)
        out = export_policy(policy, args.out)
    except (ConfigError, OSError) as error:
        return report_failure(error, "")
    labels = ", ".join(f"{k}={v}" for k, v in policy.labels.items())
    print(f"exported run {policy.source['run']} ({labels}) of {args.run_dir} at checkpoint "
          f"{policy.source['checkpoint']} to {out}")
    print(f"use it with: jaxvaco.load_policy({str(out)!r}).act(obs)")
    return 0


@dataclasses.dataclass(frozen=True)
class EnvsArgs:
    """No options."""


def envs_command(argv: list[str]) -> int:
    from rich.table import Table

    from jaxvaco.envs import env_catalog

    parse_args(EnvsArgs, argv, prog="jaxvaco envs",
               description="List the environments by family with their action and "
                           "observation shapes.")
    table = Table(title="Environments (--env NAME)")
    for name in ("family", "env", "actions", "observation", "note"):
        table.add_column(name)
    family = None
    for row in env_catalog():
        if row["family"] != family and family is not None:
            table.add_section()
        family = row["family"]
        if row["discrete"] is None:
            actions = observation = "—"
        else:
            actions = (f"discrete {row['num_actions']}" if row["discrete"]
                       else f"continuous {row['num_actions']}")
            observation = "×".join(map(str, row["obs_shape"])) or "scalar"
        table.add_row(family, row["name"], actions, observation, row["note"])
    console = wide_console(table)
    console.print(table)
    console.print("actions: discrete n (n choices) or continuous d (a d-dimensional vector in "
                  "[-1, 1] for Brax); Brax shapes are for the default --brax-backend spring.",
                  soft_wrap=True)
    return 0


COMMANDS = {"train": train_command, "sweep": sweep_command, "plot": plot_command,
            "eval": eval_command, "export": export_command, "envs": envs_command}


def main(argv: list[str] | None = None) -> int:
    """Run one command in this process (argv None: sys.argv[1:]); its exit status. The
    `jaxvaco` program itself is `jaxvaco.process.main`, which also owns signals and exit."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] in ("-V", "--version"):
        from jaxvaco import __version__

        print(f"jaxvaco {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"jaxvaco: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[command](rest)
    except UsageError as error:  # any command's parse error (`parse_args`): one line, exit 2
        return report_failure(error, "")


if __name__ == "__main__":
    from jaxvaco.process import main as process_main

    process_main()

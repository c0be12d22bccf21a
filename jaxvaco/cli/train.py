"""`jaxvaco train`: train one algorithm on one environment, many seeds in one program;
`--resume DIR` continues a run."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated

from jaxvaco.cli.common import (
    Flat,
    option_value,
    parse_args,
    report_failure,
    stopped_message,
    warn,
)
from jaxvaco.core import distributed
from jaxvaco.core.config import ConfigError, TrainConfig
from jaxvaco.core.guard import NonFiniteError
from jaxvaco.host.asynchronous.channels import AsyncWorkerError
from jaxvaco.host.checkpoint import RunWriteError
from jaxvaco.host.compilation import describe_default
from jaxvaco.host.run_dir import RunControl


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


def resume_defaults(run_dir: Path) -> TrainArgs:
    """The options a run was started with: the defaults of `jaxvaco train --resume`."""
    from jaxvaco.host.run_dir import load_run_control, load_run_dir

    return TrainArgs(config=load_run_dir(run_dir)[0], control=load_run_control(run_dir))


def train_command(argv: list[str]) -> int:
    from jaxvaco.core.validation import ineffective_options, validate
    from jaxvaco.host.progress import print_summary
    from jaxvaco.host.run_dir import RunAlreadyComplete, complete_message
    from jaxvaco.host.runner import run

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
    except (ConfigError, NonFiniteError, RunWriteError, AsyncWorkerError, OSError) as error:
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

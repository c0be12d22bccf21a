"""What the commands share: parsing a command line with tyro (a parse error as one line),
and reporting an expected failure as one `jaxvaco:` line with its exit status."""

from __future__ import annotations

import contextlib
import io
import signal
import sys
from pathlib import Path
from typing import Any

import tyro

from jaxvaco.core.config import ConfigError, RunFileError
from jaxvaco.core.guard import NonFiniteError
from jaxvaco.host.asynchronous.channels import AsyncWorkerError
from jaxvaco.host.checkpoint import RunWriteError

Flat = tyro.conf.arg(name="")


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
            (NonFiniteError, "", 1), (RunWriteError, "error: ", 1), (OSError, "error: ", 1),
            (AsyncWorkerError, "error: ", 1))
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

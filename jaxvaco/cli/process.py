"""The `jaxvaco` program as a process: how it starts, how signals reach it, how it ends.

`main` is the console script. Before it imports anything heavy (JAX, orbax, tyro) it
takes over SIGINT and SIGTERM, formats warnings as one line, and quiets what background
threads print; it then runs the command (`jaxvaco.cli.main`) and leaves through
`exit_process` on every path: a result, a refusal, a signal, a bug. The promises:

- a signal before training began (or after it ended) ends the process at once with one
  line and exit status 128 + signal; during training the host loop
  (`jaxvaco.host.signals.StopSignals`) takes it instead, saves a checkpoint at the next chunk
  boundary and prints the command that continues the run;
- an expected failure is one `jaxvaco:` line on stderr; a bug shows its traceback;
- the interpreter's teardown never runs under XLA's compile threads or orbax's writers
  (it aborted with `FATAL: exception not rethrown`, exit 134).

Nothing here imports JAX, so the handlers are in place within milliseconds of start.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

INTERRUPTED = ("jaxvaco: stopped by {name}; every file written before it is intact (a run "
               "that had saved a checkpoint continues with jaxvaco train --resume DIR).")


def main() -> None:
    """The `jaxvaco` command: run `jaxvaco.cli.main(sys.argv[1:])` and exit with its status."""
    interrupt_at_once()
    one_line_warnings()
    quiet_background_errors()
    try:
        from jaxvaco.cli import main as command

        code = command(sys.argv[1:])
    except SystemExit as exit_:  # tyro's --help
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BrokenPipeError:  # the reader of stdout left (`jaxvaco train --help | head`)
        code = 128 + signal.SIGPIPE
    except Exception:  # noqa: BLE001 - a bug: show it, then leave like every other exit
        traceback.print_exc()
        code = 1
    exit_process(code)


def interrupt_at_once() -> None:
    """SIGINT/SIGTERM outside the training loop: one line, exit 128 + signal, at once.

    Start-up traces in Python and compiles in background threads inside XLA; a
    KeyboardInterrupt there unwound through them (a traceback, a 683-line dump with a
    jaxpr, then a segmentation fault in the teardown). The host loop replaces this handler
    while it trains and puts it back afterwards, so a second signal during training ends
    the process here. Files are written atomically (a temporary file and a rename; orbax's
    steps likewise), so leaving at any instant loses at most the file being written."""

    def handle(signum: int, frame: object) -> None:
        # the process's own stderr: a signal can arrive while parsing options, when
        # sys.stderr is redirected into a buffer (tyro's errors become one line)
        print(INTERRUPTED.format(name=signal.Signals(signum).name), file=sys.__stderr__)
        exit_process(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handle)


def one_line_warnings() -> None:
    """Warnings (jaxvaco's, orbax's, JAX's) as one `jaxvaco: warning:` line each."""
    import warnings

    def format_warning(message, category, filename, lineno, line=None) -> str:
        return f"jaxvaco: warning: {' '.join(str(message).split())}\n"

    warnings.formatwarning = format_warning


def quiet_background_errors() -> None:
    """What background threads raise, as one deduplicated warning line each instead of a
    traceback each. The command reports its own failure (a failed checkpoint write is
    `RunWriteError`'s one line), so what follows from it is noise:

    - orbax's absl error logs of the failed write (with tracebacks);
    - tensorstore's C++ threads completing the remaining writes into orbax's event loop,
      already closed by the failure: each `call_soon_threadsafe` raised and printed a
      traceback (52 of them after one full disk). On a closed loop nothing can run any
      more, so the callback is dropped instead;
    - exceptions of Python threads (`threading.excepthook`)."""
    import asyncio
    import logging
    import threading

    logging.getLogger("absl").setLevel(logging.CRITICAL)
    schedule = asyncio.BaseEventLoop.call_soon_threadsafe

    def call_soon_threadsafe(loop, callback, *args, **kwargs):
        return None if loop.is_closed() else schedule(loop, callback, *args, **kwargs)

    asyncio.BaseEventLoop.call_soon_threadsafe = call_soon_threadsafe
    said: set[str] = set()

    def one_line(args: threading.ExceptHookArgs) -> None:
        text = f"{args.exc_type.__name__}: {' '.join(str(args.exc_value).split())[:300]}"
        if text not in said:
            said.add(text)
            print(f"jaxvaco: warning: in a background thread: {text}", file=sys.stderr)

    threading.excepthook = one_line


def exit_process(code: int) -> None:
    """End the process now, whatever other threads are doing: flush the standard streams
    and the logging handlers, then `os._exit`.

    The interpreter's own teardown is what must be avoided: XLA compiles in background
    threads (`jaxvaco.host.programs.Program.compile_ahead`), orbax and the progress bar keep
    threads of their own, and tearing the interpreter down under them aborted the process
    (`FATAL: exception not rethrown`, exit 134) or made orbax schedule work after
    shutdown. Every file jaxvaco writes is complete by then (`runner.run` waits for its
    checkpoints), and the work left in those threads is not needed: abandoning it is
    safe. It also skips freeing XLA's programs and every module's objects (0.5-3 s)."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)

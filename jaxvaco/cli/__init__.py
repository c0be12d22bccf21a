"""The interface layer: the command line `jaxvaco train | sweep | plot | eval | export | envs`
(see `jaxvaco COMMAND --help`), each command a module of this package, imported when it
runs (`COMMANDS`); `process` is the program itself (signals, exit)."""

from __future__ import annotations

import importlib
import sys

from jaxvaco.host.run_folder import ExportFolder, RunFolder

USAGE = f"""usage: jaxvaco COMMAND [options]

commands:
  train   train one algorithm on one environment, many seeds in one program
          (jaxvaco train --help lists every option; --resume DIR continues a run)
  sweep   run a grid of environments × algorithms × lags × seeds from a TOML file
          and/or flags; restarting it skips finished cells
  plot    print a sweep's (or a run's) results table and plot it: learning curves,
          return, retention and TV against lag, aggregate intervals, as PNG and PDF
  eval    roll a trained policy out in fresh environments: episode returns per run,
          mean [95% CI], into RUN/{RunFolder.EVALUATION}; --video FILE.gif|.mp4 renders an episode
          (jaxvaco eval RUN [--run I] [--episodes N] [--stochastic] [--checkpoint STEP]
          [--video FILE] [--seed S])
  export  write one run's policy (parameters + {ExportFolder.MANIFEST}) to a folder that
          jaxvaco.load_policy reads without the training state
          (jaxvaco export RUN --out DIR [--run I] [--checkpoint STEP])
  envs    list the environments by family, with their action and observation shapes

  jaxvaco --version prints the version.
"""


COMMANDS = {"train": "train", "sweep": "sweep", "plot": "plot", "eval": "evaluate",
            "export": "export", "envs": "envs"}
"""Each command's module of this package; it defines `<command>_command(argv) -> status`.
Imported only when that command runs: they load JAX, `--help` and `--version` need not."""


def main(argv: list[str] | None = None) -> int:
    """Run one command in this process (argv None: sys.argv[1:]); its exit status. The
    `jaxvaco` program itself is `jaxvaco.cli.process.main`, which also owns signals and exit."""
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
    from jaxvaco.cli.common import UsageError, report_failure

    module = importlib.import_module(f"jaxvaco.cli.{COMMANDS[command]}")
    try:
        return getattr(module, f"{command}_command")(rest)
    except UsageError as error:  # any command's parse error (`parse_args`): one line, exit 2
        return report_failure(error, "")

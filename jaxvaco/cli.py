"""Command line: `jaxvaco train [options]` (see `jaxvaco train --help`)."""

from __future__ import annotations

import sys

import tyro

from jaxvaco.config import ConfigError, TrainConfig

USAGE = """usage: jaxvaco COMMAND [options]

commands:
  train   train one algorithm on one environment, many seeds in one program
          (jaxvaco train --help lists every option)
"""


def train_command(argv: list[str]) -> int:
    config = tyro.cli(TrainConfig, args=argv, prog="jaxvaco train",
                      description="Train an agent; all seeds run in one compiled program.")
    from jaxvaco.runner import run

    try:
        run(config)
    except ConfigError as error:
        print(f"jaxvaco: invalid configuration: {error}", file=sys.stderr)
        return 2
    return 0


COMMANDS = {"train": train_command}


def main(argv: list[str] | None = None) -> int:
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
    sys.exit(main())

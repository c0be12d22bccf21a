"""`jaxvaco export`: write one run's policy to a folder that `jaxvaco.load_policy` reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import tyro

from jaxvaco.cli.common import parse_args, report_failure
from jaxvaco.core.config import ConfigError
from jaxvaco.host.run_folder import ExportFolder


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
    from jaxvaco.host.policy import load_policy
    from jaxvaco.host.policy_export import export_policy
    from jaxvaco.host.policy_source import parse_run

    args = parse_args(ExportArgs, argv, prog="jaxvaco export",
                      description=f"Write one run's policy ({ExportFolder.PARAMS} and "
                                  f"{ExportFolder.MANIFEST}) for jaxvaco.load_policy(DIR).")
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

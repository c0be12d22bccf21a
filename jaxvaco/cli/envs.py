"""`jaxvaco envs`: list the environments by family, with their action and observation
shapes."""

from __future__ import annotations

import dataclasses

from jaxvaco.cli.common import parse_args, wide_console


@dataclasses.dataclass(frozen=True)
class EnvsArgs:
    """No options."""


def envs_command(argv: list[str]) -> int:
    from rich.table import Table

    from jaxvaco.core.envs import env_catalog

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

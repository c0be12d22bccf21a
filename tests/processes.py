"""The `jaxvaco` program run as a process, as a user runs it (`python -m jaxvaco ...`), for
the tests that check what a command prints and how it exits."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

CHILD_ENV = {"JAX_PLATFORMS": "cpu", "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}
"""The processes compile as the in-process tests do (see conftest's fast_compile) and share
the test session's compilation cache ($JAXVACO_CACHE_DIR, set by conftest)."""
CRASHES = ("Traceback", "FATAL", "Segmentation fault", "Aborted", "core dumped")
"""What must never appear in a command's output."""


@dataclasses.dataclass
class Outcome:
    status: int
    out: str
    err: str


def start(argv: list[str], env: dict | None = None) -> subprocess.Popen:
    """`jaxvaco ARGV` as a process."""
    return subprocess.Popen([sys.executable, "-m", "jaxvaco", *argv],
                            env={**os.environ, **CHILD_ENV, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def process(argv: list[str], env: dict | None = None) -> Outcome:
    """`jaxvaco ARGV` as a process: its exit status, stdout and stderr."""
    child = start(argv, env)
    out, err = child.communicate(timeout=300)
    return Outcome(child.returncode, out, err)

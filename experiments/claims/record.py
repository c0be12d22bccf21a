"""Where the claims' record lives, the `Claim` type and the record read and written. A leaf
of the claims package: it imports nothing of the project."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments" / "results"
RECORD = RESULTS / "claims.json"
README = REPO / "README.md"


@dataclasses.dataclass
class Context:
    """Where a measurement may write (a temporary folder) and which Python runs it."""

    tmp: Path
    python: str = sys.executable


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    what: str
    command: str
    kind: str  # data | seed-count | statistical | speed
    rule: str
    fast: bool
    minutes: float
    measure: Callable[[Context], dict]
    compare: Callable[[dict, dict], tuple[bool, str]]
    show: Callable[[dict], str]
    data_commit: str = ""
    """Data claims: the commit that added the data (measured on the code just before it);
    recorded instead of the commit that recomputed the table."""
    reruns: tuple[str, ...] = ()
    """Rerun claims: the data claims whose recorded values (merged) the rerun is compared
    with; a rerun records nothing of its own."""


def recorded_for(claim: Claim, record: dict) -> dict | None:
    """What `claim` is compared with: its own record, or for a rerun the merged records of
    the data claims it reruns (None while any of them is unrecorded)."""
    if not claim.reruns:
        return record.get(claim.id)
    entries = [record.get(i) for i in claim.reruns]
    if any(e is None for e in entries):
        return None
    return {"value": {k: v for e in entries for k, v in e["value"].items()},
            "commit": ", ".join(dict.fromkeys(e["commit"] for e in entries))}


def load_record(path: Path = RECORD) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _dump(obj, indent: str = "") -> str:
    """JSON with one line per list of scalars (a table row, a list of returns)."""
    inner = indent + " "
    if isinstance(obj, dict) and obj:
        items = [f"{inner}{json.dumps(k)}: {_dump(v, inner)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, list) and any(isinstance(x, (dict, list)) for x in obj):
        return "[\n" + ",\n".join(inner + _dump(x, inner) for x in obj) + "\n" + indent + "]"
    return json.dumps(obj, ensure_ascii=False)


def save_record(record: dict, path: Path = RECORD) -> None:
    path.write_text(_dump(record) + "\n")

"""Write the result tables of README.md and of the documentation (docs/**/*.md) from the
recorded claims (experiments/results/claims.json).

Each generated table sits between `<!-- claims:BLOCK -->` and `<!-- /claims:BLOCK -->`, in
whichever of those files holds the markers (a block may move between files with its text);
everything outside the markers is hand-written prose. Edit claims.json (through
`python -m experiments.check_claims --record`), never the tables. The blocks themselves are
`blocks.BLOCKS`.

    python -m experiments.render_readme           # rewrite the blocks wherever they are
    python -m experiments.render_readme --check   # exit 1 if a block is out of date or missing
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from experiments.claims.blocks import BLOCKS
from experiments.claims.record import README, REPO, load_record


def documents() -> list[Path]:
    """The files that may hold generated blocks: README.md and every page under docs/."""
    return [README, *sorted((REPO / "docs").rglob("*.md"))]




def pattern(block: str) -> re.Pattern:
    return re.compile(rf"(<!-- claims:{re.escape(block)} -->\n)(.*?)(\n<!-- /claims:"
                      rf"{re.escape(block)} -->)", re.S)


def render(text: str, record: dict) -> tuple[str, list[str]]:
    """`text` (a README or docs page) with every block it holds rewritten; and the blocks
    whose markers it does not hold."""
    missing = []
    for block, fn in BLOCKS.items():
        pat = pattern(block)
        if not pat.search(text):
            missing.append(block)
            continue
        body = fn(record)
        text = pat.sub(lambda m, body=body: m.group(1) + body + m.group(3), text)
    return text, missing


def out_of_sync(record: dict, paths: list[Path] | None = None) -> list[str]:
    """Blocks that differ from what the record gives, named with their file when it is not
    README.md, and blocks whose markers are in none of `paths` (default: `documents()`)."""
    texts = {path: path.read_text() for path in (documents() if paths is None else paths)}
    problems = []
    for block, fn in BLOCKS.items():
        found = False
        for path, text in texts.items():
            for match in pattern(block).finditer(text):
                found = True
                shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                where = "" if path == README else f" in {shown}"
                try:
                    if match.group(2) != fn(record):
                        problems.append(block + where)
                except KeyError as error:
                    problems.append(f"{block}{where} (no record for {error})")
        if not found:
            problems.append(f"{block} (no markers)")
    return problems


def render_all(record: dict, paths: list[Path] | None = None) -> list[str]:
    """Rewrite the blocks in every file that holds them; the blocks found in none."""
    seen = set()
    for path in documents() if paths is None else paths:
        text = path.read_text()
        new, missing = render(text, record)
        seen |= set(BLOCKS) - set(missing)
        if new != text:
            path.write_text(new)
    return [block for block in BLOCKS if block not in seen]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a block is stale or lost")
    args = parser.parse_args(argv)
    record = load_record()
    if args.check:
        problems = out_of_sync(record)
        print("generated tables in sync" if not problems else
              f"generated tables out of sync: {problems}")
        return 1 if problems else 0
    missing = render_all(record)
    print(f"README.md and docs/ rendered; blocks without markers: {missing or 'none'}")
    return 0

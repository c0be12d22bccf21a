"""Write the repository's address into the notebooks, from pyproject.toml.

The address is set in one place, `[project.urls] Repository` in pyproject.toml. Each
notebook under notebooks/ reads it twice: its install cell (the first code cell) installs
`git+<Repository>` in Colab, and its first markdown cell opens with an "Open in Colab"
badge for that notebook in that repository.

    python -m experiments.notebook_urls           # rewrite the notebooks that disagree
    python -m experiments.notebook_urls --check   # exit 1 if a notebook disagrees

Only those two lines of a notebook change; outputs are never touched.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO_ROOT / "notebooks"
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
INSTALL = re.compile(r'^REPO = "git\+[^"]*".*$', re.M)
BADGE_LINE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\n\n?", re.M)
OLD_HINT = "Replace OWNER with the owner of the jaxvaco repository."
HINT = "Its address: pyproject.toml, via experiments/notebook_urls.py."


def repository(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    """`[project.urls] Repository`, without a trailing slash."""
    return tomllib.loads(pyproject.read_text())["project"]["urls"]["Repository"].rstrip("/")


def colab_url(repo: str, notebook: Path) -> str:
    """Colab's address for `notebook` (a file under notebooks/) on the default branch."""
    match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?", repo)
    if match is None:
        raise ValueError(f"Repository {repo!r} is not a https://github.com/OWNER/NAME address")
    owner, name = match.groups()
    return f"https://colab.research.google.com/github/{owner}/{name}/blob/main/notebooks/" \
           f"{notebook.name}"


def source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def set_source(cell: dict, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)


def rewritten(path: Path, repo: str) -> str:
    """The notebook's file text with the repository's address in its install cell and
    badge."""
    notebook = json.loads(path.read_text())
    cells = notebook["cells"]
    install = next(c for c in cells if c["cell_type"] == "code")
    text = source(install)
    if not INSTALL.search(text):
        raise ValueError(f"{path.name}: no `REPO = \"git+...\"` line in the install cell")
    text = INSTALL.sub(f'REPO = "git+{repo}"', text).replace(OLD_HINT, HINT)
    set_source(install, text)
    first = next(c for c in cells if c["cell_type"] == "markdown")
    badge = f"[![Open In Colab]({BADGE})]({colab_url(repo, path)})\n\n"
    set_source(first, badge + BADGE_LINE.sub("", source(first), count=1))
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def out_of_date(notebooks: list[Path] | None = None) -> list[str]:
    """The notebooks whose address or badge disagrees with pyproject.toml."""
    repo = repository()
    paths = sorted(NOTEBOOKS.glob("*.ipynb")) if notebooks is None else notebooks
    return [p.name for p in paths if rewritten(p, repo) != p.read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook disagrees")
    args = parser.parse_args(argv)
    stale = out_of_date()
    if args.check:
        print("notebooks agree with pyproject.toml" if not stale else
              f"notebooks out of date: {stale} (run python -m experiments.notebook_urls)")
        return 1 if stale else 0
    repo = repository()
    for name in stale:
        path = NOTEBOOKS / name
        path.write_text(rewritten(path, repo))
    print(f"rewritten: {stale or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

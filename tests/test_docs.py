"""The front door and the documentation site: the README stays short and its relative links
resolve, the site builds with warnings as errors, and the notebooks read the repository's
address from pyproject.toml.

The site is built by `mkdocs build --strict` (mkdocs.yml, pages under docs/, the API
reference from the docstrings); it takes a few seconds.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    """The targets of a Markdown text's links and images that point at a file: no URL,
    no bare anchor; the anchor of a file link is dropped."""
    targets = [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:|^#", t)]
    return [t.split("#")[0] for t in targets]


def test_readme_is_a_short_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; results belong in docs/"
    first = next(i for i, line in enumerate(lines) if line.startswith("python3 -m venv"))
    assert first < 40, f"the first command is on line {first + 1}"


def test_readme_relative_links_resolve():
    missing = [t for t in relative_links(README.read_text()) if not (REPO / t).exists()]
    assert missing == []


def test_docs_links_that_leave_docs_resolve():
    """Links from a page to a repository file outside docs/ (a figure, a CSV, a notebook):
    the site turns them into copies or repository links, so mkdocs cannot check them."""
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    missing = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        src = page.relative_to(REPO / "docs").as_posix()
        for target in LINK.findall(page.read_text()):
            path = hooks.outside_docs(src, target)
            if path is not None and not (REPO / path.split("#")[0]).exists():
                missing.append(f"{src}: {target}")
    assert missing == []


def test_site_builds_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "results" / "fair-study" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "runner" / "index.html").is_file()


def test_notebooks_read_the_repository_url_from_pyproject():
    from experiments import notebook_urls

    repo = notebook_urls.repository()
    assert repo.startswith("https://github.com/")
    assert notebook_urls.out_of_date() == [], \
        "run `python -m experiments.notebook_urls` after changing [project.urls]"
    for path in sorted(notebook_urls.NOTEBOOKS.glob("*.ipynb")):
        text = path.read_text()
        assert "OWNER" not in text, path.name
        assert f"git+{repo}" in text and notebook_urls.colab_url(repo, path) in text, path.name


def test_experiments_index_names_every_results_folder_and_its_command():
    """docs/results/experiments.md: a row for every folder (and file) of experiments/results/,
    each row's folder there unless in progress, its command naming scripts and specs that
    exist."""
    from experiments.markdown import table_rows

    results = REPO / "experiments" / "results"
    text = (REPO / "docs" / "results" / "experiments.md").read_text()
    block = text.split("<!-- experiments-index -->")[1].split("<!-- /experiments-index -->")[0]
    header, *rows = table_rows(block)
    assert header == ["folder", "what it holds", "command", "status", "page"]
    entries = {row[0].strip("`").rstrip("/"): row for row in rows}
    on_disk = {p.name for p in results.iterdir() if p.name != "README.md"}
    assert sorted(on_disk - set(entries)) == [], "add a row to docs/results/experiments.md"
    for name, (_, _, command, status, _) in entries.items():
        assert status in ("current", "history", "in progress"), name
        assert name in on_disk or status == "in progress", f"{name}: no such folder"
        paths = re.findall(r"(?:experiments|docs)/[\w/]+\.(?:py|sh|toml)", command)
        modules = [f"experiments/{m}.py" for m in re.findall(r"-m experiments\.(\w+)", command)]
        assert paths + modules, f"{name}: the command names no script"
        assert [p for p in paths + modules if not (REPO / p).exists()] == [], name

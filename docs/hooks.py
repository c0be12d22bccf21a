"""MkDocs hooks (mkdocs.yml `hooks:`): what lets the pages under docs/ read well both on
GitHub and on the built site.

- The repository URL is read from pyproject.toml's `[project.urls]` (the one place it is
  set), for the site's header link and for the links below.
- A relative link that leaves docs/ (a results figure, a CSV, a notebook) resolves on
  GitHub as it is written. On the site, an image is copied in (under `_repo/`) and any
  other file becomes a link to it in the repository.
- The generated tables fold their longer parts into `<details>` blocks; Markdown inside
  them is rendered (`md_in_html`).
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parent.parent
IMAGES = (".png", ".svg", ".jpg", ".jpeg", ".gif")
LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")


def repository_url() -> str:
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    return urls["Repository"].rstrip("/")


def outside_docs(src_uri: str, target: str) -> str | None:
    """The repository path a relative link of page `src_uri` points to when it leaves
    docs/; None for a link that stays inside (or is absolute, or an anchor)."""
    if re.match(r"^[a-z]+:|^/|^#", target):
        return None
    path = target.split("#")[0]
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(src_uri), path))
    if not resolved.startswith("../"):
        return None
    return posixpath.normpath(posixpath.join("docs", resolved))


def on_config(config):
    config.repo_url = repository_url()
    config.repo_name = "/".join(config.repo_url.split("/")[-2:])
    config.edit_uri = "edit/main/docs/"
    return config


def on_files(files, config):
    """Add every image that a page links to outside docs/ as a file of the site."""
    docs = Path(config.docs_dir)
    added = set()
    for page in files.documentation_pages():
        text = (docs / page.src_uri).read_text()
        for _, target, _ in LINK.findall(text):
            path = outside_docs(page.src_uri, target)
            if path and path.lower().endswith(IMAGES) and path not in added \
                    and (REPO / path).is_file():
                added.add(path)
                files.append(File.generated(config, f"_repo/{path}",
                                            abs_src_path=str(REPO / path)))
    return files


def on_page_markdown(markdown, page, config, files):
    src = page.file.src_uri

    def relink(match: re.Match) -> str:
        start, target, end = match.groups()
        path = outside_docs(src, target)
        if path is None:
            return match.group(0)
        if path.lower().endswith(IMAGES):
            new = posixpath.relpath(f"_repo/{path}", posixpath.dirname(src) or ".")
        else:
            anchor = "#" + target.split("#", 1)[1] if "#" in target else ""
            new = f"{config.repo_url}/blob/main/{path}{anchor}"
        return start + new + end

    markdown = LINK.sub(relink, markdown)
    return markdown.replace("<details>\n", '<details markdown="1">\n')

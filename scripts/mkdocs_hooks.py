"""mkdocs hooks (mkdocs.yml `hooks:`): the docs link to repository files outside docs/ (`../bench/RESULTS.md`,
`../config/example.yaml`) as relative paths, which work when reading them on a forge or in a checkout. mkdocs
knows only docs/, so it would call every such link broken. Here each one is checked (a missing file is a
warning, which `mkdocs build --strict` turns into a failure), added to the site as a plain file under `_repo/`
(a Markdown file as `<name>.md.txt`, so it is shipped as text rather than rendered as a page outside the nav),
and the link pointed at it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import File, Files

log = get_plugin_logger(__name__)
LINK = re.compile(r"\]\((\.\./[^)#\s]+)(#[^)\s]*)?\)")


def _site_uri(rel: str) -> str:
    return f"_repo/{rel}.txt" if rel.endswith(".md") else f"_repo/{rel}"


def _targets(docs: Path, page: Path, markdown: str) -> list[tuple[str, Path]]:
    return [(m.group(1), (page.parent / m.group(1)).resolve()) for m in LINK.finditer(markdown)]


def on_files(files: Files, config: Any) -> Files:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    added: set[str] = set()
    for page in sorted(docs.rglob("*.md")):
        for _, target in _targets(docs, page, page.read_text(encoding="utf-8")):
            if not target.is_file() or not target.is_relative_to(root) or target.is_relative_to(docs):
                continue  # reported by on_page_markdown
            rel = target.relative_to(root).as_posix()
            if rel not in added:
                added.add(rel)
                files.append(File.generated(config, _site_uri(rel), abs_src_path=str(target)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    here = docs / page.file.src_uri
    up = "../" * page.file.src_uri.count("/")

    def repoint(match: re.Match[str]) -> str:
        target = (here.parent / match.group(1)).resolve()
        if not target.is_file() or not target.is_relative_to(root) or target.is_relative_to(docs):
            log.warning("%s links to %s, which is not a file of the repository", page.file.src_uri, match[1])
            return match.group(0)
        anchor = match.group(2) or ""
        return f"]({up}{_site_uri(target.relative_to(root).as_posix())}{anchor})"

    return LINK.sub(repoint, markdown)

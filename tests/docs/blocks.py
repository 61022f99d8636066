"""The docs as the tests read them: the Markdown files, their fenced blocks with the HTML comment marker
before each (`<!-- fragment -->`, `<!-- runnable -->`, `<!-- file: PATH -->`; docs/writing-docs.md), their
links and their headings' anchors (as mkdocs makes them)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(`{3,})(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*([a-z-]+)(?::\s*(\S+))?\s*-->$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files() -> list[Path]:
    """The README, the CHANGELOG and every page of docs/."""
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    marker: str | None  # fragment | runnable | file | quick-start | ...
    argument: str | None  # what follows the marker's colon

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> Iterator[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang, start = opening.group(1), opening.group(2), i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i])
            i += 1
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(before)
        yield Block(
            path,
            start + 1,
            lang,
            "\n".join(body) + "\n",
            marker.group(1) if marker else None,
            marker.group(2) if marker else None,
        )
        i += 1


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """The lines outside fenced blocks, numbered from 1."""
    fence = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            yield number, line


def slug(heading: str) -> str:
    """Python-Markdown's toc slug (mkdocs' anchors): inline code marks and links dropped, lower case,
    anything but word characters, spaces and hyphens removed, runs of spaces and hyphens made one hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for _, line in prose(path):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            name, n = base, 0
            while name in found:  # a repeated heading gets _1, _2 (as toc does)
                n += 1
                name = f"{base}_{n}"
            found.add(name)
    return found


def links(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in prose(path):
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            yield number, match.group(1)

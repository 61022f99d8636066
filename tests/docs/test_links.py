"""Every relative link in the README, the CHANGELOG and docs/ names a file of the repository and, for a
Markdown file, one of its headings (`#anchor` as mkdocs makes it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs.blocks import ROOT, anchors, links, markdown_files, slug


def broken(path: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for line, target in links(path):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{line}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: {dest.name} has no heading with the anchor #{anchor}")
    return problems


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_anchor_resolves(path: Path) -> None:
    assert broken(path) == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## The `peer_port` setting\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#the-peer_port-setting) [gone](missing.md) [bad](other.md#nowhere)\n"
        "[self](#page) [no](#elsewhere)\n```sh\n[not a link](inside-a-fence.md)\n```\n"
    )
    assert broken(page, tmp_path) == [
        "page.md:3: missing.md: no such file",
        "page.md:3: other.md#nowhere: other.md has no heading with the anchor #nowhere",
        "page.md:4: #elsewhere: page.md has no heading with the anchor #elsewhere",
    ]


def test_slugs_are_the_ones_mkdocs_makes() -> None:
    assert slug("Keys and rotation") == "keys-and-rotation"
    assert slug("The mirror's GET stream") == "the-mirrors-get-stream"
    assert slug("upstreams[].auth") == "upstreamsauth"
    assert slug("Balancers: settings that make drain and rotation invisible") == (
        "balancers-settings-that-make-drain-and-rotation-invisible"
    )

"""The docs site builds with `mkdocs build --strict` (mkdocs.yml): a broken link or anchor, a link out of
docs/ to a file that does not exist, or a page left out of the nav fails the build, and so this test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from docs.blocks import ROOT

SETUP_HINT = "mkdocs is in the docs extra: run scripts/setup-venv.sh (pip install -e '.[docs]')"


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        pytest.fail(SETUP_HINT, pytrace=False)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    run = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "site" / "configuration" / "index.html").exists()
    assert (tmp_path / "site" / "_repo" / "bench" / "RESULTS.md.txt").exists()  # linked from performance


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if f": {p}\n" not in nav] == []


def test_a_broken_link_or_a_page_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    """The strict build is what catches them: the same mkdocs.yml on a copy of docs/ with one page linking to
    a missing page, and one page missing from the nav."""
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    (copy / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "mkdocs_hooks.py", copy / "scripts")
    for name in ("README.md", "CHANGELOG.md"):
        shutil.copy(ROOT / name, copy / name)
    for name in ("bench", "config", "proxy"):
        (copy / name).symlink_to(ROOT / name)
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "docs" / "orphan.md").write_text("# Not in the nav\n")
    errors = copy / "docs" / "errors.md"
    errors.write_text(errors.read_text(encoding="utf-8") + "\n[gone](no-such-page.md)\n")
    run = build(copy / "mkdocs.yml", tmp_path / "site")
    assert run.returncode != 0
    assert "orphan.md" in run.stderr and "no-such-page.md" in run.stderr

"""Every YAML block in the README and docs/ is a configuration that `mrtr-proxy check-config` accepts: a
complete file as it stands, a fragment (`<!-- fragment -->`) merged onto its base (config/sidecar.yaml, or
the file named in `<!-- fragment: PATH -->`), and a copy of a shipped file (`<!-- file: PATH -->`) equal to
that file (docs/writing-docs.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from docs.blocks import ROOT, Block, blocks, markdown_files
from proxy.cli.main import main

DEFAULT_BASE = "config/sidecar.yaml"
YAML_BLOCKS = [b for path in markdown_files() for b in blocks(path) if b.lang in ("yaml", "yml")]


def merged(base: Mapping[str, Any], fragment: Mapping[str, Any]) -> dict[str, Any]:
    """The fragment over its base: mappings merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in fragment.items():
        old = out.get(key)
        out[key] = merged(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return out


def without_leading_comments(text: str) -> str:
    lines = text.splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)


def configuration(block: Block, tmp_path: Path) -> Path:
    """The file check-config is run on for this block."""
    if block.marker == "file":
        assert block.argument, f"{block.where()}: <!-- file: PATH --> names no file"
        shipped = ROOT / block.argument
        assert block.text == without_leading_comments(shipped.read_text(encoding="utf-8")), (
            f"{block.where()} is not the content of {block.argument}"
        )
        return shipped
    if block.marker == "fragment":
        base = yaml.safe_load((ROOT / (block.argument or DEFAULT_BASE)).read_text(encoding="utf-8"))
        text = yaml.safe_dump(merged(base, yaml.safe_load(block.text)), sort_keys=False)
    else:
        assert block.marker is None, f"{block.where()}: a YAML block takes no <!-- {block.marker} --> marker"
        text = block.text
    out = tmp_path / "config" / "block.yaml"  # relative paths of a base resolve as they would in config/
    out.parent.mkdir()
    out.write_text(text, encoding="utf-8")
    return out


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[b.where() for b in YAML_BLOCKS])
def test_every_yaml_block_passes_check_config(
    block: Block, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = configuration(block, tmp_path)
    assert main(["check-config", str(path)]) == 0, f"{block.where()}:\n{capsys.readouterr().err}"


def test_there_are_blocks_of_each_kind() -> None:
    kinds = {b.marker for b in YAML_BLOCKS}
    assert {None, "fragment", "file"} <= kinds


def test_a_block_check_config_refuses_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's old route block, as pasted: validate mode with no public URL to take the audience from."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- fragment -->\n```yaml\nroutes:\n  - name: fleet\n    upstreams: [default]\n"
        "    auth: {mode: validate, jwks_url: 'https://idp.example/jwks',"
        " authorization_servers: ['https://idp.example']}\n```\n"
    )
    (block,) = blocks(page)
    assert main(["check-config", str(configuration(block, tmp_path))]) == 2
    assert "public_url" in capsys.readouterr().err

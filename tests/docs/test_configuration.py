"""One source per setting: docs/configuration.md is what scripts/gen_config_docs.py makes of
proxy/config.schema.json (stale: this fails), every setting in the schema has a description and an example
the schema itself accepts, and the shipped files pass check-config."""

from __future__ import annotations

import copy
import runpy
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from docs.blocks import ROOT
from proxy.cli.main import main
from proxy.config.schema import load_schema

GENERATOR = ROOT / "scripts" / "gen_config_docs.py"


def settings(schema: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every leaf of the schema (a key whose value is not a section of further keys), by dotted path."""

    def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in node and "properties" not in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        return node

    def walk(node: Mapping[str, Any], path: str, seen: frozenset[str]) -> Iterator[tuple[str, Any]]:
        for key, sub in node.get("properties", {}).items():
            ref = sub.get("$ref")
            if ref in seen:
                continue  # a shared definition (auth, tools) is checked where it first appears
            inner = resolve(sub)
            items = inner.get("items")
            if "properties" in inner:
                yield from walk(inner, f"{path}{key}.", seen | {ref} if ref else seen)
            elif isinstance(items, Mapping) and "properties" in resolve(items):
                yield from walk(resolve(items), f"{path}{key}[].", seen)
            else:
                yield f"{path}{key}", sub

    yield from walk(schema, "", frozenset())


def test_the_generated_reference_is_current() -> None:
    run = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, check=False, timeout=60
    )
    assert run.returncode == 0, run.stderr


def test_a_stale_reference_is_found(tmp_path: Path) -> None:
    generator = runpy.run_path(str(GENERATOR))
    schema = copy.deepcopy(dict(load_schema()))
    schema["properties"]["listen"]["properties"]["port"]["description"] = "A changed description."
    assert "A changed description." in generator["render"](schema)
    assert generator["render"](schema) != (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


def test_every_setting_has_a_description_and_an_example_the_schema_accepts() -> None:
    schema = load_schema()
    found = dict(settings(schema))
    assert len(found) > 100  # every key, not a few
    for path, node in found.items():
        assert node.get("description"), f"{path} has no description"
        assert node.get("examples"), f"{path} has no example"
        validator = Draft202012Validator({**node, "$defs": schema["$defs"]})
        for example in node["examples"]:
            assert not list(validator.iter_errors(example)), f"{path}: its example {example!r} is invalid"
    for path in ("listen.port", "upstreams[].auth.jwks_url", "routes[].tools.deny", "calls.tasks.policy"):
        assert path in found
        assert f"### {path}\n" in (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["example.yaml", "fleet.yaml", "sidecar.yaml"])
def test_the_shipped_configuration_files_pass_check_config(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-config", str(ROOT / "config" / name)]) == 0, capsys.readouterr().err

"""The Dockerfile the chart's image is built from: hadolint finds nothing, and what the chart relies on
(uid, entry point, ports, no writes at run time) is there. No Docker engine runs in CI, so the image
itself is not built here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib

import pytest
import yaml

from .chart import CHART, ROOT, template

DOCKERFILE = ROOT / "Dockerfile"
HADOLINT = ROOT / ".peers/hadolint/hadolint"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def test_hadolint_finds_nothing() -> None:
    if not os.access(HADOLINT, os.X_OK):
        pytest.fail(f"hadolint is not installed at {HADOLINT}: run scripts/setup-helm.sh", pytrace=False)
    argv = [str(HADOLINT), "--no-color", str(DOCKERFILE)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_multi_stage_on_python_3_11_slim() -> None:
    steps = instructions()
    arg = next(rest for word, rest in steps if word == "ARG" and rest.startswith("PYTHON_IMAGE="))
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim(-\w+)?", arg)
    froms = [rest for word, rest in steps if word == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]
    # the final stage copies only the venv from the build stage: no compiler, no source tree
    copies = [rest for word, rest in final_stage() if word == "COPY"]
    assert copies == ["--from=build /opt/mrtr-proxy /opt/mrtr-proxy"]


def test_runs_as_the_non_root_uid_the_chart_expects() -> None:
    users = [rest for word, rest in final_stage() if word == "USER"]
    assert users == ["10001:10001"]  # numeric, so runAsNonRoot can verify it
    pod = template(CHART / "ci/minimal-values.yaml")
    assert pod.container["securityContext"]["runAsUser"] == 10001
    assert pod.container["securityContext"]["runAsGroup"] == 10001


def test_entry_point_command_ports_and_no_bytecode_writes() -> None:
    stage = final_stage()
    assert [json.loads(rest) for word, rest in stage if word == "ENTRYPOINT"] == [["mrtr-proxy"]]
    assert [json.loads(rest) for word, rest in stage if word == "CMD"] == [
        ["serve", "--config", "/etc/mrtr-proxy/config.yaml"]
    ]
    assert [rest.split() for word, rest in stage if word == "EXPOSE"] == [["8080", "8081"]]
    env = " ".join(rest for word, rest in stage if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "/opt/mrtr-proxy/bin" in env  # mrtr-proxy on PATH
    # pip compiles bytecode at build time (no --no-compile), so nothing is compiled at run time either
    assert "--no-compile" not in DOCKERFILE.read_text()


def test_console_script_is_the_entry_point_name() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["mrtr-proxy"] == "proxy.cli.main:main"
    assert project["requires-python"] == ">=3.11"  # the image's Python


def test_build_context_holds_what_pip_install_needs_and_nothing_else() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*"
    assert {p for p in patterns if p.startswith("!")} == {"!pyproject.toml", "!README.md", "!proxy/"}
    copied = {rest.split()[0] for word, rest in instructions() if word == "COPY" and "--from" not in rest}
    assert copied == {"pyproject.toml", "proxy"}  # README.md comes with pyproject.toml in one COPY
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["readme"] == "README.md"
    for data in pyproject["tool"]["setuptools"]["package-data"]["proxy"]:
        assert any(path.is_file() for path in (ROOT / "proxy").glob(data)), data


def test_chart_runs_the_image_with_the_charts_config_path() -> None:
    r = template(CHART / "ci/minimal-values.yaml")
    assert r.container["args"] == ["serve", "--config", "/etc/mrtr-proxy/config/config.yaml"]
    assert "command" not in r.container  # the image's ENTRYPOINT (mrtr-proxy) is kept
    mounts = {m["mountPath"]: m["name"] for m in r.container["volumeMounts"]}
    volume = next(v for v in r.pod["volumes"] if v["name"] == mounts["/etc/mrtr-proxy/config"])
    assert volume["configMap"]["name"] == r.one("ConfigMap")["metadata"]["name"]
    assert yaml.safe_load(r.config_text)["listen"]["port"] == 8080  # EXPOSEd by the image


def test_the_sidecar_example_does_not_point_the_proxy_at_its_own_container() -> None:
    """Issue 20: config/sidecar.yaml's upstream is 127.0.0.1:8000; the proxy's `docker run` must share the
    legacy server's network namespace (or name the server), not publish a port of a container of its own."""
    comment = "\n".join(line for line in DOCKERFILE.read_text().splitlines() if line.startswith("#"))
    run = re.search(r"docker run --rm (.*?)mrtr-proxy:0\.1\.0", comment.replace("\\\n#", " "), re.S)
    assert run, comment
    assert "--network container:legacy" in run.group(1)
    assert "-p " not in run.group(1)
    assert "docker run -d --name legacy -p 8080:8080" in comment
    sidecar = yaml.safe_load((ROOT / "config" / "sidecar.yaml").read_text())
    assert sidecar["upstreams"][0]["url"] == "http://127.0.0.1:8000/mcp"
    assert sidecar["listen"] == {"host": "0.0.0.0", "port": 8080}

"""Runs the real helm CLI on helm/mrtr-proxy: lint, template, install --dry-run=client (for NOTES.txt).

scripts/setup-helm.sh installs the official helm 4 and helm 3 binaries into .peers/helm/; the tests FAIL
(they are not skipped) when they are missing, like the MCP peers. Helm's own files (cache, config, plugins,
repositories) go to a temporary directory, so a user's helm setup neither leaks in nor gets touched.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "mrtr-proxy"
SCENARIOS = sorted(CHART.glob("ci/*-values.yaml"))
HELMS = {"helm4": ROOT / ".peers/helm/v4/helm", "helm3": ROOT / ".peers/helm/v3/helm"}
SETUP_HINT = "run scripts/setup-helm.sh (installs helm 4 and helm 3 into .peers/helm/)"
RELEASE = "r"
NAMESPACE = "mcp"

_HELM_HOME = Path(tempfile.mkdtemp(prefix="mrtr-helm-home-"))
atexit.register(shutil.rmtree, _HELM_HOME, ignore_errors=True)
# A kubeconfig whose only cluster is a closed port: nothing here may reach a real cluster or a local service.
_KUBECONFIG = _HELM_HOME / "kubeconfig"
_KUBECONFIG.write_text(
    "apiVersion: v1\nkind: Config\ncurrent-context: none\n"
    "clusters: [{name: none, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "contexts: [{name: none, context: {cluster: none, user: none}}]\n"
    "users: [{name: none, user: {}}]\n"
)


def helm_bin(name: str = "helm4") -> Path:
    path = HELMS[name]
    if not os.access(path, os.X_OK):
        pytest.fail(f"{name} is not installed at {path}: {SETUP_HINT}", pytrace=False)
    return path


def run_helm(*args: str, helm: str = "helm4") -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(_HELM_HOME),
        "HELM_CACHE_HOME": str(_HELM_HOME / "cache"),
        "HELM_CONFIG_HOME": str(_HELM_HOME / "config"),
        "HELM_DATA_HOME": str(_HELM_HOME / "data"),
        "KUBECONFIG": str(_KUBECONFIG),
    }
    return subprocess.run(
        [str(helm_bin(helm)), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def _value_args(values: tuple[Path, ...], sets: tuple[str, ...]) -> list[str]:
    args: list[str] = []
    for path in values:
        args += ["-f", str(path)]
    for item in sets:
        args += ["--set", item]
    return args


@dataclass(frozen=True)
class Rendered:
    """The objects one `helm template` produced, with lookups by kind and name."""

    objects: tuple[dict[str, Any], ...]

    def kinds(self) -> list[str]:
        return sorted(o["kind"] for o in self.objects)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [o for o in self.all(kind) if name is None or o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}: {self.kinds()}"
        return found[0]

    def maybe(self, kind: str) -> dict[str, Any] | None:
        found = self.all(kind)
        return found[0] if found else None

    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def pod(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.deployment["spec"]["template"]["spec"]
        return spec

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.pod["containers"]
        c: dict[str, Any] = container
        return c

    @property
    def annotations(self) -> Mapping[str, str]:
        a: Mapping[str, str] = self.deployment["spec"]["template"]["metadata"]["annotations"]
        return a

    @property
    def config_text(self) -> str:
        (config_map,) = [o for o in self.all("ConfigMap") if "config.yaml" in o.get("data", {})]
        text: str = config_map["data"]["config.yaml"]
        return text

    @property
    def config(self) -> dict[str, Any]:
        c: dict[str, Any] = yaml.safe_load(self.config_text)
        return c


@functools.cache
def _template(helm: str, values: tuple[Path, ...], sets: tuple[str, ...]) -> Rendered:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, *_value_args(values, sets)]
    result = run_helm(*args, helm=helm)
    assert result.returncode == 0, f"helm {' '.join(args)} failed:\n{result.stderr}"
    return Rendered(tuple(o for o in yaml.safe_load_all(result.stdout) if o))


def template(*values: Path, sets: tuple[str, ...] = (), helm: str = "helm4") -> Rendered:
    return _template(helm, tuple(values), tuple(sets))


def template_error(*values: Path, sets: tuple[str, ...] = (), helm: str = "helm4") -> str:
    """The error of a `helm template` that must fail."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, *_value_args(values, sets)]
    result = run_helm(*args, helm=helm)
    assert result.returncode != 0, f"helm {' '.join(args)} succeeded, expected a failure"
    return result.stderr


def notes(*values: Path, helm: str = "helm4") -> str:
    """NOTES.txt as `helm install --dry-run=client` renders it. Helm 4 only: helm 3.18 asks the cluster
    for its version even then."""
    args = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    result = run_helm(*args, *_value_args(tuple(values), ()), helm=helm)
    assert result.returncode == 0, result.stderr
    _, sep, text = result.stdout.partition("\nNOTES:\n")
    assert sep, "no NOTES in the dry-run output"
    return text


def scenario_values(path: Path) -> dict[str, Any]:
    """The chart's values.yaml with one ci/*-values.yaml scenario over it (maps merged key by key)."""

    def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(base)
        for key, value in over.items():
            out[key] = (
                merge(out[key], value)
                if isinstance(value, Mapping) and isinstance(out.get(key), dict)
                else value
            )
        return out

    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    return merge(defaults, yaml.safe_load(path.read_text()) or {})

"""The chart's optional NetworkPolicy (the peer port for the release's pods only, the main port open, the
admin port for `networkPolicy.adminFrom` only), `service.sessionAffinity` for sse/stdio legacy clients, and
the chart README agreeing with what renders (the replica address, the sidecar snippet, the values)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from .chart import CHART, HELMS, NAMESPACE, RELEASE, SCENARIOS, notes, run_helm, template
from .chart import template_error as fails

CI = {p.name.removesuffix("-values.yaml"): p for p in SCENARIOS}
FULLNAME = f"{RELEASE}-mrtr-proxy"
POLICY = ("networkPolicy.enabled=true",)
ADMIN = ("admin.enabled=true", "admin.tokenSecret=mrtr-admin")
README = (CHART / "README.md").read_text()


def rules(r: Any) -> dict[int, list[dict[str, Any]] | None]:
    """The policy's ingress rules by port: the `from` list, or None when every source may connect."""
    policy = r.one("NetworkPolicy", FULLNAME)
    out: dict[int, list[dict[str, Any]] | None] = {}
    for rule in policy["spec"]["ingress"]:
        (port,) = rule["ports"]
        assert port["protocol"] == "TCP"
        out[port["port"]] = rule.get("from")
    return out


def test_off_by_default_and_nothing_sticky() -> None:
    for values in SCENARIOS:
        r = template(values)
        assert r.all("NetworkPolicy") == []
        for svc in r.all("Service"):
            assert "sessionAffinity" not in svc["spec"] and "sessionAffinityConfig" not in svc["spec"]


def test_the_peer_port_admits_only_the_releases_pods_and_the_main_port_is_open() -> None:
    r = template(CI["gateway"], sets=POLICY)
    policy = r.one("NetworkPolicy", FULLNAME)
    pods = r.deployment["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["podSelector"] == {"matchLabels": pods}
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress (upstreams, JWKS) untouched
    assert rules(r) == {8080: None, 8081: [{"podSelector": {"matchLabels": pods}}]}
    assert pods == {"app.kubernetes.io/name": "mrtr-proxy", "app.kubernetes.io/instance": RELEASE}
    container = {p["name"]: p["containerPort"] for p in r.container["ports"]}
    assert (container["http"], container["peer"]) == (8080, 8081)


def test_the_ports_follow_the_values() -> None:
    r = template(CI["minimal"], sets=(*POLICY, "peer.port=9091", "config.listen.port=9090"))
    pods = r.deployment["spec"]["selector"]["matchLabels"]
    assert rules(r) == {9090: None, 9091: [{"podSelector": {"matchLabels": pods}}]}


def test_the_admin_port_admits_only_admin_from() -> None:
    r = template(CI["gateway"], sets=(*POLICY, *ADMIN))
    monitoring = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert rules(r)[9100] == monitoring  # the documented default
    assert set(rules(r)) == {8080, 8081, 9100}


def test_admin_from_can_be_narrowed_or_emptied(tmp_path: Path) -> None:
    narrow = [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    values = tmp_path / "narrow.yaml"
    values.write_text(yaml.safe_dump({"networkPolicy": {"adminFrom": narrow}}))
    assert rules(template(CI["gateway"], values, sets=(*POLICY, *ADMIN)))[9100] == narrow
    closed = tmp_path / "closed.yaml"
    closed.write_text(yaml.safe_dump({"networkPolicy": {"adminFrom": []}}))
    assert set(rules(template(CI["gateway"], closed, sets=(*POLICY, *ADMIN)))) == {8080, 8081}  # nobody


def test_sidecar_mode_renders_no_policy() -> None:
    assert template(CI["sidecar"], sets=POLICY).all("NetworkPolicy") == []


@pytest.mark.parametrize("affinity", ["ClientIP"])
def test_session_affinity_sticks_client_addresses_to_a_pod(affinity: str) -> None:
    r = template(CI["gateway"], sets=(f"service.sessionAffinity={affinity}",))
    spec = r.one("Service", FULLNAME)["spec"]
    assert spec["sessionAffinity"] == "ClientIP"
    assert spec["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    peers_spec = r.one("Service", f"{FULLNAME}-peers")["spec"]
    assert "sessionAffinity" not in peers_spec  # the headless Service resolves pods, it does not balance
    r = template(
        CI["gateway"],
        sets=("service.sessionAffinity=ClientIP", "service.sessionAffinityTimeoutSeconds=600"),
    )
    assert r.one("Service", FULLNAME)["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] == 600
    none = template(CI["gateway"], sets=("service.sessionAffinity=None",)).one("Service", FULLNAME)["spec"]
    assert "sessionAffinity" not in none


@pytest.mark.parametrize(
    "bad",
    [
        "service.sessionAffinity=Cookie",
        "service.sessionAffinityTimeoutSeconds=0",
        "service.sessionAffinityTimeoutSeconds=90000",
        "networkPolicy.enabled=yes",
        "networkPolicy.bogus=1",
        "networkPolicy.adminFrom[0].namespace=monitoring",
    ],
)
def test_values_schema_rejects(bad: str) -> None:
    assert "schema" in fails(CI["minimal"], sets=(bad,)).lower()


EVERYTHING = (*POLICY, *ADMIN, "service.sessionAffinity=ClientIP", "metrics.serviceMonitor.enabled=false")


@pytest.mark.parametrize("helm", sorted(HELMS))
def test_lints_strict_and_renders_alike_with_helm_3_and_4(helm: str) -> None:
    args = [a for s in EVERYTHING for a in ("--set", s)]
    result = run_helm(
        "lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", str(CI["gateway"]), *args, helm=helm
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout
    mine, other = (
        template(CI["gateway"], sets=EVERYTHING, helm=helm),
        template(CI["gateway"], sets=EVERYTHING),
    )
    assert mine.all("NetworkPolicy") == other.all("NetworkPolicy")
    assert mine.all("Service") == other.all("Service")


@pytest.mark.parametrize("version", ["1.25.0", kubernetes_validate.latest_version()])
def test_the_policy_and_services_are_valid_kubernetes(version: str) -> None:
    r = template(CI["gateway"], sets=EVERYTHING)
    for obj in [*r.all("NetworkPolicy"), *r.all("Service")]:
        kubernetes_validate.validate(obj, version, strict=True)


# ---- the chart README says what renders ----------------------------------------------------------------


def test_readme_names_the_peer_port_in_the_replica_address() -> None:
    env = {e["name"]: e for e in template(CI["minimal"]).container["env"]}
    rendered = env["MRTR_PROXY_REPLICA_ADDRESS"]["value"]
    assert rendered == "$(POD_IP):8081"
    assert f'MRTR_PROXY_REPLICA_ADDRESS="{rendered}"' in README
    assert "the listen port, passed as" not in README  # the stale wording


def test_readme_sidecar_snippet_matches_notes() -> None:
    block = README.split("## Sidecar mode", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    (documented,) = yaml.safe_load(block)["spec"]["containers"][1:]
    text = notes(CI["sidecar"])
    begin, end = "# --- sidecar snippet: begin ---", "# --- sidecar snippet: end ---"
    (printed,) = yaml.safe_load(text.split(begin, 1)[1].split(end, 1)[0])["spec"]["containers"]
    for key in ("args", "ports", "env", "securityContext", "resources"):
        assert documented[key] == printed[key], key


def test_readme_values_table_lists_the_new_values() -> None:
    table = README.split("## Values", 1)[1]
    for value in (
        "service.sessionAffinity",
        "sessionAffinityTimeoutSeconds",
        "networkPolicy.enabled",
        "adminFrom",
    ):
        assert value in table, value
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert defaults["service"]["sessionAffinity"] == "None"
    assert defaults["service"]["sessionAffinityTimeoutSeconds"] == 10800
    assert re.search(r"`sessionAffinityTimeoutSeconds` \| `None` / `10800`", table)
    assert defaults["networkPolicy"] == {
        "enabled": False,
        "adminFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
    }

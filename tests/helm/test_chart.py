"""The Helm chart: every ci/*-values.yaml scenario lints with helm 4 and helm 3, and the objects it renders
hold what a deployment of the proxy relies on (probes, hardening, keys, peers, drain, scaling) — with the
rendered proxy config validated by the proxy's own loader, and booted for real."""

from __future__ import annotations

import asyncio
import base64
import re
import sys
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import yaml

from proxy.config import load_config
from proxy.handle import load_keys

from .chart import CHART, HELMS, NAMESPACE, RELEASE, SCENARIOS, notes, run_helm, scenario_values, template
from .chart import template_error as fails

CI = {p.name.removesuffix("-values.yaml"): p for p in SCENARIOS}
GATEWAYS = [p for p in SCENARIOS if scenario_values(p)["mode"] == "gateway"]
FULLNAME = f"{RELEASE}-mrtr-proxy"
POD_IP = "10.1.2.3"


def ids(paths: list[Path]) -> list[str]:
    return [p.name.removesuffix("-values.yaml") for p in paths]


def test_the_scenarios_exist() -> None:
    assert set(CI) == {"gateway", "sidecar", "minimal", "observability"}


# ---- lint -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("helm", sorted(HELMS))
@pytest.mark.parametrize("values", SCENARIOS, ids=ids(SCENARIOS))
def test_every_scenario_lints_strict(helm: str, values: Path) -> None:
    result = run_helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", str(values), helm=helm)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize("helm", sorted(HELMS))
def test_values_schema_needs_upstreams_in_gateway_mode(helm: str) -> None:
    result = run_helm("lint", str(CHART), helm=helm)  # the chart's defaults alone: no upstream
    assert result.returncode != 0
    assert "upstreams" in result.stdout + result.stderr


@pytest.mark.parametrize(
    "bad",
    [
        "mode=proxy",
        "config.listne.host=0.0.0.0",  # a typo in a config section is caught before the proxy starts
        "drain.graceSeconds=-1",
        "drain.terminationMarginSeconds=0",
        "peer.port=70000",
        "keys.mountPath=relative/keys",
        "image.digest=latest",
        "probes.readiness.periodSeconds=0",
        "replicaCount=-1",
    ],
)
def test_values_schema_rejects(bad: str) -> None:
    err = fails(CI["minimal"], sets=(bad,))
    assert "schema" in err.lower(), err


def test_config_sections_in_values_schema_match_the_proxy_schema() -> None:
    chart_schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    proxy_schema = yaml.safe_load((Path(__file__).parents[2] / "proxy/config.schema.json").read_text())
    assert set(chart_schema["properties"]["config"]["properties"]) == set(proxy_schema["properties"])


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("config.listen.host=127.0.0.1",), "loopback"),
        (("peer.port=8080",), "peer.port"),
        (("keys.generate=false",), "keys.existingSecret"),
        (("config.keys.dirs[0]=/somewhere/else",), "config.keys.dirs"),
        (("keys.rotation.next=k3",), "set keys.existingSecret too"),
        (("keys.existingSecret=s", "keys.rotation.next=k3"), "set keys.rotation.current"),
    ],
)
def test_the_chart_refuses_values_that_cannot_work(sets: tuple[str, ...], message: str) -> None:
    assert message in fails(CI["minimal"], sets=sets)


@pytest.mark.parametrize("helm", sorted(HELMS))
@pytest.mark.parametrize(
    ("member", "where"),
    [
        ("config.routes[0].upstreams[0]=serch", "config.routes.0.upstreams.0"),  # a name
        ("config.routes[0].upstreams[1].upstream=file", "config.routes.0.upstreams.1"),  # {upstream: ...}
    ],
)
def test_the_chart_refuses_a_route_naming_an_unknown_upstream(helm: str, member: str, where: str) -> None:
    """Issue 45 item 5: such a route rendered, and only the pod's start refused it. Now the render does,
    naming the route and the upstream, in one line. (helm lint cannot: its lint mode turns `fail` into a log
    line, for every refusal of this chart alike.)"""
    err = fails(CI["gateway"], sets=(member,), helm=helm)
    unknown = member.rpartition("=")[2]
    line = next(x for x in err.splitlines() if where in x)
    said = f'{where}: route "fleet" names upstream "{unknown}", which config.upstreams does not define'
    assert said in line
    assert "(it has: search, files, billing)" in line


def test_sidecar_refuses_the_upstream_port_as_listen_port() -> None:
    assert "sidecar.upstreamPort" in fails(CI["sidecar"], sets=("sidecar.upstreamPort=8080",))


def test_helm3_and_helm4_render_the_same_objects() -> None:
    for values in SCENARIOS:
        four, three = (template(values, helm=h) for h in ("helm4", "helm3"))
        strip = [o for o in four.objects if o["kind"] != "Secret"]
        assert strip == [o for o in three.objects if o["kind"] != "Secret"], values.name
        assert [o.get("metadata") for o in four.all("Secret")] == [
            o.get("metadata") for o in three.all("Secret")
        ]


# ---- what each scenario renders ------------------------------------------------------------------------


def test_gateway_renders_the_full_set() -> None:
    kinds = template(CI["gateway"]).kinds()
    assert kinds == sorted(
        [
            "ConfigMap",
            "Deployment",
            "HorizontalPodAutoscaler",
            "PodDisruptionBudget",
            "Service",
            "Service",
            "ServiceAccount",
        ]
    )  # no Secret: keys.existingSecret is used


def test_minimal_renders_a_generated_secret_and_no_hpa() -> None:
    kinds = template(CI["minimal"]).kinds()
    assert "Secret" in kinds and "HorizontalPodAutoscaler" not in kinds
    assert kinds.count("Service") == 2


def test_sidecar_renders_only_the_config_and_the_key_secret() -> None:
    assert template(CI["sidecar"]).kinds() == ["ConfigMap", "Secret"]


# ---- probes, hardening, drain ------------------------------------------------------------------------


@pytest.mark.parametrize("values", GATEWAYS, ids=ids(GATEWAYS))
def test_probes_are_separate_startup_liveness_and_readiness(values: Path) -> None:
    container = template(values).container
    paths = {p: container[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert paths == {"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"}
    # all three on the main port (named http), which is the port the rendered config listens on
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert {container[p]["httpGet"]["port"] for p in paths} == {"http"}
    assert ports["http"] == template(values).config["listen"]["port"]
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 30


@pytest.mark.parametrize("values", GATEWAYS, ids=ids(GATEWAYS))
def test_security_context_is_hardened(values: Path) -> None:
    r = template(values)
    sc = r.container["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["privileged"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["runAsUser"] == 10001  # the Dockerfile's user
    pod_sc = r.pod["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert r.pod["automountServiceAccountToken"] is False
    # the only writable place is a small /tmp
    (tmp,) = [v for v in r.pod["volumes"] if "emptyDir" in v]
    assert {m["mountPath"] for m in r.container["volumeMounts"] if m["name"] == tmp["name"]} == {"/tmp"}


@pytest.mark.parametrize("values", GATEWAYS, ids=ids(GATEWAYS))
def test_termination_grace_is_longer_than_the_drain_grace(values: Path) -> None:
    drain = scenario_values(values)["drain"]
    grace = template(values).pod["terminationGracePeriodSeconds"]
    assert grace > drain["graceSeconds"]
    assert grace == drain["graceSeconds"] + 15 == 45


def test_drain_grace_reaches_the_proxy_config_and_the_termination_grace(tmp_path: Path) -> None:
    r = template(CI["minimal"], sets=("drain.graceSeconds=120",))
    assert r.pod["terminationGracePeriodSeconds"] == 135
    cfg = tmp_path / "config.yaml"
    cfg.write_text(r.config_text)
    assert load_config(cfg, env={}).calls.drain_grace_s == 120


def test_drain_grace_has_one_knob() -> None:
    same = template(CI["minimal"], sets=("config.calls.drain_grace_s=30",))
    assert same.config["calls"]["drain_grace_s"] == 30
    assert "drain.graceSeconds" in fails(CI["minimal"], sets=("config.calls.drain_grace_s=300",))


# ---- keys ------------------------------------------------------------------------------------------------


def _keys_volume(r: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    mount = next(m for m in r.container["volumeMounts"] if m["mountPath"] == "/etc/mrtr-proxy/keys")
    volume = next(v for v in r.pod["volumes"] if v["name"] == mount["name"])
    return mount, volume


def test_existing_secret_is_mounted_at_the_keys_dir() -> None:
    r = template(CI["gateway"])
    mount, volume = _keys_volume(r)
    assert mount["readOnly"] is True
    assert volume["secret"]["secretName"] == "mrtr-proxy-keys"
    assert "items" not in volume["secret"]  # every key of the Secret, so new keys appear without a restart
    assert volume["secret"]["defaultMode"] == 0o440
    assert r.config["keys"]["dirs"] == ["/etc/mrtr-proxy/keys"]
    assert not r.all("Secret")


def test_existing_secret_items_order_the_key_files() -> None:
    r = template(
        CI["gateway"],
        sets=(
            "keys.existingSecretItems[0].key=k-2026-11",
            "keys.existingSecretItems[0].path=0-current",
            "keys.existingSecretItems[1].key=k-2026-08",
            "keys.existingSecretItems[1].path=1-previous",
        ),
    )
    _, volume = _keys_volume(r)
    assert volume["secret"]["items"] == [
        {"key": "k-2026-11", "path": "0-current"},
        {"key": "k-2026-08", "path": "1-previous"},
    ]


def test_staged_rotation_values_mount_the_roles_the_proxy_reads() -> None:
    """keys.rotation names the Secret's keys per role; the file names carry the role (handle/rotation.py)."""
    sets = ("keys.existingSecret=s", "keys.rotation.current=k2", "keys.rotation.previous=k1")
    r = template(CI["gateway"], sets=(*sets, "keys.rotation.next=k3", "keys.promoteAfterSeconds=90"))
    _, volume = _keys_volume(r)
    assert volume["secret"]["items"] == [
        {"key": "k2", "path": "0-current"},
        {"key": "k1", "path": "1-previous"},
        {"key": "k3", "path": "2-next"},
    ]
    assert r.config["keys"]["promote_after_s"] == 90
    assert "promote_after_s" not in template(CI["gateway"], sets=sets).config["keys"]


def test_gateway_replicas_compare_key_rings_through_the_headless_service() -> None:
    config = template(CI["gateway"]).config
    assert config["replica"]["peers"] == [f"{FULLNAME}-peers:8081"]
    assert config["replica"]["peer_port"] == 8081


@pytest.mark.parametrize("values", [CI["minimal"], CI["sidecar"]], ids=["minimal", "sidecar"])
def test_generated_secret_holds_one_32_byte_key_the_proxy_loads(values: Path, tmp_path: Path) -> None:
    secret = template(values).one("Secret", f"{FULLNAME}-keys")
    assert list(secret["data"]) == ["0-current"]
    key_text = base64.b64decode(secret["data"]["0-current"])
    assert len(base64.b64decode(key_text, validate=True)) == 32
    (tmp_path / "0-current").write_bytes(key_text)
    assert len(load_keys(dirs=[tmp_path])) == 1  # the proxy's own key parser accepts it
    if values == CI["minimal"]:
        _, volume = _keys_volume(template(values))
        assert volume["secret"]["secretName"] == secret["metadata"]["name"]


def test_generated_keys_differ_between_releases() -> None:
    one = template(CI["minimal"]).one("Secret")["data"]["0-current"]
    two = template(CI["minimal"], sets=("nameOverride=other",)).one("Secret")["data"]["0-current"]
    assert one != two


# ---- checksums -------------------------------------------------------------------------------------------


def test_checksums_are_stable_for_the_same_values() -> None:
    a = template(CI["minimal"]).annotations
    b = template(CI["minimal"], sets=("podLabels.x=y",)).annotations  # a second render, other pods
    assert re.fullmatch(r"[0-9a-f]{64}", a["checksum/config"])
    assert re.fullmatch(r"[0-9a-f]{64}", a["checksum/secret"])
    # the generated key is random per render, yet checksum/secret does not move (it hashes the reference)
    assert (a["checksum/config"], a["checksum/secret"]) == (b["checksum/config"], b["checksum/secret"])


def test_checksum_config_changes_with_the_config_only() -> None:
    base = template(CI["minimal"]).annotations
    changed = template(CI["minimal"], sets=("config.calls.parked_ttl_s=120",)).annotations
    assert changed["checksum/config"] != base["checksum/config"]
    assert changed["checksum/secret"] == base["checksum/secret"]


@pytest.mark.parametrize(
    "sets",
    [
        ("keys.existingSecret=other-keys",),
        (
            "keys.existingSecret=mrtr-proxy-keys",
            "keys.existingSecretItems[0].key=a",
            "keys.existingSecretItems[0].path=0-current",
        ),
    ],
)
def test_checksum_secret_changes_with_the_secret_values(sets: tuple[str, ...]) -> None:
    base = template(CI["gateway"]).annotations
    changed = template(CI["gateway"], sets=sets).annotations
    assert changed["checksum/secret"] != base["checksum/secret"]
    assert changed["checksum/config"] == base["checksum/config"]


def test_switching_from_generated_to_existing_secret_rolls_the_pods() -> None:
    generated = template(CI["minimal"]).annotations["checksum/secret"]
    existing = template(CI["minimal"], sets=("keys.existingSecret=mine",)).annotations["checksum/secret"]
    assert generated != existing


# ---- services, peers, downward API ---------------------------------------------------------------------


@pytest.mark.parametrize("values", GATEWAYS, ids=ids(GATEWAYS))
def test_service_and_headless_peer_service(values: Path) -> None:
    r = template(values)
    selector = r.deployment["spec"]["selector"]["matchLabels"]
    labels = r.deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()

    svc = r.one("Service", FULLNAME)
    assert svc["spec"]["selector"] == selector
    assert [(p["name"], p["targetPort"]) for p in svc["spec"]["ports"]] == [("http", "http")]

    peers_svc = r.one("Service", f"{FULLNAME}-peers")
    assert peers_svc["spec"]["clusterIP"] == "None"
    assert peers_svc["spec"]["publishNotReadyAddresses"] is True  # draining replicas still own calls
    assert peers_svc["spec"]["selector"] == selector
    ports = {p["name"]: p for p in peers_svc["spec"]["ports"]}
    assert ports["peer"]["port"] == 8081 and ports["peer"]["targetPort"] == "peer"
    container_ports = {p["name"]: p["containerPort"] for p in r.container["ports"]}
    assert container_ports["peer"] == 8081


def test_peer_port_value_reaches_the_pod_and_the_headless_service() -> None:
    r = template(CI["minimal"], sets=("peer.port=9091",))
    assert {p["name"]: p["containerPort"] for p in r.container["ports"]}["peer"] == 9091
    ports = {p["name"]: p["port"] for p in r.one("Service", f"{FULLNAME}-peers")["spec"]["ports"]}
    assert ports["peer"] == 9091
    assert r.config["replica"]["peer_port"] == 9091  # the proxy listens there for forwarded retries
    address = next(e["value"] for e in _env(r.container) if e["name"] == "MRTR_PROXY_REPLICA_ADDRESS")
    assert address == "$(POD_IP):9091"  # handles name the peer port as the owner's address


def _env(container: dict[str, Any]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = container["env"]
    return env


@pytest.mark.parametrize("values", GATEWAYS, ids=ids(GATEWAYS))
def test_pod_ip_from_the_downward_api_names_the_replica(values: Path) -> None:
    env = _env(template(values).container)
    names = [e["name"] for e in env]
    pod_ip = env[names.index("POD_IP")]
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    address = env[names.index("MRTR_PROXY_REPLICA_ADDRESS")]
    assert names.index("POD_IP") < names.index("MRTR_PROXY_REPLICA_ADDRESS")  # $(POD_IP) expands
    assert address["value"] == "$(POD_IP):8081"  # the peer port: where other replicas forward retries


def test_ipv6_replica_address_is_bracketed_and_loads(tmp_path: Path) -> None:
    r = template(CI["minimal"], sets=("replica.ipv6=true",))
    value = next(e["value"] for e in _env(r.container) if e["name"] == "MRTR_PROXY_REPLICA_ADDRESS")
    assert value == "[$(POD_IP)]:8081"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(r.config_text)
    loaded = load_config(cfg, env={"MRTR_PROXY_REPLICA_ADDRESS": value.replace("$(POD_IP)", "fd00::7")})
    assert loaded.replica_address == "[fd00::7]:8081"


# ---- PDB and HPA ------------------------------------------------------------------------------------------


def test_gateway_scenario_has_pdb_and_hpa_and_leaves_replicas_to_the_hpa() -> None:
    r = template(CI["gateway"])
    pdb = r.one("PodDisruptionBudget")
    assert pdb["spec"] == {
        "minAvailable": 2,
        "selector": {"matchLabels": r.deployment["spec"]["selector"]["matchLabels"]},
    }
    hpa = r.one("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": FULLNAME}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    assert {m["resource"]["name"] for m in hpa["spec"]["metrics"]} == {"cpu", "memory"}
    assert hpa["spec"]["behavior"]["scaleDown"]["policies"] == [
        {"type": "Pods", "value": 1, "periodSeconds": 60}
    ]
    assert "replicas" not in r.deployment["spec"]


def test_minimal_has_replicas_and_a_pdb_that_never_blocks_a_drain() -> None:
    r = template(CI["minimal"])
    assert r.deployment["spec"]["replicas"] == 2
    assert r.one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert r.maybe("HorizontalPodAutoscaler") is None
    rollout = r.deployment["spec"]["strategy"]["rollingUpdate"]
    assert rollout["maxUnavailable"] == 0


def test_gateway_with_three_replicas_and_no_hpa() -> None:
    r = template(CI["gateway"], sets=("autoscaling.enabled=false",))
    assert r.deployment["spec"]["replicas"] == 3
    assert r.maybe("HorizontalPodAutoscaler") is None


def test_pdb_can_be_turned_off() -> None:
    assert (
        template(CI["minimal"], sets=("podDisruptionBudget.enabled=false",)).maybe("PodDisruptionBudget")
        is None
    )


# ---- the rendered proxy config ------------------------------------------------------------------------


@pytest.mark.parametrize("values", SCENARIOS, ids=ids(SCENARIOS))
def test_rendered_config_validates_with_the_proxys_loader(values: Path, tmp_path: Path) -> None:
    r = template(values)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(r.config_text)
    env = {"MRTR_PROXY_REPLICA_ADDRESS": f"{POD_IP}:8080"}
    config = load_config(cfg, env=env)
    assert (config.listen.host, config.listen.port) == ("0.0.0.0", 8080)
    assert config.keys.dirs == (Path("/etc/mrtr-proxy/keys"),)
    assert config.logging.format == "json"
    assert config.replica_address == f"{POD_IP}:8080"
    assert config.calls.drain_grace_s == scenario_values(values)["drain"]["graceSeconds"]
    expected = scenario_values(values)["config"].get("upstreams")
    if expected is None:  # sidecar: one upstream on localhost
        assert [(u.name, u.url) for u in config.upstreams] == [("default", "http://127.0.0.1:8000/mcp")]
    else:
        assert [u.name for u in config.upstreams] == [u["name"] for u in expected]


def test_gateway_scenario_config_keeps_every_value() -> None:
    config = template(CI["gateway"]).config
    assert config["front"]["max_body_bytes"] == 2097152  # no float or exponent on the way through helm
    assert config["principal"] == {"source": "jwt_claim", "claim": "sub"}
    assert config["upstreams"][1]["protocol_versions"] == ["2024-11-05"]  # a date-like string stays a string


@pytest.mark.asyncio(loop_scope="session")
async def test_the_rendered_config_and_generated_key_boot_the_proxy(tmp_path: Path) -> None:
    """The minimal scenario's ConfigMap and Secret, as a pod sees them, start the real proxy (on loopback)."""
    r = template(CI["minimal"])
    keys = tmp_path / "keys"
    keys.mkdir()
    for name, data in r.one("Secret")["data"].items():
        (keys / name).write_bytes(base64.b64decode(data))
    config = r.config
    config["keys"]["dirs"] = [str(keys)]
    peer_port = peers.free_port()
    config["replica"]["peer_port"] = peer_port  # the chart's 8081, moved to a free port on loopback
    replica = next(e["value"] for e in _env(r.container) if e["name"] == "MRTR_PROXY_REPLICA_ADDRESS")
    argv = [sys.executable, "-m", "proxy", *r.container["args"]]
    cfg = tmp_path / "config.yaml"
    argv[argv.index("--config") + 1] = str(cfg)
    async with (
        peers.start_fastmcp() as upstream,  # readiness needs a reachable upstream
        peers.run_peer(
            "mrtr-proxy-helm",
            lambda port: _write_then(
                cfg,
                {**config, "upstreams": [{"name": "default", "url": str(upstream)}]},
                [*argv, "--listen", f"127.0.0.1:{port}"],
            ),
            env={"MRTR_PROXY_REPLICA_ADDRESS": replica.replace("$(POD_IP):8081", f"127.0.0.1:{peer_port}")},
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            path = r.container[probe]["httpGet"]["path"]
            async with http.get(f"http://127.0.0.1:{proxy.port}{path}") as resp:
                assert resp.status == 200, (probe, await resp.text())
        await asyncio.sleep(0)
        assert "keys.ephemeral" not in proxy.log_text()  # the mounted key was used
        async with http.get(f"http://127.0.0.1:{peer_port}/healthz") as resp:
            assert resp.status == 200  # the peer port serves too


def _write_then(path: Path, config: dict[str, Any], argv: list[str]) -> list[str]:
    path.write_text(yaml.safe_dump(config))
    return argv


# ---- sidecar -------------------------------------------------------------------------------------------


def _snippet(text: str) -> dict[str, Any]:
    begin, end = "# --- sidecar snippet: begin ---", "# --- sidecar snippet: end ---"
    assert begin in text and end in text, text
    snippet: dict[str, Any] = yaml.safe_load(text.split(begin, 1)[1].split(end, 1)[0])
    return snippet


def test_sidecar_notes_give_a_container_that_matches_the_release() -> None:
    r = template(CI["sidecar"])
    spec = _snippet(notes(CI["sidecar"]))["spec"]
    assert spec["terminationGracePeriodSeconds"] > scenario_values(CI["sidecar"])["drain"]["graceSeconds"]
    assert spec["securityContext"] == {"fsGroup": 10001}  # the key files are group-readable
    (container,) = spec["containers"]
    assert container["name"] == "mrtr-proxy"
    assert container["args"] == ["serve", "--config", "/etc/mrtr-proxy/config/config.yaml"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"mrtr-http": 8080, "mrtr-peer": 8081}  # prefixed: unique within the app's pod
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "mrtr-http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "mrtr-http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "mrtr-http"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert any(e.get("valueFrom") == {"fieldRef": {"fieldPath": "status.podIP"}} for e in container["env"])
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["mrtr-proxy-config"]["configMap"]["name"] == r.one("ConfigMap")["metadata"]["name"]
    assert volumes["mrtr-proxy-keys"]["secret"]["secretName"] == r.one("Secret")["metadata"]["name"]
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts == set(volumes)


def test_gateway_notes_list_every_upstream_and_warn_about_a_generated_key() -> None:
    text = notes(CI["gateway"])
    assert f"http://{FULLNAME}.{NAMESPACE}.svc:8080/servers/search/mcp" in text
    assert f"http://{FULLNAME}.{NAMESPACE}.svc:8080/servers/files/mcp" in text
    assert "WARNING" not in text  # existingSecret set
    assert "WARNING: the sealing key is generated" in notes(CI["minimal"])


def test_sidecar_upstream_port_and_path_follow_the_values() -> None:
    r = template(CI["sidecar"], sets=("sidecar.upstreamPort=3000", "sidecar.upstreamPath=/api/mcp"))
    assert r.config["upstreams"] == [{"name": "default", "url": "http://127.0.0.1:3000/api/mcp"}]

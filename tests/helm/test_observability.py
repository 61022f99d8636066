"""The chart's observability objects (ServiceMonitor, PrometheusRule, Grafana dashboard ConfigMap): off by
default, rendered alike by helm 4 and 3, valid against the Kubernetes schemas (kubernetes-validate, offline)
and the Prometheus Operator CRD schemas (@kubernetes-models/prometheus-operator), every PromQL expression
parsed by Prometheus' own grammar (@prometheus-io/lezer-promql), and every metric name they use present in a
live /metrics scrape of a running proxy after a scripted flow."""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes_validate
import peers
import pytest
from e2e.harness import RawClient, accept_name, running_proxy
from prometheus_client.parser import text_string_to_metric_families

from .chart import CHART, NAMESPACE, RELEASE, SCENARIOS, Rendered, template
from .chart import template_error as fails

OBSERVABILITY = CHART / "ci" / "observability-values.yaml"
VALIDATOR = Path(__file__).parent / "observability.mjs"
FULLNAME = f"{RELEASE}-mrtr-proxy"
ALERTS = {
    "MrtrProxyCallsNearLimit",
    "MrtrProxySessionPoolNearLimit",
    "MrtrProxyHandleRejectionsHigh",
    "MrtrProxyPeerForwardsFailing",
    "MrtrProxyUpstreamErrors",
    "MrtrProxyDrainingTooLong",
}
# Grafana's own variables, replaced by what Grafana would put there before the grammar sees the query.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m"}
KINDS = ("ServiceMonitor", "PrometheusRule")


@functools.cache
def rendered() -> Rendered:
    return template(OBSERVABILITY)


def dashboard() -> dict[str, Any]:
    cm = rendered().one("ConfigMap", f"{FULLNAME}-dashboard")
    board: dict[str, Any] = json.loads(cm["data"]["mrtr-proxy.json"])
    return board


def rule_exprs() -> dict[str, str]:
    (group,) = rendered().one("PrometheusRule")["spec"]["groups"]
    return {rule["alert"]: rule["expr"] for rule in group["rules"]}


def dashboard_exprs() -> list[str]:
    board = dashboard()
    exprs = [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]  # a row has none
    exprs += [v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs


def grafana_to_promql(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    # label_values(metric, label) is Grafana's, not PromQL: its first argument is a selector
    return re.sub(r"^label_values\((\w+), *\w+\)$", r"\1", expr)


def check(objects: list[dict[str, Any]], exprs: list[str]) -> dict[str, Any]:
    """Run the Node validator (CRD schemas, PromQL grammar) over `objects` and `exprs`."""
    done = subprocess.run(
        [str(peers.node_bin()), str(VALIDATOR), str(peers.node_modules())],
        input=json.dumps({"objects": objects, "exprs": exprs}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


# ---- rendering -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [p for p in SCENARIOS if p != OBSERVABILITY], ids=lambda p: p.name)
def test_off_by_default(values: Path) -> None:
    r = template(values)
    assert not r.all("ServiceMonitor") and not r.all("PrometheusRule")
    assert all(not o["metadata"]["name"].endswith("-dashboard") for o in r.all("ConfigMap"))


def test_each_is_behind_one_value() -> None:
    for key, kind in (("serviceMonitor", "ServiceMonitor"), ("prometheusRule", "PrometheusRule")):
        r = template(CHART / "ci" / "minimal-values.yaml", sets=(f"metrics.{key}.enabled=true",))
        assert [o["kind"] for o in r.objects if o["kind"] in KINDS] == [kind]
    r = template(CHART / "ci" / "minimal-values.yaml", sets=("metrics.dashboard.enabled=true",))
    assert [o["metadata"]["name"] for o in r.all("ConfigMap")] == [
        f"{FULLNAME}-config",
        f"{FULLNAME}-dashboard",
    ]


def test_helm3_renders_the_same_observability_objects() -> None:
    def ours(r: Rendered) -> list[dict[str, Any]]:
        return [o for o in r.objects if o["kind"] in KINDS or o["metadata"]["name"].endswith("-dashboard")]

    assert ours(template(OBSERVABILITY, helm="helm3")) == ours(rendered())
    assert len(ours(rendered())) == 3


def test_sidecar_mode_refuses_a_service_monitor() -> None:
    error = fails(CHART / "ci" / "sidecar-values.yaml", sets=("metrics.serviceMonitor.enabled=true",))
    assert "metrics.serviceMonitor: needs mode gateway" in error
    sets = ("metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true")
    sidecar = template(CHART / "ci" / "sidecar-values.yaml", sets=sets)  # the other two work there
    assert [o["kind"] for o in sidecar.objects if o["kind"] in KINDS] == ["PrometheusRule"]
    assert f"{FULLNAME}-dashboard" in [o["metadata"]["name"] for o in sidecar.all("ConfigMap")]


@pytest.mark.parametrize(
    "bad",
    ["metrics.prometheusRule.callsNearLimit=2", "metrics.serviceMonitor.interval=soon", "metrics.bogus=1"],
)
def test_values_schema_rejects(bad: str) -> None:
    assert "values don't meet the specifications of the schema" in fails(OBSERVABILITY, sets=(bad,))


# ---- schemas ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.25.0", kubernetes_validate.latest_version()])
def test_every_other_object_is_valid_kubernetes(version: str) -> None:
    for obj in rendered().objects:
        if obj["kind"] not in KINDS:
            kubernetes_validate.validate(obj, version, strict=True)


def test_service_monitor_and_prometheus_rule_match_the_operator_crds() -> None:
    objects = [o for o in rendered().objects if o["kind"] in KINDS]
    assert sorted(o["kind"] for o in objects) == sorted(KINDS)
    broken = json.loads(json.dumps(objects))
    for obj in broken:
        if obj["kind"] == "ServiceMonitor":
            obj["spec"]["endpoints"] = [{"port": 8080}]  # a port name, not a number
        else:
            obj["spec"]["groups"][0]["rules"][0]["for"] = "ten minutes"
    results = check(objects + broken, [])["objects"]
    assert [(r["kind"], r["error"]) for r in results[:2]] == [(o["kind"], None) for o in objects]
    assert all(r["error"] for r in results[2:]), results  # the validator does reject what the CRDs forbid


# ---- structure ---------------------------------------------------------------------------------------------


def test_service_monitor_scrapes_metrics_through_the_headless_peer_service_only() -> None:
    r = rendered()
    monitor = r.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    wanted = spec["selector"]["matchLabels"].items()
    selected = [s["metadata"]["name"] for s in r.all("Service") if wanted <= s["metadata"]["labels"].items()]
    assert selected == [f"{FULLNAME}-peers"]  # keeps draining pods (publishNotReadyAddresses); scraped once
    assert r.one("Service", f"{FULLNAME}-peers")["spec"]["publishNotReadyAddresses"] is True
    (endpoint,) = spec["endpoints"]
    assert endpoint == {
        "port": "http",
        "path": "/metrics",
        "scheme": "http",
        "interval": "15s",
        "scrapeTimeout": "10s",
    }
    ports = [p["name"] for p in r.one("Service", f"{FULLNAME}-peers")["spec"]["ports"]]
    assert "http" in ports


def test_prometheus_rule_alerts() -> None:
    rule = rendered().one("PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (group,) = rule["spec"]["groups"]
    assert {r["alert"] for r in group["rules"]} == ALERTS
    selector = f'namespace="{NAMESPACE}",service="{FULLNAME}-peers"'
    for r in group["rules"]:
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}
        assert r["labels"] == {"severity": "critical"}
        assert set(r["annotations"]) == {"summary", "description"}
        assert r.get("for", "5m") == "5m"
        assert r["expr"].count("mrtr_proxy_") == r["expr"].count(selector), r["alert"]  # every series scoped
        kept = {
            label.strip() for group in re.findall(r"by \(([^)]*)\)", r["expr"]) for label in group.split(",")
        }
        for used in re.findall(r"\$labels\.(\w+)", " ".join(r["annotations"].values())):
            assert not kept or used in kept, (r["alert"], used)  # an aggregated-away label renders empty
    exprs = rule_exprs()
    assert "/ max by (namespace, pod) (mrtr_proxy_max_calls{" in exprs["MrtrProxyCallsNearLimit"]
    assert exprs["MrtrProxyCallsNearLimit"].endswith("> 0.8")
    assert "mrtr_proxy_draining_seconds{" in exprs["MrtrProxyDrainingTooLong"]
    assert "> mrtr_proxy_drain_grace_seconds{" in exprs["MrtrProxyDrainingTooLong"]


def test_a_custom_selector_and_thresholds(tmp_path: Path) -> None:
    over = tmp_path / "over.yaml"
    over.write_text("metrics: {prometheusRule: {selector: 'job=\"mcp\"', sessionsNearLimit: 0.5}}\n")
    r = template(OBSERVABILITY, over)
    (group,) = r.one("PrometheusRule")["spec"]["groups"]
    by_name = {rule["alert"]: rule["expr"] for rule in group["rules"]}
    assert 'mrtr_proxy_upstream_sessions{job="mcp"}' in by_name["MrtrProxySessionPoolNearLimit"]
    assert by_name["MrtrProxySessionPoolNearLimit"].endswith("> 0.5")


def test_dashboard_config_map_for_the_grafana_sidecar() -> None:
    cm = rendered().one("ConfigMap", f"{FULLNAME}-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "MCP"}
    board = dashboard()
    assert board["uid"] == "mrtr-proxy" and board["title"] == "mrtr-proxy"
    titles = [p["title"] for p in board["panels"]]
    for wanted in (
        "Requests by outcome",
        "MRTR rounds (input_required results)",
        "Calls held",
        "Parked call age (p50, p95)",
        "Latency by upstream (p50, p95)",
        "Forwards to owner replicas and takeovers",
        "Migration",
        "Migration: calls by path",
        "Migration: legacy clients' share of calls",
        "Migration: tools asking inline",
    ):
        assert wanted in titles
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    assert [p["title"] for p in board["panels"] if p["type"] == "row"] == ["Migration"]
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"]


def test_every_expression_parses() -> None:
    exprs = [*rule_exprs().values(), *dashboard_exprs()]
    results = check([], [grafana_to_promql(e) for e in exprs])["exprs"]
    assert [(r["expr"], r["errors"]) for r in results if r["errors"]] == []
    # the grammar does see errors (a control)
    assert check([], ["sum(rate(x[5m])"])["exprs"][0]["errors"] > 0


# ---- every metric name exists in a live scrape -----------------------------------------------------------


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_every_metric_name_is_in_a_live_scrape(fastmcp_url: str) -> None:
    exprs = [*rule_exprs().values(), *dashboard_exprs()]
    used = {m for r in check([], [grafana_to_promql(e) for e in exprs])["exprs"] for m in r["metrics"]}
    assert used >= {"mrtr_proxy_requests_total", "mrtr_proxy_parked_call_age_seconds_bucket"}
    async with running_proxy(fastmcp_url) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        assert (await client.call("echo", {"text": "hi"})).result["resultType"] == "complete"
        first = await client.call("ask_name")
        done = await client.retry(first, {"elicit-1": accept_name()}, "ask_name")
        assert done.result["resultType"] == "complete"
        async with http.get(proxy.url.removesuffix("/mcp") + "/metrics") as resp:
            text = await resp.text()
    scraped = {s.name for family in text_string_to_metric_families(text) for s in family.samples}
    assert sorted(used - scraped) == []

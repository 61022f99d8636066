"""The chart's optional admin listener (process/admin.py): off by default; `admin.enabled` with a token Secret
adds the `admin` container port, mounts the token, writes admin.* into the config (validated by the
proxy's loader), adds the port to the headless Service only, and points the ServiceMonitor at it with the
bearer token."""

from __future__ import annotations

from pathlib import Path

from proxy.config import load_config

from .chart import RELEASE, SCENARIOS, template
from .chart import template_error as fails

CI = {p.name.removesuffix("-values.yaml"): p for p in SCENARIOS}
FULLNAME = f"{RELEASE}-mrtr-proxy"
ON = ("admin.enabled=true", "admin.tokenSecret=mrtr-admin")


def test_admin_is_off_by_default() -> None:
    r = template(CI["gateway"])
    assert "admin" not in r.config
    assert "admin" not in {p["name"] for p in r.container["ports"]}
    assert all(m["name"] != "mrtr-proxy-admin" for m in r.container["volumeMounts"])


def test_admin_enabled_renders_port_token_config_and_scrape(tmp_path: Path) -> None:
    r = template(CI["gateway"], sets=(*ON, "metrics.serviceMonitor.enabled=true"))
    assert r.config["admin"] == {"listen": "0.0.0.0:9100", "token_file": "/etc/mrtr-proxy/admin/token"}
    assert {p["name"]: p["containerPort"] for p in r.container["ports"]}["admin"] == 9100
    mount = next(m for m in r.container["volumeMounts"] if m["name"] == "mrtr-proxy-admin")
    assert mount == {"name": "mrtr-proxy-admin", "mountPath": "/etc/mrtr-proxy/admin", "readOnly": True}
    volume = next(v for v in r.pod["volumes"] if v["name"] == "mrtr-proxy-admin")
    assert volume["secret"]["secretName"] == "mrtr-admin"
    assert volume["secret"]["items"] == [{"key": "token", "path": "token"}]
    peers_ports = {p["name"] for p in r.one("Service", f"{FULLNAME}-peers")["spec"]["ports"]}
    assert "admin" in peers_ports
    assert "admin" not in {p["name"] for p in r.one("Service", FULLNAME)["spec"]["ports"]}  # never public
    (endpoint,) = r.one("ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] == "admin" and endpoint["path"] == "/metrics"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "mrtr-admin", "key": "token"},
    }
    cfg = tmp_path / "config.yaml"
    cfg.write_text(r.config_text)
    config = load_config(cfg, env={})
    assert config.admin.listen == "0.0.0.0:9100"
    assert config.admin.token_file == Path("/etc/mrtr-proxy/admin/token")


def test_service_monitor_scrapes_the_main_port_without_admin() -> None:
    r = template(CI["gateway"], sets=("metrics.serviceMonitor.enabled=true",))
    (endpoint,) = r.one("ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] == "http" and "authorization" not in endpoint


def test_admin_needs_a_token_secret_and_its_own_port() -> None:
    assert "admin.tokenSecret" in fails(CI["minimal"], sets=("admin.enabled=true",))
    assert "admin.port: 8081" in fails(CI["minimal"], sets=(*ON, "admin.port=8081"))

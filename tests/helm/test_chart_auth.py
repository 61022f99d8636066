"""The chart's `auth` values: the public URL and a default JWKS URL reach the proxy config, and Secrets
you manage are mounted read-only where the config points."""

from __future__ import annotations

from pathlib import Path

from proxy.config import load_config

from .chart import SCENARIOS, template

GATEWAY = next(p for p in SCENARIOS if p.name == "gateway-values.yaml")


def test_public_url_and_jwks_url_reach_the_config(tmp_path: Path) -> None:
    r = template(GATEWAY)
    assert r.config["listen"] == {"host": "0.0.0.0", "port": 8080, "public_url": "https://mcp.example.com"}
    billing = next(u for u in r.config["upstreams"] if u["name"] == "billing")
    assert billing["auth"]["jwks_url"] == "https://login.example.com/.well-known/jwks.json"
    assert all(
        "auth" not in u for u in r.config["upstreams"] if u["name"] != "billing"
    )  # passthrough left alone
    cfg = tmp_path / "config.yaml"
    cfg.write_text(r.config_text)
    loaded = load_config(cfg, env={}).upstream("billing")
    assert loaded.auth.mode == "validate"
    assert loaded.auth.upstream_credential.file == Path("/etc/mrtr-proxy/secrets/billing-token/token")


def test_an_upstream_with_its_own_keys_keeps_them() -> None:
    r = template(GATEWAY, sets=("config.upstreams[2].auth.jwks_url=https://other.example/jwks",))
    billing = next(u for u in r.config["upstreams"] if u["name"] == "billing")
    assert billing["auth"]["jwks_url"] == "https://other.example/jwks"


def test_secret_mounts_are_read_only_volumes_from_your_secrets() -> None:
    r = template(GATEWAY)
    mount = next(
        m for m in r.container["volumeMounts"] if m["mountPath"] == "/etc/mrtr-proxy/secrets/billing-token"
    )
    assert mount["readOnly"] is True
    volume = next(v for v in r.pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"] == {"secretName": "billing-service-token", "defaultMode": 0o440}

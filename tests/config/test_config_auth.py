"""The `auth` and `tls` sections of an upstream: schema, model, checks, and what start-up reads."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import pytest
from oauth_keys import SigningKey, jwks

from proxy.auth.setup import AuthSetupError, prepare
from proxy.cli.main import main
from proxy.config import AuthConfig, ConfigError, TlsConfig, UpstreamCredential, load_config, load_schema

VALIDATE = """
listen: {public_url: "https://mcp.example.com"}
upstreams:
  - name: a
    url: "http://127.0.0.1:8000/mcp"
    auth:
      mode: validate
      authorization_servers: ["https://as.example.com"]
      jwks_url: "https://as.example.com/jwks"
"""


def load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "proxy.yaml"
    path.write_text(textwrap.dedent(text))
    return load_config(path, env={})


def problems(tmp_path: Path, text: str) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    return info.value.problems


@pytest.mark.parametrize(
    ("cls", "path"),
    [
        (AuthConfig, ["auth"]),
        (TlsConfig, ["tls"]),
        (UpstreamCredential, ["auth", "properties", "upstream_credential"]),
    ],
)
def test_dataclasses_match_the_schema(cls: Any, path: list[str]) -> None:
    node: Any = load_schema()["$defs"]["upstream"]["properties"]
    for part in path:
        node = node[part]
        if "$ref" in node:  # auth is a shared definition (upstreams and aggregated routes)
            node = load_schema()["$defs"][node["$ref"].rsplit("/", 1)[1]]
    props = node["properties"]
    assert [f.name for f in dataclasses.fields(cls) if f.name in props] == list(props)
    for f in dataclasses.fields(cls):
        default: Any = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        expected = props[f.name].get("default")
        if dataclasses.is_dataclass(default) or isinstance(expected, dict):
            assert expected == {} and not dict(default) if not dataclasses.is_dataclass(default) else True
        else:
            assert default == (tuple(expected) if isinstance(expected, list) else expected), f.name


def test_validate_mode_loads(tmp_path: Path) -> None:
    up = load(tmp_path, VALIDATE).upstreams[0]
    assert up.auth.mode == "validate"
    assert up.auth.issuers == ("https://as.example.com",)
    assert up.auth.upstream_credential.source == "client_token"


def test_validate_mode_needs_keys_servers_and_a_public_url(tmp_path: Path) -> None:
    found = problems(tmp_path, "upstreams: [{name: a, url: 'http://x/mcp', auth: {mode: validate}}]")
    text = "\n".join(found)
    assert "upstreams.0.auth.authorization_servers: validate mode needs at least one" in text
    assert "upstreams.0.auth: validate mode needs exactly one of jwks_url or jwks_file" in text
    assert "upstreams.0.auth.public_url: validate mode needs the resource URL clients call" in text


def test_validate_only_keys_and_credential_sources(tmp_path: Path) -> None:
    text = "\n".join(
        problems(
            tmp_path,
            """
            upstreams:
              - name: a
                url: "http://x/mcp"
                auth: {jwks_url: "https://as/jwks", upstream_credential: {source: file}}
            """,
        )
    )
    assert "upstreams.0.auth: jwks_url only used with mode: validate" in text
    assert "upstreams.0.auth.upstream_credential.file: required when source is 'file'" in text
    assert "token" not in load_schema()["$defs"]["auth"]["properties"]  # no inline secret


def test_tls_needs_https_and_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    text = "\n".join(
        problems(tmp_path, "upstreams: [{name: a, url: 'http://x/mcp', tls: {key_file: k.pem}}]")
    )
    assert "upstreams.0.tls: only used with an https:// url" in text
    assert "upstreams.0.tls.key_file: needs tls.cert_file" in text
    cfg = load(tmp_path, "upstreams: [{name: a, url: 'https://x/mcp', tls: {ca_file: ca.pem}}]")
    assert cfg.upstreams[0].tls.ca_file == tmp_path / "ca.pem"


def test_startup_names_each_unusable_file_and_variable(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text('{"keys": "no"}')
    cfg = load(
        tmp_path,
        """
        listen: {public_url: "https://p"}
        upstreams:
          - name: a
            url: "https://x/mcp"
            tls: {ca_file: missing-ca.pem}
            auth:
              mode: validate
              authorization_servers: ["https://as"]
              jwks_file: keys.json
              upstream_credential: {source: env, env: SERVICE_TOKEN}
        """,
    )
    with pytest.raises(AuthSetupError) as info:
        prepare(cfg, environ={})
    text = str(info.value)
    assert f"upstreams.0.tls.ca_file: cannot load CA bundle {tmp_path / 'missing-ca.pem'}" in text
    assert f"upstreams.0.auth.jwks_file {tmp_path / 'keys.json'}: not a JWKS document" in text
    assert "upstreams.0.auth.upstream_credential: environment variable SERVICE_TOKEN is empty" in text


def test_startup_reads_static_keys_and_a_service_credential(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text(__import__("json").dumps(jwks(SigningKey("k1"))))
    (tmp_path / "svc").write_text("svc-secret\n")
    cfg = load(
        tmp_path,
        """
        listen: {public_url: "https://p"}
        upstreams:
          - name: a
            url: "http://x/mcp"
            auth:
              mode: validate
              authorization_servers: ["https://as"]
              jwks_file: keys.json
              upstream_credential: {source: file, file: svc}
        """,
    )
    ready = prepare(cfg)
    assert ready.credentials["a"] == "Bearer svc-secret"
    assert "a" in ready.static_keys


def test_check_config_names_unusable_files_and_describes_auth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    bad = tmp_path / "bad.yaml"
    bad.write_text("upstreams: [{name: a, url: 'https://x/mcp', tls: {ca_file: nowhere.pem}}]\n")
    assert main(["check-config", str(bad)]) == 2
    assert (
        f"upstreams.0.tls.ca_file: cannot load CA bundle {tmp_path / 'nowhere.pem'}"
        in capsys.readouterr().err
    )
    good = tmp_path / "good.yaml"
    good.write_text(textwrap.dedent(VALIDATE))
    assert main(["check-config", str(good)]) == 0
    out = capsys.readouterr().out
    assert "auth validate (keys https://as.example.com/jwks; upstream credential client_token)" in out

"""No secret reaches the logs during a full elicitation flow: tokens, keys, handles, elicited content."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import structlog
from oauth_keys import SigningKey, claims, jwks, tampered

from e2e.harness import RawClient, running_proxy
from e2e.oauth_peers import jwks_server
from proxy.config import AuthConfig, KeysConfig, UpstreamConfig, UpstreamCredential
from proxy.handle import generate_key_b64
from proxy.observe import logs

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    logs.configure("debug", "json", stream)
    try:
        yield stream
    finally:
        structlog.reset_defaults()


async def test_full_flow_logs_no_secret(fastmcp_url: str, captured: io.StringIO, tmp_path: Path) -> None:
    key = generate_key_b64()
    (tmp_path / "key").write_text(key)
    token = "Bearer tok-SECRET-4242"
    elicited = "Elicited-SECRET-9731"
    async with (
        running_proxy(fastmcp_url, keys=KeysConfig(dirs=(tmp_path,))) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, authorization=token)
        first = await client.call("ask_name")
        state = first.result["requestState"]
        bad = await client.call("ask_name", requestState=state[:-4], inputResponses={"elicit-1": {}})
        assert bad.error["code"] == -32602
        final = await client.retry(
            first, {"elicit-1": {"action": "accept", "content": {"name": elicited}}}, "ask_name"
        )
        assert elicited in final.result["content"][0]["text"]

    text = captured.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]
    assert any(line.get("outcome") == "input_required" for line in lines)  # the canonical request lines
    assert any(line.get("outcome") == "handle_rejected" and line.get("reason") for line in lines)
    for secret in (token, "tok-SECRET-4242", elicited, state, state[:40], key):
        assert secret not in text, f"{secret[:12]}… leaked into the logs"


async def test_validate_mode_logs_no_token_key_or_claim(
    fastmcp_url: str, captured: io.StringIO, tmp_path: Path
) -> None:
    """Validate mode at debug level: good, refreshed, forged and misdirected tokens, a service credential
    and claim headers. No token (nor its signature), credential, key material or claim value is logged."""

    iss, resource = "https://as.example.test/Issuer-SECRET", "https://mcp.example.test/mcp"
    key = SigningKey("Kid-SECRET-1")
    (tmp_path / "svc").write_text("Service-SECRET-credential")
    sub, email = "Claim-SECRET-sub", "claim-SECRET@example.test"
    good = key.mint(claims(iss=iss, aud=resource, sub=sub, email=email))
    refreshed = key.mint(claims(iss=iss, aud=resource, sub=sub, email=email, jti="Jti-SECRET"))
    wrong_aud = key.mint(claims(iss=iss, aud="https://Aud-SECRET.example/mcp", sub=sub))
    async with jwks_server() as keys, aiohttp.ClientSession() as http:
        keys.document = jwks(key)
        auth = AuthConfig(
            mode="validate",
            public_url=resource,
            authorization_servers=(iss,),
            jwks_url=keys.url,
            upstream_credential=UpstreamCredential(source="file", file=tmp_path / "svc"),
            claim_headers={"x-user": "sub", "x-email": "email"},
        )
        async with running_proxy(UpstreamConfig(name="default", url=fastmcp_url, auth=auth)) as proxy:
            client = RawClient(proxy.url, http, authorization=f"Bearer {good}")
            first = await client.call("ask_name")
            client.authorization = f"Bearer {refreshed}"
            final = await client.retry(
                first, {"elicit-1": {"action": "accept", "content": {"name": "N"}}}, "ask_name"
            )
            assert final.result["content"][0]["text"] == "accept:N"
            for bad in (wrong_aud, tampered(good), "Opaque-SECRET-token"):
                client.authorization = f"Bearer {bad}"
                assert (await client.call("echo", {"text": "x"})).status == 401

    text = captured.getvalue()
    assert any('"outcome":"unauthorized:wrong_audience"' in line for line in text.splitlines())
    secrets = [good, refreshed, wrong_aud, good.split(".")[2], refreshed.split(".")[1], "Opaque-SECRET-token"]
    secrets += ["Service-SECRET-credential", sub, email, "Jti-SECRET", "Aud-SECRET", "Issuer-SECRET"]
    secrets += [key.jwk["n"][:40], "Kid-SECRET-1"]
    for secret in secrets:
        assert secret not in text, f"{secret[:16]}… leaked into the logs"

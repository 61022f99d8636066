"""Validate mode against the running proxy in front of FastMCP 1.30: the proxy is the OAuth resource
server. Every attack gets its 401/403 with a challenge a client can act on, and never reaches the upstream
(a recording relay in between shows nothing arrived) nor takes capacity; a refreshed token of the same
user resumes its parked call; another user's valid token gets the one fixed "Invalid requestState"."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from oauth_keys import SigningKey, alg_none, claims, jwks, tampered

from e2e.harness import RawClient, RunningProxy, accept_name, running_proxy
from e2e.oauth_peers import JwksServer, jwks_server
from e2e.recording import Recording, recording_relay
from proxy.auth import challenge
from proxy.config import AuthConfig, UpstreamConfig, UpstreamCredential
from proxy.process.app import POOLS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ISS = "https://as.example.test"
RESOURCE = "https://mcp.example.test/mcp"
METADATA = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
KEY = SigningKey("k1")
SERVICE_TOKEN = "svc-SECRET-credential"


@dataclass
class Setup:
    proxy: RunningProxy
    jwks: JwksServer
    upstream: Recording


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def setup(fastmcp_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Setup]:
    secret = tmp_path_factory.mktemp("svc") / "token"
    secret.write_text(SERVICE_TOKEN + "\n")
    async with contextlib.AsyncExitStack() as stack:
        keys = await stack.enter_async_context(jwks_server())
        keys.document = jwks(KEY)
        relay = await stack.enter_async_context(recording_relay(fastmcp_url))
        auth = AuthConfig(
            mode="validate",
            public_url=RESOURCE,
            authorization_servers=(ISS,),
            jwks_url=keys.url,
            required_scopes=("mcp",),
            jwks_min_refresh_s=0,  # rotation picked up at once (the rate limit has its unit test)
            upstream_credential=UpstreamCredential(source="file", file=secret),
            claim_headers={"x-user": "sub"},
        )
        up = UpstreamConfig(name="default", url=relay.url, auth=auth)
        proxy = await stack.enter_async_context(running_proxy(up))
        yield Setup(proxy, keys, relay)


def good(sub: str = "alice", **extra: Any) -> str:
    return KEY.mint(claims(iss=ISS, aud=RESOURCE, sub=sub, **extra))


ATTACKS = [
    ("expired", lambda: good(ttl=-300), 401, "invalid_token", "expired"),
    (
        "wrong aud",
        lambda: KEY.mint(claims(iss=ISS, aud="https://other.example/mcp")),
        401,
        "invalid_token",
        "audience",
    ),
    (
        "wrong iss",
        lambda: KEY.mint(claims(iss="https://evil.example", aud=RESOURCE)),
        401,
        "invalid_token",
        "issuer",
    ),
    (
        "unknown kid",
        lambda: SigningKey("nobody").mint(claims(iss=ISS, aud=RESOURCE)),
        401,
        "invalid_token",
        "key",
    ),
    ("bad signature", lambda: tampered(good()), 401, "invalid_token", "signature"),
    ("missing scope", lambda: good(scope="other"), 403, "insufficient_scope", "scope mcp"),
    ("alg none", lambda: alg_none(claims(iss=ISS, aud=RESOURCE)), 401, "invalid_token", "algorithm"),
    ("not a jwt", lambda: "opaque-token-value", 401, "invalid_token", "not a JWT"),
    (
        "id token (typ JWT)",
        lambda: KEY.mint(claims(iss=ISS, aud=RESOURCE), typ="JWT"),
        401,
        "invalid_token",
        "not an access token",
    ),
    ("exp as a string", lambda: good(exp="9999999999"), 401, "invalid_token", "exp is not a number"),
    ("malformed", lambda: "jwt:sub=alice", 401, "invalid_request", "malformed"),
]


@pytest.mark.parametrize("case", ATTACKS, ids=[a[0] for a in ATTACKS])
async def test_each_attack_is_refused_with_an_actionable_challenge(
    setup: Setup, case: tuple[Any, ...]
) -> None:
    live_before = setup.proxy.live  # the module's proxy: what this test leaves
    _, token, status, error, says = case
    before = len(setup.upstream.sent)
    sessions = {name: pool.size for name, pool in setup.proxy.app[POOLS].items()}
    async with aiohttp.ClientSession() as http:
        reply = await RawClient(setup.proxy.url, http, authorization=f"Bearer {token()}").call(
            "echo", {"text": "x"}
        )
    assert reply.status == status
    (bearer,) = challenge.parse(reply.headers["WWW-Authenticate"])
    assert bearer.scheme == "Bearer"
    assert bearer.params["error"] == error
    assert says in bearer.params["error_description"]
    assert bearer.params["resource_metadata"] == METADATA
    assert bearer.params["scope"] == "mcp"
    assert reply.error["code"] == -32600
    assert reply.error["message"].startswith("Forbidden: " if status == 403 else "Unauthorized: ")
    # Nothing reached the upstream, nothing was opened or admitted.
    assert len(setup.upstream.sent) == before
    assert setup.proxy.live == live_before
    assert {name: pool.size for name, pool in setup.proxy.app[POOLS].items()} == sessions


async def test_no_token_gets_the_discovery_challenge(setup: Setup) -> None:
    async with aiohttp.ClientSession() as http:
        reply = await RawClient(setup.proxy.url, http).call("echo", {"text": "x"})
        legacy = await http.post(
            setup.proxy.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert reply.status == 401
    assert challenge.parse(reply.headers["WWW-Authenticate"])[0].params == {
        "resource_metadata": METADATA,
        "scope": "mcp",
    }
    assert legacy.status == 401  # a legacy client on the same endpoint is challenged the same way
    assert "resource_metadata=" in legacy.headers["WWW-Authenticate"]


async def test_metadata_names_the_authorization_server(setup: Setup) -> None:
    base = setup.proxy.url.removesuffix("/mcp")
    async with aiohttp.ClientSession() as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            async with http.get(base + path) as resp:
                assert resp.status == 200, path
                assert await resp.json() == {
                    "resource": RESOURCE,
                    "authorization_servers": [ISS],
                    "bearer_methods_supported": ["header"],
                    "scopes_supported": ["mcp"],
                }
        async with http.get(base + "/.well-known/oauth-protected-resource/nothing/here") as resp:
            assert resp.status == 404


async def test_good_token_passes_with_the_service_credential_upstream(setup: Setup) -> None:
    token = good(sub="Claim-SECRET-alice")
    async with aiohttp.ClientSession() as http:
        reply = await RawClient(setup.proxy.url, http, authorization=f"Bearer {token}").call(
            "echo", {"text": "hi"}
        )
    assert reply.status == 200
    assert reply.result["content"][0]["text"] == "hi"
    sent = setup.upstream.posts("tools/call")[-1].headers
    assert sent["authorization"] == f"Bearer {SERVICE_TOKEN}"  # never the client's token
    assert sent["x-user"] == "Claim-SECRET-alice"


async def test_jwks_rotation_is_picked_up(setup: Setup) -> None:
    rotated = SigningKey("k2")
    setup.jwks.document = jwks(KEY, rotated)
    fetches = setup.jwks.fetches
    token = rotated.mint(claims(iss=ISS, aud=RESOURCE))
    async with aiohttp.ClientSession() as http:
        reply = await RawClient(setup.proxy.url, http, authorization=f"Bearer {token}").call(
            "echo", {"text": "r"}
        )
    assert reply.status == 200
    assert setup.jwks.fetches == fetches + 1


async def test_parked_call_survives_a_token_refresh_and_refuses_another_user(setup: Setup) -> None:
    async with aiohttp.ClientSession() as http:
        first_token, refreshed = good(jti="one"), good(jti="two", ttl=600)
        assert first_token != refreshed
        alice = RawClient(setup.proxy.url, http, authorization=f"Bearer {first_token}")
        first = await alice.call("ask_name")
        assert first.result["resultType"] == "input_required"
        bob = RawClient(setup.proxy.url, http, authorization=f"Bearer {good(sub='bob')}")
        stolen = await bob.retry(first, {"elicit-1": accept_name("Mallory")}, "ask_name")
        assert stolen.status == 200
        assert stolen.error == {"code": -32602, "message": "Invalid requestState"}
        alice.authorization = f"Bearer {refreshed}"
        final = await alice.retry(first, {"elicit-1": accept_name("Alice")}, "ask_name")
    assert final.result["content"][0]["text"] == "accept:Alice"


async def test_a_bridged_legacy_client_sends_the_service_credential_not_its_token(
    fastmcp_sse_url: str, setup: Setup, tmp_path: Path
) -> None:
    """Validate mode in front of an sse upstream: the legacy client's own session (the bridge) carries the
    service credential upstream, like the relay and the modern front do; the client's token stays here."""
    secret = tmp_path / "token"
    secret.write_text(SERVICE_TOKEN)
    async with recording_relay(fastmcp_sse_url) as relay:
        auth = AuthConfig(
            mode="validate",
            public_url=RESOURCE,
            authorization_servers=(ISS,),
            jwks_url=setup.jwks.url,
            upstream_credential=UpstreamCredential(source="file", file=secret),
        )
        up = UpstreamConfig(name="default", url=relay.url, transport="sse", auth=auth)
        client_token = good(jti="bridged")
        async with running_proxy(up) as proxy, aiohttp.ClientSession() as http:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2024-11-05",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
            headers = {
                "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {client_token}",
            }
            async with http.post(proxy.url, json=init, headers=headers) as resp:
                assert resp.status == 200
                assert "Mcp-Session-Id" in resp.headers
    sent = [s.headers.get("authorization") for s in relay.sent]
    assert sent and all(value == f"Bearer {SERVICE_TOKEN}" for value in sent)
    assert not any(client_token in str(s.headers) for s in relay.sent)

"""Pass-through mode with a FastMCP 1.30 resource server (`token_verifier=` + `AuthSettings`) behind the
proxy: its 401/403 reach the client with a WWW-Authenticate pointing at the proxy's metadata for the route
called, the proxy serves the upstream's document with `resource` rewritten, and one 401 costs exactly one
upstream initialize (no version retries). The migration case: the upstream accepts the audience of the
proxy's public URL (the URL it used to have)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from oauth_keys import SigningKey, claims, jwks

from e2e.harness import RawClient, RunningProxy, accept_name, running_proxy
from e2e.oauth_peers import start_oauth_fastmcp, write_jwks
from e2e.recording import Recording, recording_relay
from proxy.auth import challenge

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ISS = "https://as.example.test/"
PUBLIC = "https://mcp.example.test"
KEY = SigningKey("k1")
LEGACY_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@dataclass
class Setup:
    proxy: RunningProxy
    upstream: Recording

    def initializes(self) -> int:
        return len(self.upstream.posts("initialize"))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def setup(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Setup]:
    keys = write_jwks(tmp_path_factory.mktemp("as") / "jwks.json", jwks(KEY))
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            start_oauth_fastmcp(
                issuer=ISS, audience=f"{PUBLIC}/mcp", jwks_file=Path(keys), required_scope="mcp"
            )
        )
        relay = await stack.enter_async_context(recording_relay(server))
        proxy = await stack.enter_async_context(running_proxy(relay.url, public_url=PUBLIC))
        yield Setup(proxy, relay)


def token(**kw: object) -> str:
    return "Bearer " + KEY.mint(claims(iss=ISS, aud=f"{PUBLIC}/mcp", **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("route", ["/mcp", "/servers/default/mcp"])
async def test_no_token_gets_the_upstreams_401_pointing_at_the_proxy(setup: Setup, route: str) -> None:
    before = setup.initializes()
    async with aiohttp.ClientSession() as http:
        url = setup.proxy.url.removesuffix("/mcp") + route
        reply = await RawClient(url, http).call("echo", {"text": "x"})
    assert reply.status == 401
    (bearer,) = challenge.parse(reply.headers["WWW-Authenticate"])
    assert bearer.params["error"] == "invalid_token"  # FastMCP's own error, relayed
    assert bearer.params["resource_metadata"] == f"{PUBLIC}/.well-known/oauth-protected-resource{route}"
    assert reply.error["message"] == "Unauthorized: upstream 'default' refused the credentials"
    assert setup.initializes() == before + 1  # one initialize per 401: negotiation stopped at once


async def test_expired_token_and_step_up(setup: Setup) -> None:
    async with aiohttp.ClientSession() as http:
        before = setup.initializes()
        expired = await RawClient(setup.proxy.url, http, authorization=token(ttl=-600)).call(
            "echo", {"text": "x"}
        )
        assert expired.status == 401
        assert setup.initializes() == before + 1
        narrow = await RawClient(setup.proxy.url, http, authorization=token(scope="other")).call(
            "echo", {"text": "x"}
        )
    assert narrow.status == 403
    params = challenge.parse(narrow.headers["WWW-Authenticate"])[0].params
    assert params["error"] == "insufficient_scope"
    assert params["resource_metadata"] == f"{PUBLIC}/.well-known/oauth-protected-resource/mcp"
    assert setup.initializes() == before + 2


async def test_the_proxy_serves_the_upstreams_metadata_for_its_routes(setup: Setup) -> None:
    base = setup.proxy.url.removesuffix("/mcp")
    async with aiohttp.ClientSession() as http:
        for path, resource in [
            ("/.well-known/oauth-protected-resource/mcp", f"{PUBLIC}/mcp"),
            ("/.well-known/oauth-protected-resource", f"{PUBLIC}/mcp"),
            ("/.well-known/oauth-protected-resource/servers/default/mcp", f"{PUBLIC}/servers/default/mcp"),
        ]:
            async with http.get(base + path) as resp:
                assert resp.status == 200, path
                doc = await resp.json()
            assert doc["resource"] == resource  # rewritten: clients compare it with the URL they called
            assert doc["authorization_servers"] == [ISS]  # the upstream's own, as it published it
            assert doc["scopes_supported"] == ["mcp"]


async def test_a_good_token_works_through_mrtr_rounds(setup: Setup) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(setup.proxy.url, http, authorization=token(sub="alice"))
        assert (await client.call("whoami")).result["content"][0]["text"] == "sub:alice"
        first = await client.call("ask_name")
        assert first.result["resultType"] == "input_required"
        final = await client.retry(first, {"elicit-1": accept_name("Alice")}, "ask_name")
    assert final.result["content"][0]["text"] == "accept:Alice"


async def test_a_legacy_client_is_challenged_the_same_way(setup: Setup) -> None:
    async with aiohttp.ClientSession() as http:
        headers = {"Accept": "application/json, text/event-stream"}
        async with http.post(setup.proxy.url, json=LEGACY_INIT, headers=headers) as resp:
            assert resp.status == 401
            params = challenge.parse(resp.headers["WWW-Authenticate"])[0].params
        assert params["resource_metadata"] == f"{PUBLIC}/.well-known/oauth-protected-resource/mcp"
        async with http.post(
            setup.proxy.url, json=LEGACY_INIT, headers={**headers, "Authorization": token()}
        ) as resp:
            assert resp.status == 200
            assert "Mcp-Session-Id" in resp.headers


async def test_server_discover_is_not_answered_from_the_cache_for_a_client_without_a_token(
    setup: Setup,
) -> None:
    """The proxy caches the upstream's initialize result; a protected upstream still judges every client."""
    async with aiohttp.ClientSession() as http:
        good = await RawClient(setup.proxy.url, http, authorization=token(jti="d")).request("server/discover")
        assert good.status == 200
        assert good.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "oauth-fixture"
        anonymous = await RawClient(setup.proxy.url, http).request("server/discover")
        assert anonymous.status == 401
        assert "resource_metadata=" in anonymous.headers["WWW-Authenticate"]


async def test_a_legacy_client_of_a_protected_sse_upstream_is_challenged(tmp_path: Path) -> None:
    """The bridge (sse upstream, its own session per legacy client) relays the upstream's 401 with the
    proxy's resource_metadata instead of a 502, and works with a good token."""
    keys = write_jwks(tmp_path / "jwks.json", jwks(KEY))
    async with (
        start_oauth_fastmcp(issuer=ISS, audience=f"{PUBLIC}/mcp", jwks_file=keys, transport="sse") as sse,
        running_proxy(sse, transport="sse", public_url=PUBLIC) as proxy,
        aiohttp.ClientSession() as http,
    ):
        headers = {"Accept": "application/json, text/event-stream"}
        async with http.post(proxy.url, json=LEGACY_INIT, headers=headers) as resp:
            assert resp.status == 401
            params = challenge.parse(resp.headers["WWW-Authenticate"])[0].params
        assert params["resource_metadata"] == f"{PUBLIC}/.well-known/oauth-protected-resource/mcp"
        async with http.post(
            proxy.url, json=LEGACY_INIT, headers={**headers, "Authorization": token()}
        ) as resp:
            assert resp.status == 200
            assert "Mcp-Session-Id" in resp.headers

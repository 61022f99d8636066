"""The full OAuth dance through the proxy, with nothing of ours on the other side: a real authorization
server (`oidc-provider` from npm, tests/fixtures/oidc_provider.mjs), a FastMCP 1.30 resource server that
accepts its JWT access tokens for the proxy's URL (pass-through mode, the migration case), and mcp==2.3.0's
`OAuthClientProvider` in 2026-07-28 mode: 401 → metadata discovery at the proxy → dynamic registration →
authorization code + PKCE with the resource indicator → token → an elicitation tool completes through MRTR
rounds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import peers
import pytest
import pytest_asyncio

from e2e.harness import running_proxy
from e2e.oauth_peers import start_oauth_fastmcp, start_oidc_provider
from e2e.recording import Recording, recording_relay

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

CLIENT = Path(__file__).parent / "clients" / "oauth_client.py"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def dance() -> AsyncIterator[tuple[str, Recording, str]]:
    port = peers.free_port()
    proxy_url = f"http://127.0.0.1:{port}/mcp"
    async with (
        start_oidc_provider() as issuer,
        start_oauth_fastmcp(
            issuer=issuer, audience=proxy_url, jwks_url=f"{issuer}/jwks", required_scope="mcp"
        ) as upstream,
        recording_relay(upstream) as relay,
        running_proxy(relay.url, port=port),
    ):
        yield proxy_url, relay, issuer


async def test_mcp_client_runs_the_whole_flow_through_the_proxy(dance: tuple[str, Recording, str]) -> None:
    url, upstream, _ = dance
    run = await peers.run_once([str(peers.client_python()), str(CLIENT), url], limit_s=90)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert "error" not in out, (out, run.stderr[-3000:])
    assert out["steps"][:3] == ["registered", "authorize", "token"]
    assert out["whoami"] == "sub:alice"
    assert out["ask_name"] == "accept:Alice"
    assert "elicit" in out["steps"]
    # What reached FastMCP: one initialize without a token (its 401 went to the client, with the proxy's
    # metadata URL), the proxy fetching FastMCP's metadata to serve it rewritten, then only bearer requests.
    unauthenticated = [s for s in upstream.posts("initialize") if "authorization" not in s.headers]
    assert len(unauthenticated) == 1
    assert any(
        s.method == "GET" and s.path == "/.well-known/oauth-protected-resource/mcp" for s in upstream.sent
    )
    assert all(s.headers.get("authorization", "").startswith("Bearer ") for s in upstream.posts("tools/call"))


TS_CLIENT = Path(__file__).parent / "clients" / "ts_oauth_client.mjs"


async def test_typescript_client_with_client_credentials(dance: tuple[str, Recording, str]) -> None:
    """The TS SDK v2 client's ClientCredentialsProvider: no user, no redirect; the token is for the service
    client, and the elicitation still goes through MRTR rounds."""
    url, _, issuer = dance
    run = await peers.run_once(
        [str(peers.node_bin()), str(TS_CLIENT), url, issuer, "ts-service", "ts-service-secret"], limit_s=60
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert "error" not in out, out
    assert out["whoami"] == "sub:ts-service"
    assert out["ask_name"] == "accept:Alice"
    statuses = [
        (w["http"], w["url"].removeprefix(url.removesuffix("/mcp")), w["status"]) for w in out["wire"]
    ]
    assert statuses[0][2] == 401  # the first request, unauthenticated
    assert ("GET", "/.well-known/oauth-protected-resource/mcp", 200) in statuses  # discovery at the proxy
    assert any(w["url"] == f"{issuer}/token" and w["status"] == 200 for w in out["wire"])

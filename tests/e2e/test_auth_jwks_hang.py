"""Validate mode with a JWKS endpoint that hangs (proxy/auth/jwks.py): one fetch in flight at a time, and a
request whose signing key is already known never waits for it (issue 29 item 17: with a hanging JWKS,
68 of 135 good requests once waited up to 9.8 s, each past the TTL starting or queueing for a fetch)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from oauth_keys import SigningKey, claims, jwks

from e2e.harness import RawClient, running_proxy
from proxy.config import AuthConfig, UpstreamConfig, UpstreamCredential

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ISS = "https://as.example.test"
RESOURCE = "https://mcp.example.test/mcp"
KEY = SigningKey("k1")


@dataclass
class HangingJwks:
    """Serves the JWKS once; then every GET hangs until `release` (or until the proxy hangs up)."""

    url: str = ""
    served: int = 0
    hanging: int = 0  # GETs held open right now
    most_at_once: int = 0
    hung_up: int = 0  # held GETs the proxy gave up on (its fetch timed out)
    release: asyncio.Event = field(default_factory=asyncio.Event)


@contextlib.asynccontextmanager
async def hanging_jwks() -> AsyncIterator[HangingJwks]:
    state = HangingJwks()

    async def serve(request: web.Request) -> web.Response:
        if state.served:
            state.hanging += 1
            state.most_at_once = max(state.most_at_once, state.hanging)
            try:
                async with asyncio.timeout(30):
                    while not state.release.is_set():
                        if request.transport is None or request.transport.is_closing():
                            state.hung_up += 1
                            break
                        await asyncio.sleep(0.02)  # the hostile JWKS server holds the fetch until released
            finally:
                state.hanging -= 1
        state.served += 1
        return web.json_response(jwks(KEY))

    app = web.Application()
    app.router.add_get("/jwks", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}/jwks"
    try:
        yield state
    finally:
        state.release.set()
        await runner.cleanup()


@pytest.mark.parametrize("min_refresh_s", [0, 2])
async def test_known_kids_never_wait_on_a_hanging_jwks_fetch(fastmcp_url: str, min_refresh_s: float) -> None:
    async with hanging_jwks() as keys:
        auth = AuthConfig(
            mode="validate",
            public_url=RESOURCE,
            authorization_servers=(ISS,),
            jwks_url=keys.url,
            jwks_cache_ttl_s=1,  # the smallest TTL: every request after the first second finds the keys stale
            jwks_min_refresh_s=min_refresh_s,
            upstream_credential=UpstreamCredential(source="none"),
        )
        up = UpstreamConfig(name="default", url=fastmcp_url, auth=auth)
        async with running_proxy(up) as proxy, aiohttp.ClientSession() as http:
            token = KEY.mint(claims(iss=ISS, aud=RESOURCE))
            good = RawClient(proxy.url, http, authorization=f"Bearer {token}")
            assert (await good.call("echo", {"text": "warm"})).status == 200  # the one fetch that answers
            await asyncio.sleep(1.2)  # past the TTL (not a timed assertion: it only ages the keys)
            stranger = SigningKey("nobody").mint(claims(iss=ISS, aud=RESOURCE))
            unknown = [
                asyncio.ensure_future(
                    RawClient(proxy.url, http, authorization=f"Bearer {stranger}").call("echo", {"text": "?"})
                )
                for _ in range(5)
            ]
            replies = []
            for wave in range(3):  # waves spread over the fetch, as a steady stream of users would be
                replies += await asyncio.gather(*(good.call("echo", {"text": f"{wave}"}) for _ in range(15)))
                await asyncio.sleep(0.3)  # the scenario: waves of users spread over the hung fetch
            assert all(r.status == 200 for r in replies), [r.status for r in replies]
            # Every good request was answered while the stale-keys fetch still hung, not after the proxy
            # gave up on it: none of them waited for it.
            assert keys.hanging == 1 and keys.hung_up == 0
            assert keys.most_at_once == 1  # one fetch in flight at a time
            keys.release.set()
            refused = await asyncio.gather(*unknown)
        assert all(r.status == 401 for r in refused)  # they waited for the fetch: the key is still unknown

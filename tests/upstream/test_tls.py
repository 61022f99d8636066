"""proxy/upstream/tls.py: an upstream with a TLS setting of its own gets an HTTP client of its own, and
that client keeps no cookies (it is shared by every user's sessions and calls to that upstream; the attack
itself is tests/e2e/test_upstream_cookies.py, on the shared client)."""

from __future__ import annotations

import ssl

import aiohttp
import pytest

from proxy.upstream.tls import context_of, tls_sessions

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_tls_upstreams_own_client_keeps_no_cookies() -> None:
    ctx = ssl.create_default_context()
    clients = tls_sessions({"private": ctx, "plain": None}, aiohttp.ClientTimeout(total=None))
    try:
        assert set(clients) == {"private"}  # the other shares the proxy's client
        assert context_of(clients["private"]) is ctx
        assert isinstance(clients["private"].cookie_jar, aiohttp.DummyCookieJar)
    finally:
        for client in clients.values():
            await client.close()

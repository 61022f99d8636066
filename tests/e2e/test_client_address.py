"""A client behind an ingress cannot choose its own address (issue 29, item 7), on the real proxy in front
of FastMCP 1.30: each attacker request carries a forwarded-for line of its own with a fresh address, and the
ingress's line or entry (what it saw: the one attacker). Before, behind HAProxy (a line of its own) only the
attacker's first line was read: every call got a fresh address and all 12 parked. Now the address share
(3 here) holds for each ingress form, and another client's calls still park."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import aiohttp
import pytest

from e2e.harness import RawClient, running_proxy
from proxy.config import FrontConfig, PoolConfig, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ATTACKER = "203.0.113.9"
OTHER = "198.51.100.7"
SHARE = 3
CALLS = 12
Lines = Callable[[int, str], list[tuple[str, str]]]

FORMS: dict[str, tuple[str, int, Lines]] = {
    # nginx `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`, Envoy: appended to the client's
    "nginx-envoy": ("X-Forwarded-For", 1, lambda i, real: [("X-Forwarded-For", f"6.6.{i}.6, {real}")]),
    # HAProxy `option forwardfor`: a second line after the client's own
    "haproxy": (
        "X-Forwarded-For",
        1,
        lambda i, real: [("X-Forwarded-For", f"6.6.{i}.6"), ("X-Forwarded-For", real)],
    ),
    # a Kubernetes ingress-nginx replaces the header with what it saw (the client's line never arrives)
    "ingress-nginx": ("X-Forwarded-For", 1, lambda i, real: [("X-Forwarded-For", real)]),
    # a cloud load balancer appends, then the ingress appends the balancer's address
    "lb-then-ingress": (
        "X-Forwarded-For",
        2,
        lambda i, real: [("X-Forwarded-For", f"6.6.{i}.6, {real}"), ("X-Forwarded-For", "10.0.0.2")],
    ),
    # RFC 7239, e.g. HAProxy `http-request add-header Forwarded for=%[src]`
    "forwarded": (
        "Forwarded",
        1,
        lambda i, real: [("Forwarded", f"for=6.6.{i}.6"), ("Forwarded", f'for="{real}:4711"')],
    ),
    # X-Real-IP added by an ingress after the client's own
    "x-real-ip": ("X-Real-IP", 1, lambda i, real: [("X-Real-IP", f"6.6.{i}.6"), ("X-Real-IP", real)]),
}


@pytest.mark.parametrize("form", list(FORMS))
async def test_a_spoofed_forwarded_line_does_not_multiply_the_address_share(
    fastmcp_url: str, form: str
) -> None:
    header, hops, lines = FORMS[form]
    upstream = UpstreamConfig(name="default", url=fastmcp_url, pool=PoolConfig(max_sessions=64))
    front = FrontConfig(client_address_header=header, trusted_hops=hops)
    async with (
        running_proxy(upstream, front=front, max_calls_per_address=SHARE) as proxy,
        aiohttp.ClientSession() as http,
    ):

        async def call(i: int, real: str) -> dict[str, object]:
            client = RawClient(proxy.url, http, authorization=f"Bearer minted-{real}-{i}")
            body = client.body("tools/call", {"name": "ask_name", "arguments": {}})
            headers = [*client.headers(body).items(), *lines(i, real)]  # repeated lines stay lines
            async with http.post(proxy.url, data=json.dumps(body), headers=headers) as resp:
                reply: dict[str, object] = await resp.json()
            return reply

        bodies = await asyncio.gather(*(call(i, ATTACKER) for i in range(CALLS)))
        parked = [b for b in bodies if "result" in b]
        refused = [b["error"] for b in bodies if "error" in b]
        assert len(parked) == SHARE, bodies
        assert all(e["code"] == -31003 and "calls.max_calls_per_address" in e["message"] for e in refused)  # type: ignore[index]
        assert proxy.parked == SHARE
        # Another client behind the same ingress still has its own share.
        other = await asyncio.gather(*(call(100 + i, OTHER) for i in range(SHARE)))
        assert all(b["result"]["resultType"] == "input_required" for b in other)  # type: ignore[index]

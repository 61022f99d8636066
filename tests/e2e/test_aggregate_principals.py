"""One aggregated route, two principals of different scopes (validate mode on the route, each client's own
token going upstream, the default): what one of them lists or calls must not change where the other's
calls by bare name go, nor what the other may call.

The route (`prefix_mode: never`) puts an OAuth-protected FastMCP 1.30
(tests/fixtures/protected_fastmcp_server.py, which accepts exactly one token: the admin's) before the
FastMCP 1.30 fixture; both serve `echo` and `ask_name`. For the admin both upstreams answer, so the
protected one, first in route order, keeps the names; for the other principal the protected one refuses
the token (it is left out of that principal's lists only), so FastMCP's tools are theirs. `ask_name`
needs the scope `admin` (the route's policy).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import peers
import pytest
from oauth_keys import SigningKey, claims, jwks
from structlog.testing import capture_logs

from e2e.harness import NO_ROOTS_CAPS, RawClient, accept_name, running_proxy
from e2e.oauth_peers import jwks_server
from e2e.test_aggregate import text_of
from proxy.config import AuthConfig, PrefixMode, RouteConfig, RouteMember, ToolPolicy, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

PROTECTED = peers.FIXTURES_DIR / "protected_fastmcp_server.py"
ISSUER = "https://as.example.test"
RESOURCE = "https://mcp.example.test/servers/team/mcp"
FAST_ECHO = "Return the text unchanged."  # the FastMCP fixture's description of its echo


@dataclass
class Team:
    url: str
    http: aiohttp.ClientSession
    tokens: dict[str, str]

    def client(self, who: str) -> RawClient:
        return RawClient(
            self.url, self.http, capabilities=dict(NO_ROOTS_CAPS), authorization=f"Bearer {self.tokens[who]}"
        )


@contextlib.asynccontextmanager
async def team(fastmcp_url: str, prefix_mode: PrefixMode = "never") -> AsyncIterator[Team]:
    """A fresh proxy (nothing indexed yet) in front of the two upstreams, and each principal's token."""
    key = SigningKey("k1")
    tokens = {
        who: key.mint(claims(iss=ISSUER, aud=RESOURCE, sub=who, scope=scope, ttl=600))
        for who, scope in (("admin", "mcp admin"), ("plain", "mcp"))
    }
    argv = [str(peers.legacy_python()), str(PROTECTED), "--host", "127.0.0.1", "--token", tokens["admin"]]
    async with contextlib.AsyncExitStack() as stack:
        peer = await stack.enter_async_context(
            peers.run_peer("protected-fastmcp", lambda port: [*argv, "--port", str(port)])
        )
        keys = await stack.enter_async_context(jwks_server())
        keys.document = jwks(key)
        auth = AuthConfig(
            mode="validate", public_url=RESOURCE, authorization_servers=(ISSUER,), jwks_url=keys.url
        )
        route = RouteConfig(
            "team",
            (RouteMember("guarded"), RouteMember("fast")),
            prefix_mode=prefix_mode,
            tools=ToolPolicy(require_scopes={"ask_name": ("admin",)}),
            auth=auth,
        )
        guarded = UpstreamConfig(name="guarded", url=f"http://127.0.0.1:{peer.port}/mcp")
        proxy = await stack.enter_async_context(
            running_proxy(fastmcp_url, names=("fast",), extra=(guarded,), routes=(route,))
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Team(proxy.url.replace("/mcp", "/servers/team/mcp"), http, tokens)


async def served_by(client: RawClient, tool: str, arguments: dict[str, Any]) -> tuple[str, Any]:
    """Call `tool`; the upstream the proxy's request line names, and the reply."""
    with capture_logs() as logs:
        reply = await client.call(tool, arguments)
    (line,) = [e for e in logs if e.get("event") == "request"]
    return line.get("upstream", ""), reply


async def echo_of(client: RawClient) -> dict[str, Any]:
    """The one `echo` of the principal's merged list."""
    tools = (await client.request("tools/list")).result["tools"]
    (echo,) = [t for t in tools if t["name"] == "echo"]
    return echo  # type: ignore[no-any-return]


@pytest.mark.parametrize("first", ["plain", "admin"])
async def test_one_principals_listing_does_not_route_anothers_call(fastmcp_url: str, first: str) -> None:
    """Whoever comes first, each principal's `echo` is the one its own view gives it: the admin's from the
    protected upstream (first in route order), the other's from FastMCP; in lists and in calls."""
    async with team(fastmcp_url) as t:
        order = [first, "admin" if first == "plain" else "plain"]
        expected = {"admin": "guarded", "plain": "fast"}
        for who in order + order:  # each again after the other has listed and called
            client = t.client(who)
            upstream, reply = await served_by(client, "echo", {"text": who})
            assert (upstream, text_of(reply)) == (expected[who], who), (who, order)
            echo = await echo_of(client)
            assert (echo.get("description") == FAST_ECHO) == (who == "plain"), (who, echo)


async def test_a_scope_rule_holds_on_every_call_whoever_listed_first(fastmcp_url: str) -> None:
    async with team(fastmcp_url) as t:
        admin, plain = t.client("admin"), t.client("plain")
        names = [tool["name"] for tool in (await admin.request("tools/list")).result["tools"]]
        assert "ask_name" in names
        asked = await admin.call("ask_name")
        assert asked.result["resultType"] == "input_required"
        done = await admin.retry(asked, {"elicit-1": accept_name("Root")}, "ask_name")
        assert text_of(done) == "accept:Root"
        plain_names = [tool["name"] for tool in (await plain.request("tools/list")).result["tools"]]
        assert "ask_name" not in plain_names and "echo" in plain_names
        upstream, refused = await served_by(plain, "ask_name", {})
        assert refused.error == {
            "code": -32602,
            "message": "Tool 'ask_name' needs the scope admin, which the access token lacks",
        }
        assert upstream == "fast"  # in this principal's own view; the message names no upstream

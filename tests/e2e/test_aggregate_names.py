"""Issue 41.2: on a route with tool rules, a called tool is resolved through what its member listed to this
client, and a spelling nobody listed is refused (`Unknown tool`) before anything goes upstream, so globs
are judged on the listed name, never on whatever the client typed.

The route `policy` puts the FastMCP 1.30 fixture (`mod`, seen through a recording relay, so the test sees
every request that reached it) before server-memory (`mem`, stdio); the route denies `mod__ask_*` and
`mod__side_effects`, and `mem` allows only `read_graph`. Each hostile spelling is sent by a 2026-07-28
client, by a legacy client through the mirror, and on the route reached by its `hosts:` name.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio

from e2e.harness import NO_ROOTS_CAPS, RawClient, running_proxy
from e2e.modern_scripted import ScriptedModern, scripted_modern
from e2e.recording import Recording, recording_relay
from e2e.test_aggregate import stdio, text_of
from e2e.test_aggregate_principals import team
from e2e.test_mirror import RawLegacy
from proxy.config import RouteConfig, RouteMember, ToolPolicy, UpstreamConfig
from proxy.front.modern.aggregate import lists as aggregate_lists

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

HOST = "policy.mcp.example"
# Spellings a loosely matching upstream could take for a denied tool, none of them listed: case, an extra
# separator, a Unicode hyphen (U+2010) and fullwidth letter (NFKC folds both), trailing whitespace, a
# zero-width space, the prefix in another case, a name only the other member lists, a doubled prefix.
HOSTILE = (
    "mod__ASK_NAME",
    "mod__Ask_name",
    "mod___ask_name",
    "mod__ask\u2010name",
    "mod__\uff41sk_name",
    "mod__ask_name ",
    "mod__ask_name\t",
    "mod__ask_name\u200b",
    "MOD__ask_name",
    "mod__Side_Effects",
    "mod__side-effects",
    "mod__read_graph",
    "mod__mod__ask_name",
    " mod__ask_name",
)


@dataclass
class Gate:
    url: str
    http: aiohttp.ClientSession
    mod: Recording

    def client(self, **kw: Any) -> RawClient:
        return RawClient(self.url, self.http, capabilities=dict(NO_ROOTS_CAPS), **kw)

    def reached(self) -> list[Any]:
        """The tool names of every `tools/call` that reached the FastMCP member."""
        return [sent.message["params"]["name"] for sent in self.mod.posts("tools/call")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def gate(fastmcp_url: str) -> AsyncIterator[Gate]:
    peers.require_peers({"server-memory": peers.server_memory_entry()})
    route = RouteConfig(
        "policy",
        (RouteMember("mod"), RouteMember("mem", tools=ToolPolicy(allow=("read_graph",)))),
        tools=ToolPolicy(deny=("mod__ask_*", "mod__side_effects")),
        hosts=(HOST,),
    )
    async with contextlib.AsyncExitStack() as stack:
        mod = await stack.enter_async_context(recording_relay(fastmcp_url))
        memory = stdio("mem", peers.server_memory_entry())
        proxy = await stack.enter_async_context(
            running_proxy(mod.url, names=("mod",), extra=(memory,), routes=(route,))
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Gate(proxy.url.replace("/mcp", "/servers/policy/mcp"), http, mod)


async def call(client: RawClient, name: str, host: str | None = None) -> Any:
    """`tools/call name` with its Mcp-Name header as the spec asks: base64-sentinel encoded when the name is
    not plain printable ASCII without edge whitespace (an HTTP header could not carry it as it is)."""
    body = client.body("tools/call", {"name": name, "arguments": {}})
    headers = client.headers(body)
    if not (name.isascii() and name.isprintable() and name == name.strip()):
        headers["Mcp-Name"] = f"=?base64?{base64.b64encode(name.encode()).decode()}?="
    if host is not None:
        headers["Host"] = host
    return await client.send(body, headers)


@pytest_asyncio.fixture(loop_scope="session")
async def upstream_lists() -> AsyncIterator[ScriptedModern]:
    async with scripted_modern() as server:
        server.lists = True
        yield server


def unknown(name: str) -> dict[str, Any]:
    return {"code": -32602, "message": f"Unknown tool: {name!r}"}


async def test_a_listed_name_is_judged_and_an_unlisted_spelling_never_goes_upstream(gate: Gate) -> None:
    client = gate.client()
    names = [tool["name"] for tool in (await client.request("tools/list")).result["tools"]]
    assert "mod__echo" in names and "mem__read_graph" in names
    assert not [n for n in names if n.startswith("mod__ask_") or n == "mod__side_effects"]
    before = len(gate.reached())
    for name in HOSTILE:
        reply = await call(client, name)
        assert reply.status == 200 and reply.error == unknown(name), (name, reply.error, reply.result)
    denied = await client.call("mod__ask_name")  # the listed spelling: judged, refused by the deny glob
    assert denied.error == {"code": -32602, "message": "Tool 'mod__ask_name' is not available on this route"}
    assert gate.reached()[before:] == []  # nothing of the above reached the upstream
    assert text_of(await client.call("mod__echo", {"text": "listed"})) == "listed"
    assert gate.reached()[before:] == ["echo"]  # the control: a listed, allowed name does go


async def test_a_legacy_client_through_the_mirror_is_held_to_the_listed_names(gate: Gate) -> None:
    legacy = RawLegacy(gate.url, gate.http)
    await legacy.initialize({})
    before = len(gate.reached())
    for name in ("mod__ASK_NAME", "mod__ask\u2010name", "mod__ask_name ", "mod___ask_name"):
        status, messages = await legacy.call(name)
        errors = [m["error"] for m in messages if "error" in m]
        assert status == 200 and errors == [unknown(name)], (name, messages)
    assert gate.reached()[before:] == []


async def test_the_routes_host_name_takes_the_same_rules(gate: Gate) -> None:
    """`hosts:` routes /mcp to the route: its rules and its listed names hold there too (issue 41.6)."""
    client = RawClient(
        gate.url.replace("/servers/policy/mcp", "/mcp"), gate.http, capabilities=dict(NO_ROOTS_CAPS)
    )
    before = len(gate.reached())

    for name in ("mod__ask_name", "mod__ASK_NAME", "ask_name", "mod__ask_name "):
        reply = await call(client, name, f"{HOST}:443")
        assert reply.error is not None and reply.error["code"] == -32602, (name, reply.result)
    assert gate.reached()[before:] == []  # neither the route's names nor the member's own went around it


async def test_stale_names_after_list_changed_are_refused(gate: Gate) -> None:
    """A name is resolved through the member's list as it is now: after a `list_changed` the index is built
    again, so a name no longer (or never) listed does not go upstream on the strength of an old list."""
    client = gate.client()
    await client.request("tools/list")
    changed = await client.call("mod__change_tools")  # FastMCP says its tools changed (the same tools)
    assert "error" not in changed.body, changed.body
    before = len(gate.reached())
    for name in ("mod__Echo", "mod__echo "):
        assert (await call(client, name)).error == unknown(name)
    assert text_of(await client.call("mod__echo", {"text": "again"})) == "again"
    assert gate.reached()[before:] == ["echo"]


async def test_a_scope_rule_is_judged_on_the_listed_name_for_each_principal(fastmcp_url: str) -> None:
    """Validate mode, `require_scopes: {ask_name: [admin]}` on a `prefix_mode: never` route: the plain
    principal's other spellings of `ask_name` are unknown to it, not sent to FastMCP to be judged there."""
    async with team(fastmcp_url) as t:
        plain = t.client("plain")
        await plain.request("tools/list")
        for name in ("ASK_NAME", "ask_name ", "Ask_name", "ask\u2010name", "\uff41sk_name"):
            reply = await call(plain, name)
            assert reply.error == unknown(name), (name, reply.error, reply.result)
        refused = await plain.call("ask_name")
        assert refused.error == {
            "code": -32602,
            "message": "Tool 'ask_name' needs the scope admin, which the access token lacks",
        }


async def test_host_names_never_reach_a_route_only_member_around_the_policy(fastmcp_url: str) -> None:
    """Issue 41.6: `mod` serves only through the route (`standalone: false`), yet carries a host name of its
    own (check-config refuses that; a Config built in code does not): no Host header, with or without the
    route's path or the route's host, reaches `mod` but through the route's rules."""
    peers.require_peers({"server-memory": peers.server_memory_entry()})
    route = RouteConfig(
        "policy",
        (RouteMember("mod"), RouteMember("mem")),
        tools=ToolPolicy(deny=("mod__ask_*",)),
        hosts=(HOST,),
    )
    async with contextlib.AsyncExitStack() as stack:
        mod = await stack.enter_async_context(recording_relay(fastmcp_url))
        hidden = UpstreamConfig(name="mod", url=mod.url, standalone=False, hosts=("mod.example",))
        memory = stdio("mem", peers.server_memory_entry())
        proxy = await stack.enter_async_context(
            running_proxy(hidden, names=("mod",), extra=(memory,), routes=(route,))
        )
        http = await stack.enter_async_context(aiohttp.ClientSession())
        base = proxy.url.removesuffix("/mcp")
        tried: list[tuple[str, str, Any]] = []
        for path, host in (
            ("/mcp", "mod.example"),
            ("/mcp", "MOD.example:8443"),
            ("/servers/mod/mcp", HOST),
            ("/servers/mod/mcp", "mod.example"),
            ("/mcp", f"{HOST}."),  # not the route's name (a trailing dot): the default, `mem`
            ("/mcp", "[::1]"),
        ):
            client = RawClient(base + path, http, capabilities=dict(NO_ROOTS_CAPS))
            reply = await call(client, "ask_name", host)
            tried.append((path, host, reply.status))
        # The member's own host and path are nobody's (404); a host the table does not know is the default
        # route, here the standalone `mem`, which has no `ask_name`.
        assert [status for _, _, status in tried] == [404, 404, 404, 404, 200, 200], tried
        for host in (HOST, HOST.upper() + ":443"):
            client = RawClient(base + "/mcp", http, capabilities=dict(NO_ROOTS_CAPS))
            for name in ("mod__ask_name", "mod__ASK_NAME", "ask_name"):
                reply = await call(client, name, host)
                assert reply.error["code"] == -32602, (host, name, reply.body)
        assert [s.message["params"]["name"] for s in mod.posts("tools/call")] == [], tried


async def test_a_name_listed_to_another_principal_only_is_unknown_to_this_one(fastmcp_url: str) -> None:
    """Prefixed names: the protected member lists its tools to the admin only (it refuses the other
    principal's token), so for the other principal `guarded__echo` is no tool at all: refused as unknown
    by the proxy, not sent to the protected member with that principal's token."""
    async with team(fastmcp_url, prefix_mode="always") as t:
        admin, plain = t.client("admin"), t.client("plain")
        admin_names = [tool["name"] for tool in (await admin.request("tools/list")).result["tools"]]
        plain_names = [tool["name"] for tool in (await plain.request("tools/list")).result["tools"]]
        assert "guarded__echo" in admin_names and "fast__echo" in plain_names
        assert not [n for n in plain_names if n.startswith("guarded__")]
        for name in ("guarded__echo", "guarded__ask_name", "GUARDED__echo"):
            reply = await call(plain, name)
            assert reply.status == 200 and reply.error == unknown(name), (name, reply.status, reply.body)
        echoed = await admin.call("guarded__echo", {"text": "mine"})
        assert text_of(echoed) == "mine"


async def test_a_name_the_member_dropped_without_saying_so_is_refused_once_the_index_is_old(
    upstream_lists: ScriptedModern, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scripted 2026-07-28 member lists one tool, `page-<n>`, a new name at each list request, and never
    says its list changed. Once the route's index of who listed what is older than INDEX_TTL (0 here, and
    the refresh limit 0), a lookup builds it again: `page-1`, listed once, is then unknown, not sent on the
    strength of an old list."""
    monkeypatch.setattr(aggregate_lists, "INDEX_TTL", 0.0)
    monkeypatch.setattr(aggregate_lists, "REFRESH_EVERY", 0.0)
    modern = UpstreamConfig(name="mod", url=upstream_lists.url, forward_headers=(), era="modern")
    route = RouteConfig("r", (RouteMember("mod"),), tools=ToolPolicy(deny=("secret*",)), list_cache_ms=0)
    async with (
        running_proxy(modern, names=("mod",), routes=(route,)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url.replace("/mcp", "/servers/r/mcp"), http, authorization="Bearer a")
        first = await call(client, "page-1")  # the index is built for it: page-1 listed, the call goes on
        assert first.error == {"code": -32602, "message": "Unknown tool"}  # the member's own answer
        calls = len([m for m in upstream_lists.seen if m["method"] == "tools/call"])
        again = await call(client, "page-1")  # the index is old: built again, page-2 is listed now
        assert again.error == unknown("page-1")
        assert len([m for m in upstream_lists.seen if m["method"] == "tools/call"]) == calls

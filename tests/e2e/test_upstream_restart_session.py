"""Issue 41 #3: an upstream restarted between requests is noticed however it says the session is gone.
server-everything (the TypeScript SDK v1's example transport) answers a request on a session it does not
know with HTTP 400 "Bad Request: No valid session ID provided", not the spec's 404; FastMCP 1.30 and 2.14
(the mcp Python SDK underneath) answer 404 "Session not found". Either way the pooled session that sat idle
through the restart is dropped and the request is sent once more on a new session: the next list or call
works, and a call's first round never asks the client a roots/list the dead process sent."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp
import peers
import pytest
from aiohttp import web
from structlog.testing import capture_logs
from waiting import eventually

from e2e.harness import NO_ROOTS_CAPS, RawClient, accept_name, running_proxy
from e2e.hostile import Call, HostileServer, hostile_server, result
from proxy.config import RouteConfig, RouteMember, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

Start = Callable[[int], AbstractAsyncContextManager[Any]]
SERVERS: dict[str, tuple[Start, str, str, dict[str, Any], str]] = {
    # name: (start on a port, path, tool, its arguments, the text it answers)
    "server-everything": (
        lambda port: peers.start_server_everything(port=port),
        "/mcp",
        "echo",
        {"message": "back"},
        "Echo: back",
    ),
    "fastmcp-1.30": (lambda port: peers.start_fastmcp(port=port), "/mcp", "echo", {"text": "back"}, "back"),
    "fastmcp-2.14": (lambda port: peers.start_fastmcp2(port=port), "/mcp", "echo", {"text": "back"}, "back"),
}


def _text(reply: Any) -> str:
    assert reply.status == 200 and "result" in reply.body, reply.body
    return str(reply.result["content"][0]["text"])


async def _answer_roots(client: RawClient, reply: Any, tool: str, arguments: dict[str, Any]) -> Any:
    """A round that asks for roots (the server's start-up roots/list, held for the first call) answered."""
    while reply.status == 200 and reply.body.get("result", {}).get("resultType") == "input_required":
        asked = reply.result["inputRequests"]
        assert all(r["method"] == "roots/list" for r in asked.values()), asked
        responses = {key: {"roots": [{"uri": "file:///tmp/here", "name": "here"}]} for key in asked}
        reply = await client.call(
            tool, arguments, inputResponses=responses, requestState=reply.result["requestState"]
        )
    return reply


@pytest.mark.parametrize("server", sorted(SERVERS))
async def test_an_idle_pooled_session_is_replaced_after_a_restart_on_the_next_list_and_call(
    server: str,
) -> None:
    start, path, tool, arguments, said = SERVERS[server]
    port = peers.free_port()
    url = f"http://127.0.0.1:{port}{path}"
    async with aiohttp.ClientSession() as http:
        async with start(port):
            proxy_cm = running_proxy(url)
            proxy = await proxy_cm.__aenter__()
            try:
                plain = RawClient(proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))
                rooted = RawClient(proxy.url, http)  # declares roots: its own pooled session
                # Both list (each opens its pooled session; server-everything then asks the rooted one's
                # client for roots at start-up: held for its next call); only the plain one calls.
                with capture_logs() as seen:
                    for client in (plain, rooted):
                        assert (await client.request("tools/list")).result["resultType"] == "complete"
                    assert _text(await plain.call(tool, arguments)) == said
                    if server == "server-everything":  # it asks 350 ms after initialize: wait till held
                        await eventually(
                            lambda: any(e["event"] == "upstream.roots_held" for e in seen),
                            "the upstream.roots_held line",
                        )
            except BaseException:
                await proxy_cm.__aexit__(None, None, None)
                raise
        try:
            async with start(port):  # the same address, a new process: it knows none of the old sessions
                # The rooted client calls first: its session holds a roots/list from the dead process,
                # which must never reach it; then it lists. The plain one lists first, then calls.
                first = await rooted.call(tool, arguments)
                assert _text(await _answer_roots(rooted, first, tool, arguments)) == said
                for client in (rooted, plain):
                    listed = await client.request("tools/list")
                    assert listed.status == 200 and "result" in listed.body, listed.body
                    assert tool in [t["name"] for t in listed.result["tools"]]
                    reply = await client.call(tool, arguments)
                    assert _text(await _answer_roots(client, reply, tool, arguments)) == said
        finally:
            await proxy_cm.__aexit__(None, None, None)


async def test_a_route_lists_and_calls_both_restarted_members_and_readyz_agrees() -> None:
    """The same on an aggregated route over server-everything and FastMCP 1.30, both restarted on their
    ports between requests: the route's next list has both members (before the change server-everything
    was "left out" of every list for as long as the client kept listing, while /readyz called it reachable),
    /readyz says both are listed, and each member's tool runs. A call parked on FastMCP through the restart
    (a busy session) gets a clear error on its retry, and the route goes on."""
    fast_port, every_port = peers.free_port(), peers.free_port()
    fast_url, every_url = f"http://127.0.0.1:{fast_port}/mcp", f"http://127.0.0.1:{every_port}/mcp"
    route = RouteConfig("both", (RouteMember("fast"), RouteMember("everything")))
    extra = (UpstreamConfig(name="everything", url=every_url),)
    async with aiohttp.ClientSession() as http:
        async with peers.start_fastmcp(port=fast_port), peers.start_server_everything(port=every_port):
            proxy_cm = running_proxy(fast_url, names=("fast",), extra=extra, routes=(route,))
            proxy = await proxy_cm.__aenter__()
            try:
                client = RawClient(proxy.url.replace("/mcp", "/servers/both/mcp"), http, dict(NO_ROOTS_CAPS))
                names = [t["name"] for t in (await client.request("tools/list")).result["tools"]]
                assert {"fast__echo", "everything__echo"} <= set(names)
                parked = await client.call("fast__ask_name")
                assert parked.result["resultType"] == "input_required", parked.body
            except BaseException:
                await proxy_cm.__aexit__(None, None, None)
                raise
        try:
            async with peers.start_fastmcp(port=fast_port), peers.start_server_everything(port=every_port):
                listed = await client.request("tools/list")
                names = [t["name"] for t in listed.result["tools"]]
                assert {"fast__echo", "everything__echo"} <= set(names), listed.body
                async with http.get(proxy.url.replace("/mcp", "/readyz")) as resp:
                    ready = await resp.json()
                assert ready["routes"]["both"]["upstreams"] == {"fast": "listed", "everything": "listed"}, (
                    ready
                )
                assert _text(await client.call("everything__echo", {"message": "back"})) == "Echo: back"
                assert _text(await client.call("fast__echo", {"text": "back"})) == "back"
                lost = await client.retry(parked, {"elicit-1": accept_name("late")}, "fast__ask_name")
                assert lost.error["code"] == -31001 and "not re-run" in lost.error["message"], lost.body
                again = await client.call("fast__ask_name")
                done = await client.retry(again, {"elicit-1": accept_name("Again")}, "fast__ask_name")
                assert _text(done) == "accept:Again"
        finally:
            await proxy_cm.__aexit__(None, None, None)


async def test_a_call_refused_before_it_ran_says_so_and_is_sent_again_only_for_a_forgotten_session() -> None:
    """Hostile scripted upstream: a 400 that names no session (a refusal of the request itself) fails the
    call once, worded as not run and safe to send again (before: "Upstream failed during the call …; it was
    not re-run", which reads as a tool that may have run); a 400 in server-everything's words for a session
    it does not know makes the proxy open a new session and send the call there, where it runs once."""
    calls: list[str] = []

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        calls.append(call.request.headers.get("Mcp-Session-Id", ""))
        words = (
            "Bad Request: No valid session ID provided" if len(calls) == 2 else "Bad Request: bad arguments"
        )
        if len(calls) <= 2:
            error = {"jsonrpc": "2.0", "error": {"code": -32000, "message": words}, "id": None}
            return web.json_response(error, status=400)
        return web.json_response(result(call.id, f"ran on call {len(calls)}"))

    async with (
        hostile_server(on_call) as server,
        running_proxy(server.url) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, capabilities=dict(NO_ROOTS_CAPS))
        refused = await client.call("attack")
        assert refused.error == {
            "code": -31001,
            "message": "Upstream did not run the call (upstream answered HTTP 400); "
            "it is safe to send it again",
        }, refused.body
        assert len(calls) == 1  # a refusal is not sent again by the proxy
        assert _text(await client.call("attack")) == "ran on call 3"  # the forgotten session: sent again once
        assert len(calls) == 3

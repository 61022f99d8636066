"""A client that hangs up mid-request is traced, never called a bug (issue 29 items 10 and 11).

Every room the endpoint hands a request to, in front of FastMCP 1.30: a 2026-07-28 call, a legacy client
relayed to a Streamable HTTP upstream, a legacy client bridged to an HTTP+SSE upstream, a listen stream, and a
retry forwarded between two real replicas. The client hangs up while its answer is pending; the request still
gets its one canonical line (`outcome: client_gone`, status 499, or a listen stream's `client_closed`) and is
counted in `/metrics`, and nothing is logged at error level. Both ways aiohttp can notice the hang-up are
covered: with handler cancellation (how `mrtr-proxy serve` runs: the handler's task is cancelled) and without
(the aiohttp default: the handler runs on and its next write to the gone connection raises).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs
from waiting import eventually

from e2e.harness import RawClient, running_proxy
from e2e.replicas import cluster, log_lines, url_of
from proxy.config import FrontConfig
from proxy.wire import mcp

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

LEGACY = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
LIMIT_S = 15.0  # every wait here is bounded by this
# Without handler cancellation a stream notices its client is gone at its next write: keep-alives come soon.
KEEPALIVES = FrontConfig(keepalive_s=0.2)


def request_lines(logs: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [entry for entry in logs if entry.get("event") == "request"]


def errors(logs: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in logs if e.get("log_level", e.get("level")) in ("error", "critical", "exception")]


async def gone_count(http: aiohttp.ClientSession, mcp_url: str, method: str | None) -> float:
    """The hang-ups counted for `method` (None: a GET stream, which names none)."""
    async with http.get(mcp_url.rsplit("/mcp", 1)[0] + "/metrics") as resp:
        text = await resp.text()
    label = re.escape(method or "none")
    pattern = rf'mrtr_proxy_requests_total\{{method="{label}",outcome="(client_gone|client_closed)"'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if re.match(pattern, line))


@contextlib.asynccontextmanager
async def legacy_session(http: aiohttp.ClientSession, url: str) -> AsyncIterator[dict[str, str]]:
    """A legacy (2025-06-18) client's session through the proxy: the headers of its next requests."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "hangup", "version": "1"},
        },
    }
    headers = {"Accept": ACCEPT, "Content-Type": "application/json", "MCP-Protocol-Version": LEGACY}
    async with http.post(url, json=init, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()
        session = {**headers, mcp.SESSION_HEADER: resp.headers[mcp.SESSION_HEADER]}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=note, headers=session) as resp:
        assert resp.status == 202
    yield session


async def hang_up_after_first_chunk(http: aiohttp.ClientSession, url: str, body: Any, headers: Any) -> None:
    """POST, read the first bytes of the answer, then drop the connection (as a client that timed out)."""
    resp = await http.post(url, json=body, headers=headers)
    assert resp.status == 200
    await asyncio.wait_for(resp.content.readany(), LIMIT_S)
    resp.close()  # closes the connection with the answer still coming


async def hang_up_legacy_call(http: aiohttp.ClientSession, url: str) -> None:
    """A legacy client's tools/call streaming progress for 2 s: gone after the first event."""
    async with legacy_session(http, url) as session:
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "progress_steps", "arguments": {"steps": 40}, "_meta": {"progressToken": "p"}},
        }
        await hang_up_after_first_chunk(http, url, call, session)


async def hang_up_modern_call(http: aiohttp.ClientSession, url: str) -> None:
    """A 2026-07-28 tools/call of a tool that takes 3 s: the client gives up after 0.3 s."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(RawClient(url, http).call("slow_echo", {"text": "late", "delay_s": 3}), 0.3)


async def hang_up_listen(http: aiohttp.ClientSession, url: str) -> None:
    """A listen stream, ended by its client after the acknowledgement."""
    client = RawClient(url, http)
    body = client.body("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    await hang_up_after_first_chunk(http, url, body, client.headers(body))


async def hang_up_legacy_stream(http: aiohttp.ClientSession, url: str) -> None:
    """A legacy client's standalone GET stream, closed by its client once open (its ordinary end)."""
    async with legacy_session(http, url) as session:
        resp = await http.get(url, headers={**session, "Accept": "text/event-stream"})
        assert resp.status == 200, await resp.text()
        resp.close()


ROOMS: dict[str, tuple[str, Callable[[aiohttp.ClientSession, str], Any], str | None, str]] = {
    # room: (upstream transport, the hang-up, its method, the line's outcome)
    "modern-call": ("streamable-http", hang_up_modern_call, "tools/call", "client_gone"),
    "legacy-relay": ("streamable-http", hang_up_legacy_call, "tools/call", "client_gone"),
    "legacy-bridge": ("sse", hang_up_legacy_call, "tools/call", "client_gone"),
    "listen": ("streamable-http", hang_up_listen, "subscriptions/listen", "client_closed"),
    "legacy-relay-stream": ("streamable-http", hang_up_legacy_stream, None, "client_closed"),
    "legacy-bridge-stream": ("sse", hang_up_legacy_stream, None, "client_closed"),
}


@pytest.mark.parametrize("cancelled", [True, False], ids=["handler-cancellation", "aiohttp-default"])
@pytest.mark.parametrize("room", list(ROOMS))
async def test_a_hang_up_gets_its_line_and_its_count_and_no_error(
    room: str, cancelled: bool, fastmcp_url: str, fastmcp_sse_url: str
) -> None:
    transport, hang_up, method, outcome = ROOMS[room]
    if room == "modern-call" and not cancelled:
        pytest.skip("without handler cancellation a JSON answer is written after the line: nothing to see")
    upstream = fastmcp_sse_url if transport == "sse" else fastmcp_url
    with capture_logs() as logs:
        async with (
            running_proxy(
                upstream, transport=transport, handler_cancellation=cancelled, front=KEEPALIVES
            ) as proxy,
            aiohttp.ClientSession() as http,
        ):
            before = await gone_count(http, proxy.url, method)
            await hang_up(http, proxy.url)

            def the_line() -> Mapping[str, Any] | None:
                lines = [
                    e
                    for e in request_lines(logs)
                    if e.get("method") == method and (method or e.get("http_method") == "GET")
                ]
                return lines[-1] if lines and lines[-1].get("outcome") in (outcome, "client_gone") else None

            seen = lambda: f"{request_lines(logs)[-2:]}; errors: {[e.get('event') for e in errors(logs)]}"  # noqa: E731
            line = await eventually(the_line, f"the {method or 'GET'} line of the hang-up", seen=seen)
            assert line["outcome"] == outcome, line
            if outcome == "client_gone":
                assert line["status"] == 499, line
                assert line["duration_ms"] > 0, line
            assert await gone_count(http, proxy.url, method) == before + 1
    assert errors(logs) == [], errors(logs)


async def test_a_hang_up_on_a_forwarded_retry_is_traced_on_both_replicas(fastmcp_url: str) -> None:
    """The client gives up on a retry that its replica forwarded to the call's owner: the forwarder's line
    says `client_gone` (with the owner), and so does the owner's line for the forwarded request."""
    async with (
        cluster(fastmcp_url, 2, peer_ports=True) as group,
        aiohttp.ClientSession() as http,
    ):
        owner, other = group.replicas
        args = {"delay_s": 0, "after_s": 3}  # the tool works 3 s after its answer arrives
        first = await RawClient(url_of(owner), http).call("work_then_ask", args)
        assert first.result["resultType"] == "input_required", first.body
        retry = RawClient(url_of(other), http).retry(
            first, {"elicit-1": {"action": "accept", "content": {"name": "Gone"}}}, "work_then_ask", args
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(retry, 0.5)

        def gone(replica: Any) -> list[dict[str, Any]]:
            return [
                line
                for line in log_lines(replica)
                if line.get("event") == "request" and line.get("outcome") == "client_gone"
            ]

        forwarder = (await eventually(lambda: gone(other), "the forwarder's line"))[0]
        assert forwarder["owner"] == f"127.0.0.1:{group.peer_ports[0]}", forwarder
        assert forwarder["method"] == "tools/call" and forwarder["status"] == 499, forwarder
        served = (await eventually(lambda: gone(owner), "the owner's line"))[0]
        assert served["forwarded_by"] == f"127.0.0.1:{group.peer_ports[1]}", served
        for replica in (owner, other):
            assert [x for x in log_lines(replica) if x.get("level") == "error"] == [], json.dumps(
                log_lines(replica)
            )

"""Hostile upstreams: a scripted server (hostile.py) attacks the proxy, run as a real process, while a second,
healthy upstream (FastMCP 1.30) keeps being called through it.

For each attack: the proxy's memory stays well under the flood (its peak RSS, VmHWM, so a spike freed
again still counts), the affected call ends with a clear JSON-RPC error within a bounded wait (never at
`call_timeout_s`), calls to the healthy upstream keep completing meanwhile, and no answer is an HTTP 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import peers
import pytest
from aiohttp import web
from waiting import eventually

from e2e.harness import RawClient, Reply, accept_name
from e2e.hostile import (
    Call,
    HostileServer,
    MiB,
    OnCall,
    ProxyProcess,
    elicit,
    event,
    hold,
    hostile_server,
    open_sse,
    proxy_in_front,
    result,
    write_flood,
)
from e2e.replicas import log_lines, replica_set, url_of

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

FLOOD = 200 * MiB  # each byte flood: far over the 16 MiB limit
MEMORY_BOUND_MB = 80  # what the proxy may grow by (at its peak) under any one attack: well under FLOOD
BOUND_S = 30  # the affected call has failed well before this (call_timeout_s is 60)
LIMIT = "upstream sent a message larger than 16777216 bytes (upstreams[].max_message_bytes)"


@dataclass
class Healthy:
    """Calls to the healthy upstream (and the proxy's own ping) made while an attack runs."""

    replies: list[Reply] = field(default_factory=list)
    slowest_s: float = 0.0  # the longest any of them took (printed for the record, never asserted)


@contextlib.asynccontextmanager
async def healthy_traffic(proxy: ProxyProcess, http: aiohttp.ClientSession) -> AsyncIterator[Healthy]:
    """Keep calling the healthy upstream until the block ends; each call and ping must succeed."""
    healthy = Healthy()
    client = RawClient(f"{proxy.base}/servers/healthy/mcp", http)
    own = RawClient(f"{proxy.base}/mcp", http)
    stop = asyncio.Event()

    async def loop() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            started = time.monotonic()
            healthy.replies.append(await client.call("echo", {"text": f"still here {n}"}))
            healthy.replies.append(await own.request("ping"))
            healthy.slowest_s = max(healthy.slowest_s, time.monotonic() - started)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await stop.wait()

    task = asyncio.ensure_future(loop())
    try:
        yield healthy
    finally:
        stop.set()
        async with asyncio.timeout(BOUND_S):
            await task
        print(f"healthy calls: {len(healthy.replies) // 2}, slowest call + ping {healthy.slowest_s:.2f}s")
    assert len(healthy.replies) >= 2
    for reply in healthy.replies:
        assert reply.status == 200, reply
        assert "result" in reply.body, reply.body


@dataclass
class Attack:
    proxy: ProxyProcess
    server: HostileServer
    client: RawClient
    baseline_mb: float


@contextlib.asynccontextmanager
async def under_attack(
    on_call: OnCall, fastmcp_url: str, tmp_path: Path, **calls: object
) -> AsyncIterator[Attack]:
    async with (
        hostile_server(on_call) as server,
        proxy_in_front(server.url, fastmcp_url, tmp_path, **calls) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(f"{proxy.base}/mcp", http)
        for _ in range(5):  # warm up: both upstreams' sessions, the code paths a request takes
            assert (await client.request("tools/list")).status == 200
            healthy = await RawClient(f"{proxy.base}/servers/healthy/mcp", http).call("echo", {"text": "w"})
            assert healthy.result["content"][0]["text"] == "w"
        attack = Attack(proxy, server, client, proxy.rss_mb())
        try:
            async with healthy_traffic(proxy, http):
                yield attack
        finally:
            print(f"proxy RSS {attack.baseline_mb:.0f} MB before, peak {proxy.peak_mb():.0f} MB")
        grown = proxy.peak_mb() - attack.baseline_mb
        assert grown < MEMORY_BOUND_MB, f"the proxy grew by {grown:.0f} MB at its peak"
        assert not [e for e in proxy.log_events() if e.get("event") == "request.unhandled"]


async def bounded(reply: Awaitable[Reply]) -> Reply:
    started = time.monotonic()
    async with asyncio.timeout(BOUND_S):
        got = await reply
    print(f"answered in {time.monotonic() - started:.2f}s: {got.status} {str(got.body)[:120]}")
    assert got.status != 500, str(got.body)[:200]
    assert "error" in got.body or "result" in got.body, str(got.body)[:200]
    return got


# -- item 1: a JSON body over the limit ----------------------------------------------------------------------


@pytest.mark.parametrize("announced", [False, True], ids=["chunked", "content-length"])
async def test_a_huge_json_answer_fails_the_call_without_reading_it(
    fastmcp_url: peers.PeerUrl, tmp_path: Path, announced: bool
) -> None:
    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if announced:
            resp.content_length = FLOOD + 100
        await resp.prepare(call.request)
        head = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"' % call.id
        await write_flood(resp, head, FLOOD, b'"}]}}')
        return resp

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        reply = await bounded(attack.client.call("attack"))
        assert reply.status == 200
        assert "error" in reply.body, str(reply.body)[:200]  # not the 200 MB answer
        assert reply.error["code"] == -31001
        assert LIMIT in reply.error["message"]
        # The upstream's other sessions and the next call are unaffected.
        assert (await bounded(attack.client.request("tools/list"))).result["tools"][0]["name"] == "attack"


# -- item 3: an SSE line over the limit on a POST's stream ---------------------------------------------------


async def test_an_sse_line_over_the_limit_fails_the_call_at_once(
    fastmcp_url: peers.PeerUrl, tmp_path: Path
) -> None:
    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        await write_flood(resp, b"data: ", FLOOD)  # never a line break
        return resp

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        reply = await bounded(attack.client.call("attack"))
        assert reply.error["code"] == -31001
        assert LIMIT in reply.error["message"]
        assert (await bounded(attack.client.request("tools/list"))).status == 200


async def test_an_sse_event_over_the_limit_in_many_lines_fails_the_call(
    fastmcp_url: peers.PeerUrl, tmp_path: Path
) -> None:
    line = b"data: " + b"a" * (MiB - 7) + b"\n"

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        with contextlib.suppress(ConnectionError):
            for _ in range(FLOOD // MiB):  # one event of 200 data lines, never dispatched
                await resp.write(line)
        return resp

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        reply = await bounded(attack.client.call("attack"))
        assert reply.error["code"] == -31001
        assert LIMIT in reply.error["message"]


# -- item 2: long request ids, crowded rounds ----------------------------------------------------------------


async def test_a_server_request_with_a_long_id_round_trips(
    fastmcp_url: peers.PeerUrl, tmp_path: Path
) -> None:
    long_id = "id-" + "x" * 5000

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        await resp.write(event(elicit(long_id)))
        await server.wait_for(lambda: any(a.get("id") == long_id for a in server.answers), "the answer")
        answer = next(a for a in server.answers if a.get("id") == long_id)
        await resp.write(event(result(call.id, "hello " + answer["result"]["content"]["name"])))
        return resp

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        first = await bounded(attack.client.call("attack"))
        assert first.status == 200
        assert first.result["resultType"] == "input_required"
        (key,) = first.result["inputRequests"]
        final = await bounded(attack.client.retry(first, {key: accept_name("Ann")}, "attack"))
        assert final.result["content"][0]["text"] == "hello Ann"


async def test_a_long_session_id_and_event_id_round_trip(fastmcp_url: peers.PeerUrl, tmp_path: Path) -> None:
    """Both go into the handle too: the session as its digest, the event id not at all (no takeover)."""

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        await resp.write(b"id: " + b"e" * 1000 + b"\n" + event(elicit(7)))
        await server.wait_for(lambda: any(a.get("id") == 7 for a in server.answers), "the answer")
        await resp.write(event(result(call.id, "fine")))
        return resp

    async with (
        hostile_server(on_call, session_id="s" * 1000) as server,
        proxy_in_front(server.url, fastmcp_url, tmp_path) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(f"{proxy.base}/mcp", http)
        first = await bounded(client.call("attack"))
        assert first.result["resultType"] == "input_required"
        final = await bounded(client.retry(first, {"elicit-1": accept_name()}, "attack"))
        assert final.result["content"][0]["text"] == "fine"


async def test_more_requests_in_one_round_than_a_handle_carries_fail_the_call_cleanly(
    fastmcp_url: peers.PeerUrl, tmp_path: Path
) -> None:
    asked = 65

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        await resp.write(b"".join(event(elicit(f"q-{i}")) for i in range(asked)))
        return await hold(resp)

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        reply = await bounded(attack.client.call("attack"))
        assert reply.status == 200
        assert reply.error["code"] == -31003
        assert reply.error["message"].startswith("Too many input requests: the upstream asked more than 64")
        server = attack.server
        # The upstream is told: the call is cancelled, and no request of it is left waiting.
        await server.wait_for(
            lambda: any(n["method"] == "notifications/cancelled" for n in server.notifications), "a cancel"
        )
        await server.wait_for(
            lambda: {a["id"] for a in server.answers} == {f"q-{i}" for i in range(asked)}, "every answer"
        )
        assert {a["result"]["action"] for a in server.answers} == {"cancel"}


# -- item 4: a flood of server requests ----------------------------------------------------------------------


async def test_a_flood_on_the_get_stream_is_refused_past_the_bound(
    fastmcp_url: peers.PeerUrl, tmp_path: Path
) -> None:
    flood, padding = 10_000, 10_000  # 100 MB of requests

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        await resp.write(event(elicit("first")))  # the call parks on this one
        return await hold(resp)

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        first = await bounded(attack.client.call("attack"))
        assert first.result["resultType"] == "input_required"
        server = attack.server
        for start in range(0, flood, 100):
            await server.push(b"".join(event(elicit(f"f-{i}", padding)) for i in range(start, start + 100)))
        await server.wait_for(
            lambda: len([a for a in server.answers if "error" in a]) >= flood - 256, "the refusals", 60
        )
        refused = [a for a in server.answers if a.get("error", {}).get("code") == -31003]
        assert refused[0]["error"]["message"].startswith("Too many requests: the call already has 256")
        logged = [e for e in attack.proxy.log_events() if e.get("event") == "upstream.flood_refused"]
        assert len(logged) == 1
        # The parked call itself: what it holds is more than a round carries, so its retry fails cleanly.
        final = await bounded(attack.client.retry(first, {"elicit-1": accept_name("Ann")}, "attack"))
        assert final.error["code"] == -31003


async def test_a_flood_with_no_call_in_flight_is_answered_in_turn(
    fastmcp_url: peers.PeerUrl, tmp_path: Path
) -> None:
    flood = 10_000

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        return web.json_response(result(call.id, "done"))

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        server = attack.server
        for start in range(0, flood, 500):
            await server.push(b"".join(event(elicit(f"n-{i}", 1000)) for i in range(start, start + 500)))
        # Answered a few at a time, the stream read no faster than they go out: each gets its refusal.
        await server.wait_for(lambda: len(server.answers) >= flood, "every answer", 60)
        assert len(server.answers) == flood
        assert {a["error"]["code"] for a in server.answers} == {-32602}  # only asked during a call
        # Once the flood is over, a call to this very upstream works as ever.
        assert (await bounded(attack.client.call("attack"))).result["content"][0]["text"] == "done"


# -- more hostile shapes: each fails its own call, or is ignored, and harms nothing else ---------------------


async def test_an_invalid_json_answer_fails_the_call(fastmcp_url: peers.PeerUrl, tmp_path: Path) -> None:
    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        return web.Response(body=b'{"jsonrpc": "2.0", "id": ', content_type="application/json")

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        reply = await bounded(attack.client.call("attack"))
        assert reply.error["code"] == -31001
        assert "upstream sent an invalid JSON-RPC message" in reply.error["message"]


async def test_unsolicited_responses_are_ignored(fastmcp_url: peers.PeerUrl, tmp_path: Path) -> None:
    flood = 10_000

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        for start in range(0, flood, 500):
            await resp.write(
                b"".join(event(result(f"nobody-{i}", "x" * 1000)) for i in range(start, start + 500))
            )
        await resp.write(event(result(call.id, "the real answer")))
        return resp

    async with under_attack(on_call, fastmcp_url, tmp_path) as attack:
        for start in range(0, flood, 500):  # on the GET stream too
            await attack.server.push(
                b"".join(event(result(i, "y" * 1000)) for i in range(start, start + 500))
            )
        reply = await bounded(attack.client.call("attack"))
        assert reply.result["content"][0]["text"] == "the real answer"


async def test_a_slow_drip_is_cut_at_the_call_timeout(fastmcp_url: peers.PeerUrl, tmp_path: Path) -> None:
    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(call.request)
        with contextlib.suppress(ConnectionError):
            async with asyncio.timeout(BOUND_S * 2):
                while True:
                    await resp.write(b" ")
                    await asyncio.sleep(0.2)  # the hostile part: a byte at a time, never an answer
        return resp

    async with under_attack(on_call, fastmcp_url, tmp_path, call_timeout_s=2) as attack:
        reply = await bounded(attack.client.call("attack"))
        assert reply.error["code"] == -31004
        assert "cancelled upstream" in reply.error["message"]


async def test_a_long_id_round_trips_when_the_retry_lands_on_another_replica() -> None:
    """The handle carries the long id's digest; the replica the retry lands on forwards it to the owner,
    which holds the id itself."""
    long_id = "id-" + "y" * 5000

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        await resp.write(event(elicit(long_id)))
        await server.wait_for(lambda: any(a.get("id") == long_id for a in server.answers), "the answer")
        answer = next(a for a in server.answers if a.get("id") == long_id)
        await resp.write(event(result(call.id, "hello " + answer["result"]["content"]["name"])))
        return resp

    async with (
        hostile_server(on_call) as server,
        replica_set(server.url, 2) as replicas,
        aiohttp.ClientSession() as http,
    ):
        first = await bounded(RawClient(url_of(replicas[0]), http).call("attack"))
        assert first.result["resultType"] == "input_required"
        (key,) = first.result["inputRequests"]
        other = RawClient(url_of(replicas[1]), http)
        final = await bounded(other.retry(first, {key: accept_name("Bo")}, "attack"))
        assert final.result["content"][0]["text"] == "hello Bo"
        # The owner served it for its peer (its request line is written just after the answer: bounded wait).
        served = await eventually(
            lambda: [line for line in log_lines(replicas[0]) if line.get("forwarded_by")],
            "the owner's request line for its peer",
        )
        assert len(served) == 1 and served[0]["outcome"] == "complete"


async def test_a_long_id_call_whose_owner_died_is_reported_lost_not_taken_over() -> None:
    """The handle has only the long id's digest: a replica that takes the call over could not answer the
    upstream's request, so it reports the call lost (never re-run) instead of adopting the session."""
    long_id = "id-" + "z" * 5000

    async def on_call(call: Call, server: HostileServer) -> web.StreamResponse:
        resp = await open_sse(call.request)
        await resp.write(b"id: ev-1\n" + event(elicit(long_id)))  # an event id: resumable, as far as it says
        return await hold(resp)

    async with (
        hostile_server(on_call) as server,
        replica_set(server.url, 2) as (owner, other),
        aiohttp.ClientSession() as http,
    ):
        first = await bounded(RawClient(url_of(owner), http).call("attack"))
        (key,) = first.result["inputRequests"]
        owner.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(owner.process.wait(), 10)
        lost = await bounded(RawClient(url_of(other), http).retry(first, {key: accept_name("Cy")}, "attack"))
        assert lost.error["code"] == -31002
        assert "the upstream's request ids are too long to carry in the handle" in lost.error["message"]
        assert "not re-run" in lost.error["message"]
        assert not [a for a in server.answers if a.get("id") == long_id]  # nobody answered in its name

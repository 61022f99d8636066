"""The mirror's waits (legacy/mirror/calls.py, mirror/hangup.py) over a real connection: a client that hangs
up while its call waits for an inline answer is noticed at once, by the connection's loss (not by a look
every so often), and what fails as the call ends is said in the log.

A real aiohttp server on 127.0.0.1 runs `MirrorCalls.run` in its handler, with aiohttp's own default
`handler_cancellation=False` (an app run by another runner): nothing cancels the handler when the client
goes, so only the mirror's own watch can notice it. The upstream is a scripted coroutine (it asks once).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web
from structlog.testing import capture_logs
from waiting import eventually

from proxy.front.legacy.bridge.streams import BridgeReply
from proxy.front.legacy.mirror.calls import MirrorCalls, MirrorSettings
from proxy.handle import HandleCodec
from proxy.handle.keyring import KeyRing
from proxy.handle.mirror_ids import MirrorSession
from proxy.upstream.modern import Notify
from proxy.wire import jsonrpc, mcp
from proxy.wire.sse import SSEDecoder

SESSION = MirrorSession("up", "alice", "s1", "2025-06-18", ("raw", "1"), {"elicitation": {}}, 2**40)
ASKS = {"name": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {}}}}


async def ask_once(req: jsonrpc.Request, note: Notify) -> jsonrpc.Response:
    """The upstream's first round: input_required, with a requestState the proxy holds meanwhile."""
    return jsonrpc.Result(
        req.id, {"resultType": mcp.RESULT_INPUT_REQUIRED, "inputRequests": ASKS, "requestState": "st"}
    )


@asynccontextmanager
async def serving(calls: MirrorCalls, end: Callable[[str, str], Any]) -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.StreamResponse:
        reply = BridgeReply(request)
        msg = jsonrpc.Request(1, "tools/call", {"name": "ask"})
        answer = await calls.run(reply, SESSION, msg, {"name": "ask"}, ask_once, end=end)
        return await reply.finish(answer)

    app = web.Application()
    app.router.add_post("/mcp", handle)
    runner = web.AppRunner(app, handler_cancellation=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/mcp"
    finally:
        await runner.cleanup()


async def hang_up_once_asked(http: aiohttp.ClientSession, url: str) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    async with http.post(url, json={}, headers=headers) as resp:
        decoder = SSEDecoder()
        async for chunk in resp.content.iter_any():
            if any("elicitation/create" in e.data for e in decoder.feed(chunk)):
                break
        resp.close()  # gone, with the inline request unanswered


async def test_a_hang_up_is_noticed_by_the_connections_loss_and_a_failing_end_is_logged() -> None:
    """The call waits for its client's answer, with keep-alives every 15 s and a 600 s answer timeout: no
    timer of the wait comes due before the bound, so only the connection's loss can end it in time (on
    the code before, a one-second look did, and this bound of half a second was missed). The call is
    released, and the `end` that fails says why in one warning line."""
    calls = MirrorCalls(HandleCodec(KeyRing.ephemeral()), MirrorSettings())
    ended: list[tuple[str, str]] = []

    async def end(state: str, why: str) -> None:
        ended.append((state, why))
        raise ConnectionRefusedError("the owner of the parked call refused the end")

    with capture_logs() as logs:
        async with serving(calls, end) as url, aiohttp.ClientSession() as http:
            await hang_up_once_asked(http, url)
            await eventually(
                lambda: len(calls) == 0 and bool(ended), "the call ended at once", limit_s=0.5, every_s=0.01
            )
            await eventually(
                lambda: any(e["event"] == "mirror.end_failed" for e in logs),
                "the failing end logged",
                limit_s=0.5,
                every_s=0.01,
            )
    assert ended == [("st", "the client ended the call")]
    assert [e["event"] for e in logs if e["event"].startswith("mirror.")] == [
        "mirror.client_gone",
        "mirror.end_failed",
    ]
    failed = next(e for e in logs if e["event"] == "mirror.end_failed")
    assert failed["log_level"] == "warning"
    assert failed["error"] == "ConnectionRefusedError: the owner of the parked call refused the end"


async def test_the_connection_is_given_back_unwatched_after_the_call() -> None:
    """A call that ends normally leaves the keep-alive connection's protocol as it found it: the next
    request on the same connection is served, and nothing of the watch stays."""
    calls = MirrorCalls(HandleCodec(KeyRing.ephemeral()), MirrorSettings())
    protocols: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        reply = BridgeReply(request)

        async def answer(req: jsonrpc.Request, note: Notify) -> jsonrpc.Response:
            assert request.transport is not None
            protocols.append(type(request.transport.get_protocol()).__name__)
            return jsonrpc.Result(req.id, {"content": []})

        msg = jsonrpc.Request(1, "tools/call", {"name": "x"})
        response = await reply.finish(await calls.run(reply, SESSION, msg, {"name": "x"}, answer))
        assert request.transport is not None
        protocols.append(type(request.transport.get_protocol()).__name__)
        return response

    app = web.Application()
    app.router.add_post("/mcp", handle)
    runner = web.AppRunner(app, handler_cancellation=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/mcp"
        connector = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(connector=connector) as http:
            for _ in range(2):
                async with http.post(url, json={}, headers={"Accept": "application/json"}) as resp:
                    assert (await resp.json())["result"] == {"content": []}
    finally:
        await runner.cleanup()
    assert protocols == ["_Watch", "RequestHandler"] * 2

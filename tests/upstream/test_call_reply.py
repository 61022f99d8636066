"""The receiving call's reply read by its response's callbacks (call_reply.py), against a scripted aiohttp
server: what each kind of reply puts in the call's inbox, that no task reads a reply that needs none (a
parked call's stream included), that what needs waiting goes on in a task with the same wording, and that the
connection is reused after a reply read to its end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from waiting import eventually

from proxy.upstream.base import Inbox, TransportLost
from proxy.upstream.inbox import LeanQueue
from proxy.upstream.keepalive import FINISH_WITHIN
from proxy.upstream.streamable_http import SessionSettings, StreamableHttpSession
from proxy.wire import jsonrpc, mcp

LIMIT = 4096  # max_message_bytes


def sse(msg: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(msg).encode() + b"\n\n"


def result(rid: object, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


class Script:
    """A legacy server whose `tools/call` reply depends on the tool's name (see `reply`)."""

    def __init__(self) -> None:
        self.peers: list[object] = []  # each tools/call's client address: the same one, a reused connection
        self.answered = asyncio.Event()  # the client's answer to `ask`'s elicitation came
        self.closed = asyncio.Event()  # a `hang` stream saw its client go
        self.hanging = asyncio.Event()  # a `hang` stream has begun: the client is reading its reply

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            return web.Response(status=405)
        if request.method == "DELETE":
            return web.Response(status=200)
        msg: dict[str, Any] = json.loads(await request.read())
        if msg.get("method") == "initialize":
            init = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {}}
            init["serverInfo"] = {"name": "scripted", "version": "1"}
            body = {"jsonrpc": "2.0", "id": msg["id"], "result": init}
            return web.json_response(body, headers={"Mcp-Session-Id": "s-1"})
        if "method" not in msg:  # the client's answer to a server request
            self.answered.set()
            return web.Response(status=202)
        if msg["method"] != "tools/call":
            return web.Response(status=202)
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        return await self.reply(request, msg["params"]["name"], msg["id"])

    async def reply(self, request: web.Request, tool: str, rid: object) -> web.StreamResponse:
        if tool == "whole":  # one SSE body with a Content-Length: all in with the head
            return web.Response(body=sse(result(rid, "whole")), content_type="text/event-stream")
        if tool == "json":
            return web.json_response(result(rid, "json"))
        if tool == "badjson":
            return web.json_response({"nope": 1})
        if tool == "fail":
            return web.Response(status=500, text="boom")
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        if tool == "ask":  # an elicitation, then the result once the client answered it
            ask = {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}
            await stream.write(sse({"jsonrpc": "2.0", "id": 7, "method": mcp.ELICIT, "params": ask}))
            await asyncio.wait_for(self.answered.wait(), 10)
            await stream.write(sse(result(rid, "asked")))
        elif tool == "slowend":  # the result, then the end of the stream a moment later
            await stream.write(sse(result(rid, "slowend")))
            await asyncio.sleep(0.05)  # the scripted server: the end comes a moment later
        elif tool == "lateend":  # the result, then the end only after FINISH_WITHIN
            await stream.write(sse(result(rid, "lateend")))
            await asyncio.sleep(FINISH_WITHIN + 0.5)  # the scripted server: the end comes after FINISH_WITHIN
        elif tool == "huge":
            await stream.write(b"data: " + b"x" * (2 * LIMIT) + b"\n\n")
            await asyncio.sleep(1)  # the scripted server: holds the huge stream open
        elif tool == "drop":  # an event, then the connection closes under the stream
            await stream.write(b": begun\n\n")
            assert request.transport is not None
            request.transport.close()
            return stream
        elif tool == "hang":  # nothing, until the client goes
            try:
                while True:
                    await stream.write(b": ping\n\n")
                    self.hanging.set()
                    await asyncio.sleep(0.05)  # the hostile part: a keep-alive, never an answer
            except ConnectionError:
                return stream
            finally:  # a write failed, or the handler was cancelled: the client went
                self.closed.set()
        await stream.write_eof()
        return stream


@pytest.fixture
async def session() -> AsyncIterator[tuple[Script, StreamableHttpSession]]:
    script = Script()
    app = web.Application()
    app.router.add_route("*", "/mcp", script.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    settings = SessionSettings(
        url=str(server.make_url("/mcp")),
        versions=mcp.LEGACY_VERSIONS,
        capabilities={},
        initialize_timeout=10,
        max_message_bytes=LIMIT,
    )
    try:
        async with aiohttp.ClientSession() as http:
            upstream = StreamableHttpSession(http, settings, lambda _: None)
            await upstream.open()
            try:
                yield script, upstream
            finally:
                await upstream.close()
    finally:
        await server.close()


async def call(upstream: StreamableHttpSession, tool: str) -> tuple[jsonrpc.RequestId, Inbox]:
    inbox: Inbox = LeanQueue()
    rid = await upstream.call("tools/call", {"name": tool, "arguments": {}}, inbox)
    return rid, inbox


async def next_item(inbox: Inbox) -> object:
    return await asyncio.wait_for(inbox.get(), 10)


def text(item: object) -> str:
    assert isinstance(item, jsonrpc.Result), item
    return str(item.result["content"][0]["text"])


@pytest.mark.parametrize("tool", ["whole", "json"])
async def test_a_reply_all_in_with_its_head_is_read_without_a_task_and_its_connection_reused(
    session: tuple[Script, StreamableHttpSession], tool: str
) -> None:
    script, upstream = session
    for _ in range(3):
        rid, inbox = await call(upstream, tool)
        assert not upstream._tasks  # the request went out at once; no task reads its reply
        item = await next_item(inbox)
        assert isinstance(item, jsonrpc.Result) and item.id == rid and text(item) == tool
        assert not upstream._tasks and not upstream._replies
        upstream.end_call()
    assert len(set(script.peers)) == 1  # one connection for the three calls


async def test_a_parked_calls_stream_is_read_by_callbacks_until_its_result(
    session: tuple[Script, StreamableHttpSession],
) -> None:
    script, upstream = session
    rid, inbox = await call(upstream, "ask")
    asked = await next_item(inbox)
    assert isinstance(asked, jsonrpc.Request) and asked.method == mcp.ELICIT
    # Parked: no task, no frame waits on it.
    await eventually(lambda: not upstream._tasks and len(upstream._replies) == 1, "the call to be parked")
    await upstream.send(jsonrpc.Result(asked.id, {"action": "decline"}))
    final = await next_item(inbox)
    assert isinstance(final, jsonrpc.Result) and final.id == rid and text(final) == "asked"
    assert script.answered.is_set() and not upstream._replies


async def test_a_result_just_before_the_end_of_its_stream_comes_once_the_stream_ended(
    session: tuple[Script, StreamableHttpSession],
) -> None:
    script, upstream = session
    for _ in range(2):
        rid, inbox = await call(upstream, "slowend")
        item = await next_item(inbox)  # held until the stream's end (finished in a task: keepalive.py)
        assert isinstance(item, jsonrpc.Result) and item.id == rid and text(item) == "slowend"
        upstream.end_call()
        # The stream's end is read (in a task, keepalive.py) and its connection back in the pool: the next
        # call reuses it.
        await eventually(lambda: not upstream._tasks, "the stream's end read and its connection released", 10)
    assert len(set(script.peers)) == 1  # the connection went back to the pool each time


async def test_a_stream_that_ends_late_gives_the_result_at_once_and_its_connection_back_later(
    session: tuple[Script, StreamableHttpSession],
) -> None:
    script, upstream = session
    started = asyncio.get_running_loop().time()
    rid, inbox = await call(upstream, "lateend")
    item = await next_item(inbox)  # after FINISH_WITHIN, not after the stream's end
    assert isinstance(item, jsonrpc.Result) and item.id == rid and text(item) == "lateend"
    assert asyncio.get_running_loop().time() - started < FINISH_WITHIN + 0.4
    assert not upstream._replies and len(upstream._tasks) == 1  # the rest of the body, in the background
    upstream.end_call()
    await asyncio.wait_for(asyncio.gather(*upstream._tasks), 10)
    rid, inbox = await call(upstream, "whole")
    assert text(await next_item(inbox)) == "whole"
    assert len(set(script.peers)) == 1  # the connection was finished and went back to the pool


@pytest.mark.parametrize(
    ("tool", "reason"),
    [
        # The error the call fails with, word for word as when a task read the reply (streamable_posts.py).
        ("fail", "upstream answered HTTP 500: boom"),
        ("badjson", "upstream sent an invalid JSON-RPC message: "),
        ("huge", f"upstream sent a message larger than {LIMIT} bytes (upstreams[].max_message_bytes)"),
        ("drop", "could not reach upstream: ServerDisconnected: "),
    ],
)
async def test_a_reply_that_fails_tells_the_call_why(
    session: tuple[Script, StreamableHttpSession], tool: str, reason: str
) -> None:
    _, upstream = session
    _, inbox = await call(upstream, tool)
    item = await next_item(inbox)
    assert isinstance(item, TransportLost) and item.reason.startswith(reason) and item.delivered
    await eventually(lambda: not upstream._replies, "the call's reply slot to be released")


async def test_a_closed_session_ends_the_reply_it_was_reading(
    session: tuple[Script, StreamableHttpSession],
) -> None:
    script, upstream = session
    _, inbox = await call(upstream, "hang")
    await asyncio.wait_for(script.hanging.wait(), 10)
    assert len(upstream._replies) == 1
    await upstream.close()
    item = await next_item(inbox)
    assert isinstance(item, TransportLost) and item.reason == "session closed"
    await asyncio.wait_for(script.closed.wait(), 10)  # the connection was dropped, not left open
    assert not upstream._replies

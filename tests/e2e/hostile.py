"""A legacy Streamable HTTP server that misbehaves on purpose, scripted per test case (tests of
test_hostile_upstreams.py), and the proxy run in front of it as a real process, whose memory can be read.

The server speaks just enough MCP to be fronted: `initialize` (JSON, with a session id), notifications and
the proxy's answers to its requests (202, recorded), `tools/list` (one tool, `attack`), DELETE, and a
standalone GET stream the test writes to (`HostileServer.push`). What `tools/call` gets is the script's:
an `on_call` coroutine given the call and the server. Every flood is generated as it is written, so the
test process never holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import peers
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

MiB = 1024 * 1024
SESSION = "hostile-session-1"
TOOL = {"name": "attack", "description": "misbehaves", "inputSchema": {"type": "object"}}


@dataclass
class Call:
    """One `tools/call` the proxy sent: its JSON-RPC id and the request that carried it."""

    id: int | str
    request: web.Request


OnCall = Callable[[Call, "HostileServer"], Awaitable[web.StreamResponse]]


@dataclass
class HostileServer:
    on_call: OnCall
    session_id: str = SESSION  # the Mcp-Session-Id `initialize` answers with
    url: str = ""
    answers: list[dict[str, Any]] = field(default_factory=list)  # the proxy's answers to our requests
    notifications: list[dict[str, Any]] = field(default_factory=list)  # what the proxy notified
    _streams: list[asyncio.Queue[bytes | None]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            return await self._get_stream(request)
        if request.method == "DELETE":
            return web.Response(status=200)
        msg = json.loads(await request.read())
        if "method" not in msg:  # an answer to one of our requests
            self.answers.append(msg)
            self._note()
            return web.Response(status=202)
        if "id" not in msg:
            self.notifications.append(msg)
            self._note()
            return web.Response(status=202)
        if msg["method"] == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            return web.json_response(
                {"jsonrpc": "2.0", "id": msg["id"], "result": result},
                headers={"Mcp-Session-Id": self.session_id},
            )
        if msg["method"] == "tools/list":
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": [TOOL]}})
        if msg["method"] == "tools/call":
            return await self.on_call(Call(msg["id"], request), self)
        return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": {}})

    async def _get_stream(self, request: web.Request) -> web.StreamResponse:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=64)
        self._streams.append(queue)
        self._note()
        resp = await open_sse(request)
        with contextlib.suppress(ConnectionError):
            while (data := await queue.get()) is not None:
                await resp.write(data)
        return resp

    async def push(self, data: bytes) -> None:
        """Write `data` on the newest standalone GET stream (waiting, bounded, for the proxy to open one)."""
        await self.wait_for(lambda: bool(self._streams), "the proxy opened its GET stream")
        await self._streams[-1].put(data)

    async def wait_for(self, check: Callable[[], bool], what: str, limit_s: float = 30) -> None:
        """Wait until `check()` holds, re-checked whenever the proxy sends something; at most `limit_s`."""
        try:
            async with asyncio.timeout(limit_s):
                while not check():
                    self._changed.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.2):
                            await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"not seen within {limit_s:g}s: {what}") from None

    def _note(self) -> None:
        self._changed.set()


async def open_sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    return resp


def event(message: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(message).encode() + b"\n\n"


def elicit(rid: int | str, padding: int = 0) -> dict[str, Any]:
    params = {
        "message": "Your name?" + " " * padding,
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    return {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": params}


def result(rid: int | str, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


async def write_flood(resp: web.StreamResponse, head: bytes, total: int, tail: bytes = b"") -> None:
    """`head`, then `total` bytes of filler a MiB at a time, then `tail`; stops when the proxy hangs up."""
    block = b"a" * MiB
    with contextlib.suppress(ConnectionError):
        await resp.write(head)
        for _ in range(total // MiB):
            await resp.write(block)
        await resp.write(tail)


async def hold(resp: web.StreamResponse, limit_s: float = 60) -> web.StreamResponse:
    """Keep an event stream open (a comment every 0.1 s) until the proxy hangs up (bounded)."""
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(limit_s):
            while True:
                await resp.write(b": still here\n\n")
                await asyncio.sleep(0.1)  # the hostile part: keep-alives, never an answer
    return resp


@contextlib.asynccontextmanager
async def hostile_server(on_call: OnCall, session_id: str = SESSION) -> AsyncIterator[HostileServer]:
    server = HostileServer(on_call, session_id)
    app = web.Application()
    app.router.add_route("*", "/mcp", server.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    server.url = str(test_server.make_url("/mcp"))
    try:
        yield server
    finally:
        for queue in server._streams:
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)
        await test_server.close()


# -- the proxy, as a real process ---------------------------------------------------------------------------


@dataclass
class ProxyProcess:
    peer: peers.PeerProcess

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.peer.port}"

    def rss_mb(self) -> float:
        return self._status("VmRSS:")

    def peak_mb(self) -> float:
        """The most the process ever held (VmHWM): a spike freed again still counts."""
        return self._status("VmHWM:")

    def _status(self, field_name: str) -> float:
        for line in Path(f"/proc/{self.peer.pid}/status").read_text().splitlines():
            if line.startswith(field_name):
                return int(line.split()[1]) / 1024
        raise AssertionError(f"no {field_name}")

    def log_events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.peer.log_text(tail=None).splitlines():
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out


@contextlib.asynccontextmanager
async def proxy_in_front(
    hostile_url: str, healthy_url: str, tmp: Path, **calls: Any
) -> AsyncIterator[ProxyProcess]:
    """`mrtr-proxy serve` with two upstreams: `hostile` (the first, at /mcp) and `healthy`."""
    config = tmp / "proxy.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "calls": {"call_timeout_s": 60, **calls},
                "upstreams": [
                    {"name": "hostile", "url": hostile_url},
                    {"name": "healthy", "url": str(healthy_url)},
                ],
            }
        )
    )
    argv = [sys.executable, "-m", "proxy", "serve", "--config", str(config), "--log-format", "json"]
    async with peers.run_peer("mrtr-proxy", lambda port: [*argv, "--listen", f"127.0.0.1:{port}"]) as peer:
        yield ProxyProcess(peer)

"""A minimal, fast legacy (2025-11-25) Streamable HTTP MCP server on aiohttp, for the benchmarks only.

It does as little as a legacy server can, so what the benchmark shows is the cost of whatever sits in front
of it (mrtr-proxy, FastMCP's proxy), not the cost of an MCP SDK:

- ``POST /mcp`` ``initialize`` → a session (``mcp-session-id``); other requests need a known session
  (missing → 400, unknown → 404, like FastMCP). Plain requests are answered ``application/json``.
- notifications and the client's responses to our requests → ``202``.
- tools: ``echo(text)`` answers at once; ``ask()`` sends one inline ``elicitation/create`` on the call's POST
  SSE stream, waits (up to ``--ask-timeout`` s) for the client's answer and ends the stream with the result
  ``accept:<name>`` / ``decline`` / ``cancel``.
- ``GET /mcp`` holds the standalone SSE stream open (one per session, else 409) until the session is deleted;
  with ``--no-get-stream`` it answers 405 (the spec's "no standalone stream offered").
- ``DELETE /mcp`` ends the session.

Run: ``python bench/minimal_server.py --port N`` (binds 127.0.0.1). Holds 10,000+ sessions, each with a
waiting ``ask`` call and a GET stream, in a few hundred MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import uuid
from typing import Any

from aiohttp import web

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
SERVER_INFO = {"name": "bench-minimal-legacy", "version": "1"}
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
TOOLS = [
    {
        "name": "echo",
        "description": "Returns its text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "ask",
        "description": "Asks the client for a name (one inline elicitation), returns the answer.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
ELICIT_PARAMS = {
    "message": "What is your name?",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}


class Session:
    __slots__ = ("closed", "get_open", "next_id", "pending")

    def __init__(self) -> None:
        self.next_id = 0
        self.pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.get_open = False
        self.closed = asyncio.Event()


class Settings:
    ask_timeout = 900.0
    get_stream = True


SESSIONS: dict[str, Session] = {}
SETTINGS = Settings()


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(obj, separators=(",", ":")),
        content_type="application/json",
        headers=headers,
    )


def _result(rid: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _event(msg: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(msg, separators=(",", ":")).encode() + b"\n\n"


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


async def post(request: web.Request) -> web.StreamResponse:
    try:
        msg = json.loads(await request.read())
    except ValueError:
        return _json(_error(None, -32700, "Parse error"), 400)
    if not isinstance(msg, dict):
        return _json(_error(None, -32600, "one JSON-RPC message per POST"), 400)
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        sid = uuid.uuid4().hex
        SESSIONS[sid] = Session()
        asked = (msg.get("params") or {}).get("protocolVersion")
        result = {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
        }
        return _json(_result(rid, result), headers={"mcp-session-id": sid})
    sid = request.headers.get("mcp-session-id")
    if sid is None:
        return _json(_error(rid, -32600, "Missing session ID"), 400)
    session = SESSIONS.get(sid)
    if session is None:
        return _json(_error(rid, -32600, "Session not found"), 404)
    if method is None:  # the client's response to one of our requests
        waiter = session.pending.pop(rid, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(msg)
        return web.Response(status=202)
    if rid is None:  # a notification
        return web.Response(status=202)
    params = msg.get("params") or {}
    if method == "tools/call":
        name = params.get("name")
        if name == "echo":
            return _json(_result(rid, _text(str((params.get("arguments") or {}).get("text", "")))))
        if name == "ask":
            return await _ask(request, session, rid)
        return _json(_result(rid, {**_text(f"Unknown tool: {name}"), "isError": True}))
    if method == "tools/list":
        return _json(_result(rid, {"tools": TOOLS}))
    if method == "ping":
        return _json(_result(rid, {}))
    return _json(_error(rid, -32601, f"Method not found: {method}"))


async def _ask(request: web.Request, session: Session, rid: Any) -> web.StreamResponse:
    stream = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await stream.prepare(request)
    ask_id = session.next_id
    session.next_id += 1
    waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    session.pending[ask_id] = waiter
    await stream.write(
        _event({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create", "params": ELICIT_PARAMS})
    )
    try:
        async with asyncio.timeout(SETTINGS.ask_timeout):
            answer = await waiter
    except TimeoutError:
        session.pending.pop(ask_id, None)
        await stream.write(_event(_error(rid, -32001, "the client did not answer in time")))
        await stream.write_eof()
        return stream
    result = answer.get("result") or {}
    action = result.get("action")
    text = f"accept:{(result.get('content') or {}).get('name')}" if action == "accept" else str(action)
    await stream.write(_event(_result(rid, _text(text))))
    await stream.write_eof()
    return stream


async def get(request: web.Request) -> web.StreamResponse:
    if not SETTINGS.get_stream:
        return web.Response(status=405, headers={"Allow": "POST, DELETE"})
    session = SESSIONS.get(request.headers.get("mcp-session-id", ""))
    if session is None:
        return _json(_error(None, -32600, "Session not found"), 404)
    if session.get_open:
        return _json(_error(None, -32600, "a GET stream is already open"), 409)
    session.get_open = True
    try:
        stream = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await stream.prepare(request)
        await session.closed.wait()
        return stream
    finally:
        session.get_open = False


async def delete(request: web.Request) -> web.Response:
    session = SESSIONS.pop(request.headers.get("mcp-session-id", ""), None)
    if session is None:
        return web.Response(status=404)
    session.closed.set()
    for waiter in session.pending.values():
        if not waiter.done():
            waiter.set_result({"result": {"action": "cancel"}})
    return web.Response(status=200)


async def stats(_: web.Request) -> web.Response:
    return _json({"sessions": len(SESSIONS), "waiting": sum(len(s.pending) for s in SESSIONS.values())})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ask-timeout", type=float, default=SETTINGS.ask_timeout)
    parser.add_argument(
        "--no-get-stream", action="store_true", help="answer GET with 405 (no standalone stream)"
    )
    args = parser.parse_args()
    SETTINGS.ask_timeout = args.ask_timeout
    SETTINGS.get_stream = not args.no_get_stream
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    app = web.Application()
    app.router.add_post("/mcp", post)
    app.router.add_get("/mcp", get)
    app.router.add_delete("/mcp", delete)
    app.router.add_get("/stats", stats)
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None, backlog=4096)


if __name__ == "__main__":
    main()

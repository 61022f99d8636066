"""A minimal, fast 2026-07-28 MCP server on aiohttp, for the relay benchmark only (bench/relay_bench.py).

The modern counterpart of ``minimal_server.py``: it does as little as a 2026-07-28 server can, so what the
benchmark shows is the cost of the proxy's native relay in front of it, not the cost of an MCP SDK. No
session, no handshake: every ``POST /mcp`` is one request answered ``application/json``.

- ``server/discover`` → ``supportedVersions: ["2026-07-28"]``, tools declared;
- ``tools/list`` → ``echo``; ``tools/call echo {"text"}`` → the text (``resultType: "complete"``);
- anything else → ``-32601``; a POST without ``MCP-Protocol-Version: 2026-07-28`` → 400 (a modern-only
  server).

Run: ``python bench/minimal_modern.py --port N`` (binds 127.0.0.1).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from aiohttp import web

VERSION = "2026-07-28"
SERVER_INFO = {"name": "bench-minimal-modern", "version": "1"}
ECHO = {
    "name": "echo",
    "description": "Returns its text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def _json(obj: Any, status: int = 200) -> web.Response:
    body = json.dumps(obj, separators=(",", ":"))
    return web.Response(status=status, body=body, content_type="application/json")


def _result(rid: Any, result: dict[str, Any]) -> web.Response:
    return _json({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", **result}})


def _error(rid: Any, code: int, message: str, status: int = 200) -> web.Response:
    return _json({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}, status)


async def post(request: web.Request) -> web.Response:
    try:
        msg = json.loads(await request.read())
    except ValueError:
        return _error(None, -32700, "Parse error", 400)
    if not isinstance(msg, dict):
        return _error(None, -32600, "one JSON-RPC message per POST", 400)
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if request.headers.get("MCP-Protocol-Version") != VERSION:
        return _error(rid, -32022, f"Unsupported protocol version; supported: {VERSION}", 400)
    if method == "server/discover":
        meta = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
        return _result(rid, {"supportedVersions": [VERSION], "capabilities": {"tools": {}}, "_meta": meta})
    if method == "tools/list":
        return _result(rid, {"tools": [ECHO], "ttlMs": 0, "cacheScope": "private"})
    if method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("text", ""))
        return _result(rid, {"content": [{"type": "text", "text": text}], "isError": False})
    return _error(rid, -32601, f"Method not found: {method}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application()
    app.router.add_post("/mcp", post)
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None, backlog=4096)


if __name__ == "__main__":
    main()

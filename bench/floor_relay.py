"""The floor: the least an aiohttp process can do to relay a tool call to a legacy server, for the benchmarks.

mrtr-proxy is an aiohttp server that makes an aiohttp client request per call. This relay does only that:
it opens one legacy session to the upstream at start (``initialize``, ``notifications/initialized``), then
answers each ``POST /mcp`` by POSTing the body as it came to the upstream on that session (one pooled
keep-alive ``ClientSession``) and returning the JSON-RPC response as JSON (taken from the SSE stream when the
upstream answers with one), with the one change a 2026-07-28 answer needs (``resultType: complete``): one
JSON decode and one encode. No checks, no principal, no pool, no handles, no logging, no metrics: not a
proxy anyone should run, but what CPU per call a pass-through on aiohttp cannot go below. `make bench` puts
mrtr-proxy's CPU per call next to it, so a goal below this floor shows as such.

With ``--modern`` it is the floor of the native relay (section 6: a 2026-07-28 client, a 2026-07-28
upstream): no session at all; each ``POST /mcp`` goes to the upstream with its body and its MCP headers
(``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Content-Type``, ``Accept``) as they came, on one
pooled keep-alive ``ClientSession``, and the upstream's answer comes back as it is (JSON untouched, or the
JSON-RPC message taken from an SSE reply): no decode, no encode.

With ``--mrtr`` it is the floor of an MRTR round trip (section 2) in front of a legacy server: the call's SSE
reply is read line by line; when the upstream asks for input, the upstream response is held open under a
counter (the ``requestState``: no sealing, no expiry, no binding) and the client gets ``input_required``
with the request as it came; the retry's ``inputResponses`` are POSTed to the upstream as the answers and the
held stream is read on to the call's response. One held call per ask, lone requests only, no errors
handled: what a round trip through an aiohttp relay cannot go below.

Run: ``python bench/floor_relay.py --upstream http://127.0.0.1:8000/mcp --port 8091 [--modern | --mrtr]``
(binds 127.0.0.1).
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

import aiohttp
from aiohttp import web

LEGACY_VERSION = "2025-11-25"
UPSTREAM = web.AppKey("upstream", dict)


async def open_session(http: aiohttp.ClientSession, url: str) -> dict[str, str]:
    """A legacy session on the upstream; the headers every later POST carries."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "floor", "version": "1"}
    }}  # fmt: skip
    async with http.post(url, json=init, headers=headers) as resp:
        await resp.read()
        headers["Mcp-Session-Id"] = resp.headers["Mcp-Session-Id"]
    headers["MCP-Protocol-Version"] = LEGACY_VERSION
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=note, headers=headers) as resp:
        await resp.read()
    return headers


def from_sse(raw: bytes) -> bytes:
    """The last `data:` of an SSE body (the response ends the stream)."""
    data = b""
    for line in raw.splitlines():
        if line.startswith(b"data:"):
            data = line[5:].strip()
    return data


async def relay(request: web.Request) -> web.Response:
    up: dict[str, Any] = request.app[UPSTREAM]
    body = await request.read()
    async with up["http"].post(up["url"], data=body, headers=up["headers"]) as resp:
        raw = await resp.read()
        if resp.content_type == "text/event-stream":
            raw = from_sse(raw)
    return _answer(json.loads(raw))


async def relay_mrtr(request: web.Request) -> web.Response:
    up: dict[str, Any] = request.app[UPSTREAM]
    body = await request.read()
    msg = json.loads(body)
    params = msg.get("params") or {}
    held = up["held"].pop(params["requestState"]) if "requestState" in params else None
    if held is None:
        resp = await up["http"].post(up["url"], data=body, headers=up["headers"])
        upstream_id = msg["id"]
    else:
        resp, ids, upstream_id = held
        for key, answer in params["inputResponses"].items():
            reply = {"jsonrpc": "2.0", "id": ids[key], "result": answer}
            async with up["http"].post(up["url"], json=reply, headers=up["headers"]) as posted:
                await posted.read()
    if resp.content_type != "text/event-stream":
        out = json.loads(await resp.read())
    else:
        async for line in resp.content:  # up to the upstream's request, or the call's response
            if not line.startswith(b"data:") or not line[5:].strip():
                continue
            event = json.loads(line[5:])
            if "method" in event and "id" in event:
                token = str(next(up["tokens"]))
                up["held"][token] = (resp, {"r0": event["id"]}, upstream_id)
                asks = {"r0": {"method": event["method"], "params": event.get("params", {})}}
                result = {"resultType": "input_required", "inputRequests": asks, "requestState": token}
                return _answer({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            if event.get("id") == upstream_id and "method" not in event:
                out = event
                break
        async for _ in resp.content:  # the stream's end: its connection back to the pool
            pass
    resp.release()
    out["id"] = msg["id"]
    return _answer(out)


def _answer(msg: dict[str, Any]) -> web.Response:
    """The one change a 2026-07-28 answer needs: a result says it is complete (unless it says otherwise)."""
    if isinstance(msg.get("result"), dict):
        msg["result"].setdefault("resultType", "complete")
    return web.Response(body=json.dumps(msg).encode(), content_type="application/json")


MODERN_HEADERS = ("MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Content-Type", "Accept")


async def relay_modern(request: web.Request) -> web.Response:
    up: dict[str, Any] = request.app[UPSTREAM]
    body = await request.read()
    headers = {h: v for h in MODERN_HEADERS if (v := request.headers.get(h)) is not None}
    async with up["http"].post(up["url"], data=body, headers=headers) as resp:
        raw = await resp.read()
        status = resp.status
        if resp.content_type == "text/event-stream":
            raw = from_sse(raw)
    return web.Response(status=status, body=raw, content_type="application/json")


def create_app(url: str, *, modern: bool = False, mrtr: bool = False) -> web.Application:
    app = web.Application()
    state: dict[str, Any] = {"url": url, "held": {}, "tokens": itertools.count()}
    app[UPSTREAM] = state

    async def upstream_session(_: web.Application) -> Any:
        async with aiohttp.ClientSession() as http:
            state["http"] = http
            if not modern:
                state["headers"] = await open_session(http, url)
            yield

    app.cleanup_ctx.append(upstream_session)
    app.router.add_post("/mcp", relay_modern if modern else relay_mrtr if mrtr else relay)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--modern", action="store_true", help="2026-07-28 on both sides: no session")
    mode.add_argument("--mrtr", action="store_true", help="a call that asks for input answered by MRTR")
    args = parser.parse_args()
    web.run_app(
        create_app(args.upstream, modern=args.modern, mrtr=args.mrtr),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
    )


if __name__ == "__main__":
    main()

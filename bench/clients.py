"""The load generator's two raw clients (``loadgen.py`` drives them): a legacy Streamable HTTP session
(``initialize`` + ``notifications/initialized``, then ``Mcp-Session-Id`` on every POST; an elicitation
answered inline while the call's SSE stream waits) and raw 2026-07-28 requests (``_meta`` and the MCP
headers on every POST, no session; an elicitation answered by a retry with ``inputResponses`` +
``requestState``)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import aiohttp

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
CLIENT_INFO = {"name": "bench-loadgen", "version": "1"}
CAPS = {"elicitation": {}}
ANSWER = {"action": "accept", "content": {"name": "Alice"}}


class BenchError(Exception):
    pass


def _sse_messages(body: bytes) -> list[dict[str, Any]]:
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if data:
                out.append(json.loads(data))
    return out


async def _read_reply(resp: aiohttp.ClientResponse, rid: int) -> dict[str, Any]:
    body = await resp.read()
    if resp.status != 200:
        raise BenchError(f"HTTP {resp.status}: {body[:200]!r}")
    if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
        for msg in _sse_messages(body):
            if msg.get("id") == rid and "method" not in msg:
                return msg
        raise BenchError(f"no response with id {rid} in the SSE stream")
    msg: dict[str, Any] = json.loads(body)
    return msg


class Legacy:
    """A raw legacy Streamable HTTP session."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url = http, url
        self.sid: str | None = None
        self.ids = itertools.count(1)

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": ACCEPT, "MCP-Protocol-Version": LEGACY}
        if self.sid is not None:
            h["Mcp-Session-Id"] = self.sid
        return h

    async def open(self) -> None:
        params = {"protocolVersion": LEGACY, "capabilities": CAPS, "clientInfo": CLIENT_INFO}
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        async with self.http.post(self.url, data=body, headers=self.headers()) as resp:
            self.sid = resp.headers.get("mcp-session-id")
            msg = await _read_reply(resp, 0)
            if "result" not in msg or self.sid is None:
                raise BenchError(f"initialize failed: {msg}")
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        async with self.http.post(self.url, data=note, headers=self.headers()) as resp:
            await resp.read()

    async def close(self) -> None:
        if self.sid is not None:
            try:
                async with self.http.delete(self.url, headers=self.headers()) as resp:
                    await resp.read()
            except aiohttp.ClientError:
                pass

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        rid = next(self.ids)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}
        )
        async with self.http.post(self.url, data=body, headers=self.headers()) as resp:
            msg = await _read_reply(resp, rid)
        if "result" not in msg:
            raise BenchError(f"tools/call failed: {msg}")
        return msg["result"]  # type: ignore[no-any-return]

    async def ask_inline(self, tool: str) -> dict[str, Any]:
        """Call a tool that elicits once; answer the inline request as soon as it arrives."""
        rid = next(self.ids)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
        )
        async with self.http.post(self.url, data=body, headers=self.headers()) as resp:
            if resp.status != 200:
                raise BenchError(f"HTTP {resp.status}: {(await resp.read())[:200]!r}")
            async for line in resp.content:
                if not line.startswith(b"data:") or not line[5:].strip():
                    continue
                msg = json.loads(line[5:])
                if msg.get("method") == "elicitation/create":
                    answer = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": ANSWER})
                    async with self.http.post(self.url, data=answer, headers=self.headers()) as reply:
                        await reply.read()
                        if reply.status >= 300:
                            raise BenchError(f"answer got HTTP {reply.status}")
                elif msg.get("id") == rid and "method" not in msg:
                    if "result" not in msg:
                        raise BenchError(f"tools/call failed: {msg}")
                    return msg["result"]  # type: ignore[no-any-return]
        raise BenchError("stream ended before the result")


class Modern:
    """Raw 2026-07-28 requests: no session; `_meta` and the MCP headers on every POST."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url = http, url
        self.ids = itertools.count(1)
        self.meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": CAPS,
        }

    async def request_call(self, tool: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(self.ids)
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {"name": tool, **params, "_meta": self.meta},
            }
        )
        headers = {
            "Content-Type": "application/json",
            "Accept": ACCEPT,
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        }
        async with self.http.post(self.url, data=body, headers=headers) as resp:
            msg = await _read_reply(resp, rid)
        if "result" not in msg:
            raise BenchError(f"tools/call failed: {msg}")
        return msg["result"]  # type: ignore[no-any-return]

    async def list_tools(self) -> dict[str, Any]:
        """One `tools/list` (the first page)."""
        rid = next(self.ids)
        params = {"_meta": self.meta}
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": params})
        headers = {
            "Content-Type": "application/json",
            "Accept": ACCEPT,
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/list",
        }
        async with self.http.post(self.url, data=body, headers=headers) as resp:
            msg = await _read_reply(resp, rid)
        if "result" not in msg:
            raise BenchError(f"tools/list failed: {msg}")
        return msg["result"]  # type: ignore[no-any-return]

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.request_call(tool, {"arguments": args})
        if result.get("resultType") != "complete":
            raise BenchError(f"expected a complete result: {result}")
        return result

    async def ask_mrtr(self, tool: str) -> dict[str, Any]:
        first = await self.request_call(tool, {"arguments": {}})
        if first.get("resultType") != "input_required":
            raise BenchError(f"expected input_required: {first}")
        responses = {key: ANSWER for key in first["inputRequests"]}
        params = {"arguments": {}, "inputResponses": responses, "requestState": first["requestState"]}
        final = await self.request_call(tool, params)
        if final.get("resultType") != "complete":
            raise BenchError(f"expected a complete result: {final}")
        return final

    async def park(self, tool: str) -> None:
        first = await self.request_call(tool, {"arguments": {}})
        if first.get("resultType") != "input_required":
            raise BenchError(f"expected input_required: {first}")


def result_text(result: dict[str, Any]) -> str:
    content = result.get("content") or [{}]
    return str(content[0].get("text", ""))

"""The soak's clients, by hand over aiohttp: a 2026-07-28 client (every request stateless, `_meta` on each)
and a legacy one (initialize, a session id, DELETE). Every request is bounded by the caller's timeout."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
_ids = itertools.count(1)


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: its status and the JSON-RPC message answering the request (None: no such message)."""

    status: int
    message: dict[str, Any] | None
    session: str | None = None  # Mcp-Session-Id, on a legacy initialize
    request_id: str | None = None  # the proxy's X-Request-Id: its log lines about this request carry it

    def describe(self) -> str:
        text = json.dumps(self.message)[:300] if self.message is not None else "no JSON-RPC answer"
        return f"HTTP {self.status} [X-Request-Id {self.request_id}]: {text}"


def _answer_of(raw: bytes, content_type: str, rid: int | None) -> dict[str, Any] | None:
    """The JSON-RPC answer with this id, from a JSON body or an SSE stream (notifications and server
    requests before it are skipped)."""
    if content_type == "application/json":
        value = json.loads(raw) if raw else None
        return value if isinstance(value, dict) else None
    if content_type != "text/event-stream":
        return None
    found = None
    for event in raw.decode("utf-8", "replace").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:"))
        if not data.strip():
            continue
        message = json.loads(data)
        if isinstance(message, dict) and "method" not in message and message.get("id") == rid:
            found = message
    return found


async def post(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float
) -> Answer:
    limit = aiohttp.ClientTimeout(total=timeout_s)
    async with http.post(url, data=json.dumps(body).encode(), headers=headers, timeout=limit) as resp:
        raw = await resp.read()
        message = _answer_of(raw, resp.content_type, body.get("id"))
        return Answer(
            resp.status, message, resp.headers.get("Mcp-Session-Id"), resp.headers.get("X-Request-Id")
        )


def modern(method: str, params: dict[str, Any], principal: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 request and its headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": CAPS,
    }
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        "Authorization": f"Bearer {principal}",
    }
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    return body, headers


def legacy_headers(principal: str, session: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {principal}",
    }
    if session is not None:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = LEGACY
    return headers


def legacy_initialize() -> dict[str, Any]:
    params = {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "soak-legacy", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": next(_ids), "method": "initialize", "params": params}


def legacy_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}


def answer_input(request: dict[str, Any], name: str) -> dict[str, Any]:
    """What a client answers to one of the upstream's questions, by kind (elicitation, sampling, roots)."""
    method = request.get("method")
    if method == "elicitation/create":  # every field of the soak's forms is a string: all get the name
        params = request.get("params") or {}
        fields = (params.get("requestedSchema") or {}).get("properties") or {"name": {}}
        return {"action": "accept", "content": dict.fromkeys(fields, name)}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": f"sampled-{name}"}, "model": "soak"}
    if method == "roots/list":
        return {"roots": [{"uri": f"file:///soak/{name}"}]}
    raise ValueError(f"an input request the soak does not answer: {method!r}")


def text_of(result: dict[str, Any]) -> str | None:
    content = result.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None

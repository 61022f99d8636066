"""The MCP-level steps of a probe, whatever the transport: initialize, the lists, `--call`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

import aiohttp

from proxy.probe.channel import ProbeError, Recorder, initialize_params
from proxy.probe.findings import CallProbe, Item, item_from
from proxy.wire import jsonrpc, mcp

MAX_PAGES = 20
_LISTS: tuple[tuple[str, str, Literal["tool", "prompt", "resource", "resource_template"], str], ...] = (
    ("tools", "tools/list", "tool", "tools"),
    ("prompts", "prompts/list", "prompt", "prompts"),
    ("resources", "resources/list", "resource", "resources"),
    ("resources", "resources/templates/list", "resource_template", "resourceTemplates"),
)


class Conversation(Protocol):
    recorder: Recorder

    async def request(self, method: str, params: jsonrpc.JSONObject, timeout: float) -> jsonrpc.Response: ...

    async def notify(self, method: str, params: jsonrpc.JSONObject) -> None: ...


async def initialize(conv: Conversation, version: str, timeout: float) -> jsonrpc.JSONObject:
    """`initialize` offering `version`, then `notifications/initialized`; the server's result."""
    reply = await conv.request("initialize", initialize_params(version), timeout)
    if isinstance(reply, jsonrpc.Error):
        raise ProbeError(f"initialize failed: {reply.error.code} {reply.error.message}")
    if not isinstance(reply.result.get("protocolVersion"), str):
        raise ProbeError("initialize answered without a protocolVersion: not an MCP server")
    await conv.notify(mcp.INITIALIZED, {})
    return reply.result


async def offered_alone(conv: Conversation, version: str, timeout: float) -> bool | None:
    """Does the server accept `version` when it is the only one offered? None: the attempt failed."""
    try:
        reply = await conv.request("initialize", initialize_params(version), timeout)
    except ProbeError:
        return None
    return isinstance(reply, jsonrpc.Result) and reply.result.get("protocolVersion") == version


async def list_items(
    conv: Conversation, capabilities: Mapping[str, Any], timeout: float
) -> tuple[tuple[Item, ...], tuple[str, ...]]:
    """Every tool, prompt, resource and template the capabilities announce (all pages); and notes."""
    items: list[Item] = []
    notes: list[str] = []
    for capability, method, kind, key in _LISTS:
        if capability not in capabilities:
            continue
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            try:
                reply = await conv.request(method, {"cursor": cursor} if cursor else {}, timeout)
            except (ProbeError, aiohttp.ClientError) as exc:
                notes.append(f"{method} failed: {exc}")
                break
            if isinstance(reply, jsonrpc.Error):
                if reply.error.code != jsonrpc.METHOD_NOT_FOUND:
                    notes.append(f"{method} failed: {reply.error.code} {reply.error.message}")
                break
            entries = reply.result.get(key)
            items += (
                [item_from(kind, e) for e in entries if isinstance(e, dict)]
                if isinstance(entries, list)
                else []
            )
            next_cursor = reply.result.get("nextCursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                break
            cursor = next_cursor
        else:
            notes.append(f"{method}: more than {MAX_PAGES} pages, the rest not read")
    return tuple(items), tuple(notes)


async def call_tool(conv: Conversation, name: str, arguments: Mapping[str, Any], timeout: float) -> CallProbe:
    """Run one tool (only on `--call`): the server requests it sends are answered 'declined' or empty."""
    conv.recorder.in_call = True
    try:
        reply = await conv.request("tools/call", {"name": name, "arguments": dict(arguments)}, timeout)
    except (ProbeError, aiohttp.ClientError) as exc:
        outcome: Literal["error", "timeout"] = "timeout" if "no answer within" in str(exc) else "error"
        return CallProbe(name, tuple(conv.recorder.during_call), outcome, str(exc))
    finally:
        conv.recorder.in_call = False
    asked = tuple(conv.recorder.during_call)
    if isinstance(reply, jsonrpc.Error):
        return CallProbe(name, asked, "error", f"{reply.error.code} {reply.error.message}")
    if reply.result.get("isError") is True:
        return CallProbe(name, asked, "tool_error", _text(reply.result))
    return CallProbe(name, asked, "result", _text(reply.result))


def _text(result: jsonrpc.JSONObject) -> str:
    content = result.get("content")
    if isinstance(content, list):
        texts = [c.get("text") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
        joined = " ".join(t for t in texts if t)
        return joined[:200]
    return ""

"""The probe's first request, over HTTP or stdio: a 2026-07-28 `server/discover`, judged the way the proxy
judges an upstream's era (proxy/upstream/era.py). For a modern server it also lists the tools and, with
`--call`, calls one at 2026-07-28 to see whether it answers `input_required` natively. Never a second
round: the probe answers no input request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from proxy.probe.findings import ModernCall, ModernSide
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.era import PROBE_CLIENT, discover_request, judge_discover
from proxy.upstream.modern import ModernTarget, NotModern, post
from proxy.wire import jsonrpc, mcp

# One 2026-07-28 request within a time limit: a POST (HTTP) or a line on a stdio child.
Send = Callable[[jsonrpc.Request, float], Awaitable[jsonrpc.Response]]

# What the probe declares at 2026-07-28, so that a tool that would ask for input says so.
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


def _request(rid: int, method: str, params: Mapping[str, Any]) -> jsonrpc.Request:
    meta = {
        mcp.META_PROTOCOL_VERSION: mcp.MODERN_VERSION,
        mcp.META_CLIENT_INFO: PROBE_CLIENT,
        mcp.META_CLIENT_CAPABILITIES: CAPABILITIES,
    }
    return jsonrpc.Request(rid, method, {**params, "_meta": meta})


async def probe_modern(
    http: aiohttp.ClientSession,
    url: str,
    headers: Mapping[str, str],
    *,
    step_s: float,
    call: str | None = None,
    call_arguments: Mapping[str, Any] | None = None,
    call_s: float = 20.0,
) -> ModernSide | None:
    """The era an HTTP server shows to `server/discover`; None when that says nothing (unreachable, or a
    401/403: the legacy steps that follow report it)."""

    async def send(msg: jsonrpc.Request, timeout: float) -> jsonrpc.Response:
        return await post(http, ModernTarget(url, headers, timeout=timeout), msg)

    return await probe_era(send, step_s=step_s, call=call, call_arguments=call_arguments, call_s=call_s)


async def probe_era(
    send: Send,
    *,
    step_s: float,
    call: str | None = None,
    call_arguments: Mapping[str, Any] | None = None,
    call_s: float = 20.0,
) -> ModernSide | None:
    """The era the server shows to `server/discover` sent by `send` (None: that says nothing). Over stdio,
    an error or no answer within `step_s` means legacy (the stdio binding's "Backward Compatibility")."""
    try:
        answer = await send(discover_request(), step_s)
    except NotModern as exc:
        return ModernSide("legacy", detail=str(exc))
    except (UpstreamAuthChallenge, UpstreamError, TimeoutError):
        return None
    verdict = judge_discover(answer)
    if verdict.era == "legacy":
        return ModernSide("legacy", detail=verdict.detail)
    result = answer.result if isinstance(answer, jsonrpc.Result) else {}
    meta = result.get("_meta")
    info = meta.get(mcp.META_SERVER_INFO) if isinstance(meta, dict) else None
    capabilities = result.get("capabilities")
    side = ModernSide(
        "modern",
        detail=verdict.detail,
        versions=verdict.versions,
        server_info=dict(info) if isinstance(info, dict) else {},
        capabilities=dict(capabilities) if isinstance(capabilities, dict) else {},
        tools=await _tools(send, step_s),
        call=None if call is None else await _call(send, call_s, call, call_arguments or {}),
    )
    return side


async def _tools(send: Send, timeout: float) -> tuple[str, ...]:
    try:
        answer = await send(_request(2, "tools/list", {}), timeout)
    except (UpstreamError, TimeoutError):
        return ()
    tools = answer.result.get("tools") if isinstance(answer, jsonrpc.Result) else None
    names = (t.get("name") for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()
    return tuple(n for n in names if isinstance(n, str))


async def _call(send: Send, timeout: float, name: str, arguments: Mapping[str, Any]) -> ModernCall:
    try:
        answer = await send(_request(3, "tools/call", {"name": name, "arguments": arguments}), timeout)
    except TimeoutError:
        return ModernCall(name, "timeout", detail=f"no answer within {timeout:g}s")
    except UpstreamError as exc:
        return ModernCall(name, "error", detail=str(exc)[:200])
    if isinstance(answer, jsonrpc.Error):
        return ModernCall(name, "error", detail=f"{answer.error.code}: {answer.error.message[:200]}")
    result = answer.result
    if result.get("resultType") == mcp.RESULT_INPUT_REQUIRED:
        requests = result.get("inputRequests")
        asks = sorted(
            {str(r.get("method")) for r in requests.values() if isinstance(r, dict)}
            if isinstance(requests, dict)
            else set()
        )
        return ModernCall(name, "input_required", tuple(asks))
    if result.get("isError"):
        content = result.get("content")
        first = content[0] if isinstance(content, list) and content and isinstance(content[0], dict) else {}
        return ModernCall(name, "tool_error", detail=str(first.get("text", ""))[:200])
    return ModernCall(name, "result")

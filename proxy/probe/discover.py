"""The probe's first request, over HTTP or stdio: a 2026-07-28 `server/discover`, judged the way the proxy
judges an upstream's era (proxy/upstream/era.py). For a modern server it also lists the tools and, with
`--call`, calls one at 2026-07-28 to see whether it answers `input_required` natively. Never a second
round: the probe answers no input request."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from proxy.probe.findings import Check, ModernCall, ModernSide
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.era import PROBE_CLIENT, discover_request, judge_discover
from proxy.upstream.modern import ModernTarget, Notify, NotModern, post
from proxy.wire import jsonrpc, mcp

# One 2026-07-28 request within a time limit: a POST (HTTP) or a line on a stdio child; the notifications
# that come before its answer go to the third argument when the transport can tell them apart (HTTP).
Send = Callable[[jsonrpc.Request, float, Notify | None], Awaitable[jsonrpc.Response]]

LISTEN_S = 3.0  # how long `subscriptions/listen` is watched for its acknowledgment (or its refusal)
NO_SUCH_TASK = "mrtr-proxy-probe-no-such-task"

# What the probe declares at 2026-07-28, so that a tool that would ask for input says so.
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


def _request(
    rid: int, method: str, params: Mapping[str, Any], capabilities: Mapping[str, Any] = CAPABILITIES
) -> jsonrpc.Request:
    meta = {
        mcp.META_PROTOCOL_VERSION: mcp.MODERN_VERSION,
        mcp.META_CLIENT_INFO: PROBE_CLIENT,
        mcp.META_CLIENT_CAPABILITIES: dict(capabilities),
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

    async def send(msg: jsonrpc.Request, timeout: float, on_note: Notify | None) -> jsonrpc.Response:
        return await post(http, ModernTarget(url, headers, timeout=timeout), msg, on_note=on_note)

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
        answer = await send(discover_request(), step_s, None)
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
    caps = dict(capabilities) if isinstance(capabilities, dict) else {}
    tools, listed = await _tools(send, step_s)
    return ModernSide(
        "modern",
        detail=verdict.detail,
        versions=verdict.versions,
        server_info=dict(info) if isinstance(info, dict) else {},
        capabilities=caps,
        tools=tools,
        tools_listed=listed,
        call=None if call is None else await _call(send, call_s, call, call_arguments or {}),
        tasks=await _tasks(send, caps, step_s),
        listen=await _listen(send, min(step_s, LISTEN_S)),  # last: over stdio it may hold the child's line
    )


async def _tools(send: Send, timeout: float) -> tuple[tuple[str, ...], Check]:
    try:
        answer = await send(_request(2, "tools/list", {}), timeout, None)
    except (UpstreamError, TimeoutError) as exc:
        return (), Check("no", str(exc)[:200] or f"no answer within {timeout:g}s")
    if isinstance(answer, jsonrpc.Error):
        return (), Check("no", f"{answer.error.code}: {answer.error.message[:200]}")
    tools = answer.result.get("tools")
    names = (t.get("name") for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()
    found = tuple(n for n in names if isinstance(n, str))
    return found, Check("yes", f"{len(found)} tools")


async def _listen(send: Send, timeout: float) -> Check:
    """`subscriptions/listen` asking for tool list changes: `yes` when the server acknowledges it (or holds
    the stream open for `timeout` without a word), `no` when it answers an error (FastMCP 4.2.3: -32601) or
    ends the subscription at once. The stream is then dropped."""
    acknowledged = asyncio.Event()

    async def note(msg: jsonrpc.Notification) -> None:
        if msg.method == mcp.LISTEN_ACKNOWLEDGED:
            acknowledged.set()

    params = {"notifications": {"toolsListChanged": True}}
    call = asyncio.ensure_future(send(_request(5, mcp.LISTEN, params), timeout + 1.0, note))
    ack = asyncio.ensure_future(acknowledged.wait())
    try:
        await asyncio.wait({call, ack}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if acknowledged.is_set():
            return Check("yes", "acknowledged (notifications/subscriptions/acknowledged)")
        if not call.done():
            return Check("yes", f"the stream stayed open {timeout:g}s (no acknowledgment seen)")
        try:
            answer = call.result()
        except (UpstreamError, TimeoutError) as exc:
            return Check("no", str(exc)[:200] or type(exc).__name__)
        if isinstance(answer, jsonrpc.Error):
            return Check("no", f"{answer.error.code}: {answer.error.message[:200]}")
        return Check("no", "answered at once: the subscription ended before any notification")
    finally:
        for task in (call, ack):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _tasks(send: Send, capabilities: Mapping[str, Any], timeout: float) -> Check:
    """The Tasks extension (SEP-2663): declared in the server's capabilities, and `tasks/get` of an id no
    task has answered as a server that has tasks answers it (an error other than -32601)."""
    extensions = capabilities.get("extensions")
    declared = isinstance(extensions, dict) and mcp.TASKS_EXTENSION in extensions
    caps = {**CAPABILITIES, "extensions": {mcp.TASKS_EXTENSION: {}}}
    try:
        answer = await send(_request(6, mcp.TASKS_GET, {"taskId": NO_SUCH_TASK}, caps), timeout, None)
    except (UpstreamError, TimeoutError) as exc:
        return Check("no", f"tasks/get failed: {str(exc)[:200] or type(exc).__name__}")
    said = "declared" if declared else "not declared"
    if isinstance(answer, jsonrpc.Error) and answer.error.code == jsonrpc.METHOD_NOT_FOUND:
        return Check("no", f"{mcp.TASKS_EXTENSION} {said}; tasks/get answered -32601")
    if not declared:
        return Check("no", f"{mcp.TASKS_EXTENSION} not declared (tasks/get answered)")
    return Check("yes", f"{mcp.TASKS_EXTENSION} declared; tasks/get of an unknown id answered")


async def _call(send: Send, timeout: float, name: str, arguments: Mapping[str, Any]) -> ModernCall:
    try:
        answer = await send(_request(3, "tools/call", {"name": name, "arguments": arguments}), timeout, None)
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

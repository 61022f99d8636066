"""Whether a server that answered `server/discover` answers a legacy `initialize` too: a two-era server
(FastMCP 4.2.3, tmcp 1.20.0 by default), the `both` verdict of era.py. Neither advertises it in
`supportedVersions` (both list only 2026-07-28), so the proxy asks: one `initialize` at the newest legacy
version, its session (if any) ended at once with a DELETE. Only a JSON-RPC result carrying a
`protocolVersion` counts; any other answer (a 400 "Bad Request", an error, nothing) means modern only.
It carries what the `server/discover` probe carried (the upstream's configured headers, and the
forwarded credentials of the request that triggered the probe)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from proxy.wire import jsonrpc, mcp

INIT_CLIENT = {"name": "mrtr-proxy", "version": "era-probe"}
_MAX_BODY = 256 * 1024


@dataclass(frozen=True, slots=True)
class InitializeAnswer:
    legacy: bool  # answered initialize with a result
    version: str = ""  # the protocolVersion it chose
    detail: str = ""


def initialize_request() -> jsonrpc.Request:
    params = {"protocolVersion": mcp.LEGACY_VERSIONS[0], "capabilities": {}, "clientInfo": INIT_CLIENT}
    return jsonrpc.Request(0, "initialize", params)


def judge_initialize(body: bytes, content_type: str) -> InitializeAnswer:
    """The verdict of an `initialize` answer's body (JSON, or an SSE stream whose first JSON-RPC response is
    read). Pure."""
    payloads = [body]
    if content_type.startswith("text/event-stream"):
        payloads = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
    for payload in payloads:
        try:
            obj = jsonrpc.loads(payload)
        except ValueError:
            continue
        if not isinstance(obj, dict) or obj.get("id") != 0:
            continue
        result = obj.get("result")
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            return InitializeAnswer(True, result["protocolVersion"])
        error = obj.get("error")
        message = str(error.get("message"))[:200] if isinstance(error, dict) else "no result"
        return InitializeAnswer(False, detail=f"initialize: {message}")
    return InitializeAnswer(False, detail="initialize: no JSON-RPC answer")


async def answers_initialize(
    http: aiohttp.ClientSession, url: str, headers: Mapping[str, str], timeout: float
) -> InitializeAnswer:
    """POST one legacy `initialize` to `url`; end the session it opens. Never raises for a network failure
    (that is `legacy=False` with the reason)."""
    sent = {
        **headers,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    budget = aiohttp.ClientTimeout(total=timeout)
    try:
        async with http.post(
            url, data=jsonrpc.dumps(initialize_request()), headers=sent, timeout=budget
        ) as resp:
            session = resp.headers.get(mcp.SESSION_HEADER)
            if resp.status != 200:
                return InitializeAnswer(False, detail=f"initialize: HTTP {resp.status}")
            body = await _first_answer(resp)
            answer = judge_initialize(body, resp.headers.get("Content-Type", ""))
    except (aiohttp.ClientError, TimeoutError) as exc:
        return InitializeAnswer(False, detail=f"initialize: {type(exc).__name__}")
    if (
        session
    ):  # the probe's session is of no use to anyone: end it (a server that refuses is left to expire it)
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            ended = {**headers, mcp.SESSION_HEADER: session}
            async with http.delete(url, headers=ended, timeout=budget):
                pass
    return answer


async def _first_answer(resp: aiohttp.ClientResponse) -> bytes:
    """The body up to its first complete SSE event (an SSE stream may stay open), or the whole JSON body."""
    if not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
        return await resp.content.read(_MAX_BODY)
    out = bytearray()
    async for line in resp.content:
        out += line
        if (line.startswith(b"data:") and b'"id"' in line) or len(out) > _MAX_BODY:
            break
    return bytes(out)


__all__ = ["InitializeAnswer", "answers_initialize", "initialize_request", "judge_initialize"]

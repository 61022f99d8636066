"""`check-config --probe`: each upstream's lists read live, in the upstream's own era, as a real client.

The era is found as the proxy finds it (a `server/discover` of its own: upstream/era.py), whatever the
setting says, so that a wrong `era` setting is named (upstream/era_setting.py's one line, the sentence /readyz
and the log give when serving) instead of failing as four refused `initialize`s or passing a legacy server
that every 2026-07-28 request then fails on. A 2026-07-28 upstream (or a two-era one under `era: modern` or
`auto`) is listed with 2026-07-28 requests, a legacy one (or a two-era one under `era: legacy`) over a legacy
session. Either way the lists are asked by a client that declares what real clients declare (elicitation,
sampling, roots): a server may offer some tools only to such a client (server-everything: 16 tools, 12 to a
client that declares nothing).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import aiohttp

from proxy.config import UpstreamConfig
from proxy.routes.names import LISTS
from proxy.upstream.base import UpstreamError, UpstreamSession
from proxy.upstream.connect import open_upstream_session
from proxy.upstream.era import PROBE_CLIENT, EraBook
from proxy.upstream.era_setting import sentence
from proxy.upstream.pool_sessions import no_call_answer
from proxy.upstream.senders import ModernSenders
from proxy.wire import jsonrpc, mcp

PROBE_TIMEOUT = 30.0
MAX_PAGES = 100
# What real clients declare (the mcp SDKs' clients with their callbacks set, Claude Code, the TS client):
# some servers register their asking tools only for a client that can answer them.
CLIENT_CAPABILITIES: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {"listChanged": True},
}
DECLARED = "elicitation, sampling and roots"

Request = Callable[[str, dict[str, Any]], Awaitable[jsonrpc.Response]]


@dataclass(frozen=True, slots=True)
class Listed:
    """One upstream's lists (`lists`: one result per list method), or why not (`problem`); the era it was
    listed in, and the line naming a wrong `era` setting (`wrong_era`, which is also the problem)."""

    era: str  # legacy, modern, or unknown (nothing answered)
    lists: Mapping[str, Mapping[str, Any]] | None = None
    problem: str | None = None
    wrong_era: str | None = None
    modern: bool = False  # listed with 2026-07-28 requests (else over a legacy session)


class _Refused(Exception):
    pass


async def list_upstreams(upstreams: list[UpstreamConfig]) -> dict[str, Listed]:
    """Each upstream listed in its own era (a session or child of its own, closed after)."""
    autos = {up.name: replace(up, era="auto") for up in upstreams}  # probed whatever the setting
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:  # as the proxy's
        clients = dict.fromkeys(autos, http)
        senders = ModernSenders(autos, clients)
        book = EraBook(autos, clients, senders.children)
        try:
            found = await asyncio.gather(*(_one(http, up, book, senders) for up in upstreams))
        finally:
            await senders.close()
    return dict(zip((up.name for up in upstreams), found, strict=True))


async def _one(
    http: aiohttp.ClientSession, up: UpstreamConfig, book: EraBook, senders: ModernSenders
) -> Listed:
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            return await _listed(http, up, book, senders)
    except TimeoutError:
        return Listed("unknown", problem=f"no answer within {PROBE_TIMEOUT:g} s")


async def _listed(
    http: aiohttp.ClientSession, up: UpstreamConfig, book: EraBook, senders: ModernSenders
) -> Listed:
    if up.transport == "sse":  # HTTP+SSE (2024-11-05): legacy by definition
        return await _legacy(http, up, "legacy")
    await book.era(up.name)
    verdict = book.verdict(up.name)  # None: the probe said nothing (unreachable, 401/403)
    found = verdict.era if verdict is not None else "unknown"
    if verdict is not None and up.era == "modern" and found == "legacy":
        line = sentence(up.name, "modern", verdict, initialize_refused=False)
        return Listed(found, problem=line, wrong_era=line)
    speaks_2026 = found not in ("legacy", "unknown")  # modern (or, where the era book says so, both)
    if up.era == "modern" or (speaks_2026 and up.era == "auto"):
        return await _modern(up, senders, found)
    listed = await _legacy(http, up, found)
    if listed.problem is not None and verdict is not None and speaks_2026:  # under era: legacy
        line = sentence(up.name, "legacy", verdict, initialize_refused=True)
        return Listed(found, problem=line, wrong_era=line)
    return listed


async def _legacy(http: aiohttp.ClientSession, up: UpstreamConfig, found: str) -> Listed:
    try:
        session = await open_upstream_session(
            http,
            up,
            versions=up.protocol_versions,
            capabilities=CLIENT_CAPABILITIES,
            headers={},
            no_call=no_call_answer(up),
        )
    except UpstreamError as exc:
        return Listed(found, problem=str(exc))
    try:
        return Listed(found, lists=await _every_list(_over_session(session)))
    except (UpstreamError, _Refused) as exc:
        return Listed(found, problem=str(exc))
    finally:
        await session.close()


async def _modern(up: UpstreamConfig, senders: ModernSenders, found: str) -> Listed:
    send = senders.sender(up.name, timeout=PROBE_TIMEOUT)
    ids = itertools.count(1)
    meta = {
        mcp.META_PROTOCOL_VERSION: mcp.MODERN_VERSION,
        mcp.META_CLIENT_INFO: PROBE_CLIENT,
        mcp.META_CLIENT_CAPABILITIES: CLIENT_CAPABILITIES,
    }

    async def request(method: str, params: dict[str, Any]) -> jsonrpc.Response:
        return await send(jsonrpc.Request(next(ids), method, {**params, "_meta": meta}))

    try:
        return Listed(found, lists=await _every_list(request), modern=True)
    except (UpstreamError, _Refused) as exc:
        return Listed(found, problem=str(exc), modern=True)


def _over_session(session: UpstreamSession) -> Request:
    async def request(method: str, params: dict[str, Any]) -> jsonrpc.Response:
        return await session.request(method, params, PROBE_TIMEOUT)

    return request


async def _every_list(request: Request) -> dict[str, Mapping[str, Any]]:
    return {method: await _every_page(request, method) for method in LISTS}


async def _every_page(request: Request, method: str) -> Mapping[str, Any]:
    kind = LISTS[method][0]
    out: list[Any] = []
    params: dict[str, Any] = {}
    for _ in range(MAX_PAGES):
        reply = await request(method, params)
        if isinstance(reply, jsonrpc.Error):
            if reply.error.code == jsonrpc.METHOD_NOT_FOUND or method != "tools/list":
                return {kind: out}  # it has no such list (or will not give it): nothing to clash
            raise _Refused(f"{method} answered {reply.error.code}: {reply.error.message}")
        items = reply.result.get(kind)
        out += items if isinstance(items, list) else []
        cursor = reply.result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
        params = {"cursor": cursor}
    return {kind: out}


__all__ = ["CLIENT_CAPABILITIES", "DECLARED", "Listed", "list_upstreams"]

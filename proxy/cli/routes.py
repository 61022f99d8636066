"""`check-config`'s view of the aggregated routes: what each serves, and with `--probe` the merged tool
names a client would see, read live from the upstreams (and any name clash, named as /readyz would)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from proxy.config import Config, ToolPolicy, UpstreamConfig
from proxy.routes.index import NameIndex
from proxy.routes.names import entries
from proxy.routes.policy import judge
from proxy.routes.table import RouteTable
from proxy.upstream.base import UpstreamError
from proxy.upstream.connect import open_upstream_session
from proxy.upstream.pool import no_call_answer
from proxy.wire import jsonrpc

PROBE_TIMEOUT = 30.0
MAX_PAGES = 100


def describe(config: Config) -> list[str]:
    """One line per route: its path, its upstreams in route order with their prefixes, its policy."""
    table = RouteTable.of(config)
    lines = []
    for route in table:
        paths = f"/servers/{route.name}/mcp" + (" and /mcp" if table.default == route.name else "")
        members = ", ".join(
            f"{m.upstream} ({m.prefix}{route.separator}*)" if route.prefixed else m.upstream
            for m in route.members
        )
        naming = (
            "prefixed names" if route.prefixed else "bare names (a clash: the first in route order keeps it)"
        )
        lines.append(f"route {route.name}: {paths} -> {members}; {naming}{_policy(route.policy)}")
    return lines


def _policy(policy: ToolPolicy) -> str:
    parts = [f"{k} {list(v)}" for k, v in (("allow", policy.allow), ("deny", policy.deny)) if v]
    parts += [f"{glob} needs {' '.join(scopes)}" for glob, scopes in policy.require_scopes.items()]
    parts += [
        f"{glob} needs {' and '.join(f'{c} in {list(v)}' for c, v in claims.items())}"
        for glob, claims in policy.require_claims.items()
    ]
    return f"; tools: {', '.join(parts)}" if parts else ""


async def probe(config: Config) -> tuple[list[str], bool]:
    """Each route's merged tool names from a live `tools/list` of its upstreams (every page), with the tool
    policy applied (scope rules shown, not applied) and clashes named. False when an upstream of a route
    could not be listed."""
    names = {m.upstream for r in config.routes for m in r.upstreams}
    async with aiohttp.ClientSession() as http:
        listed = await asyncio.gather(*(_tools(http, config.upstream(name)) for name in sorted(names)))
    tools = dict(zip(sorted(names), listed, strict=True))
    lines, ok = [], True
    for route in RouteTable.of(config):
        index = NameIndex()
        merged: list[str] = []
        for member in route.members:
            found = tools[member.upstream]
            if isinstance(found, str):
                lines.append(f"route {route.name}: upstream {member.upstream} could not be listed: {found}")
                ok = False
                continue
            for entry in index.add(entries(route, member, "tools/list", {"tools": found})):
                refused = judge(route, member, entry.key, entry.local, None)
                if refused is None:
                    merged.append(entry.key)
                elif refused.reason in ("insufficient_scope", "claim_mismatch"):
                    merged.append(f"{entry.key} (token rule)")
        lines.append(f"route {route.name}: {len(merged)} tools: {', '.join(merged)}")
        lines += [f"route {route.name}: clash: {clash.describe()}" for clash in index.clashes]
    return lines, ok


async def _tools(http: aiohttp.ClientSession, upstream: UpstreamConfig) -> Sequence[Mapping[str, Any]] | str:
    """Every tool `upstream` lists (a session of its own, closed after), or why it could not be listed."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            session = await open_upstream_session(
                http,
                upstream,
                versions=upstream.protocol_versions,
                capabilities={},
                headers={},
                no_call=no_call_answer(upstream),
            )
            try:
                out: list[Mapping[str, Any]] = []
                params: dict[str, Any] = {}
                for _ in range(MAX_PAGES):
                    reply = await session.request("tools/list", params, PROBE_TIMEOUT)
                    if isinstance(reply, jsonrpc.Error):
                        return f"tools/list answered {reply.error.code}: {reply.error.message}"
                    out += [t for t in reply.result.get("tools", []) if isinstance(t, dict)]
                    cursor = reply.result.get("nextCursor")
                    if not isinstance(cursor, str) or not cursor:
                        break
                    params = {"cursor": cursor}
                return out
            finally:
                await session.close()
    except TimeoutError:
        return f"no answer within {PROBE_TIMEOUT:g} s"
    except UpstreamError as exc:
        return str(exc)

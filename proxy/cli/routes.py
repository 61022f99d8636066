"""`check-config`'s view of the aggregated routes: what each serves, and with `--probe` the merged tool
names a client would see, read live from the upstreams (and any name clash, named as /readyz would)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp

from proxy.cli import glob_check
from proxy.config import Config, ToolPolicy, UpstreamConfig
from proxy.routes.binding import bindings
from proxy.routes.index import NameIndex
from proxy.routes.names import LISTS, entries
from proxy.routes.policy import judge
from proxy.routes.table import RouteTable
from proxy.upstream.base import UpstreamError, UpstreamSession
from proxy.upstream.connect import open_upstream_session
from proxy.upstream.pool_sessions import no_call_answer
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


def describe_bindings(config: Config) -> list[str]:
    """One line per (route, member) pair: whether a 2026-07-28 upstream's requestState and task ids are
    sealed to the principal there (routes/binding.py), and why."""
    lines = []
    for b in bindings(config):
        path = f"/servers/{b.route or b.upstream}/mcp"
        verdict = "bound to the principal" if b.bound else "passed as the upstream gives them"
        lines.append(f"binding {path} -> {b.upstream}: requestState and task ids {verdict} ({b.why})")
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
    policy applied (token rules shown, not applied), and every clash of tools, prompts, resources and
    templates named. False when an upstream of a route could not be listed."""
    names = sorted({m.upstream for r in config.routes for m in r.upstreams})
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:  # as the proxy's
        listed = await asyncio.gather(*(_lists(http, config.upstream(name)) for name in names))
    lists = dict(zip(names, listed, strict=True))
    lines, ok = [], True
    for route in RouteTable.of(config):
        index = NameIndex()
        merged: list[str] = []
        for method in LISTS:
            for member in route.members:
                found = lists[member.upstream]
                if isinstance(found, str):
                    if method == "tools/list":
                        lines.append(
                            f"route {route.name}: upstream {member.upstream} could not be listed: {found}"
                        )
                        ok = False
                    continue
                for entry in index.add(entries(route, member, method, found[method])):
                    refused = judge(route, member, entry.key, entry.local, None)
                    if method != "tools/list":
                        continue
                    if refused is None:
                        merged.append(entry.key)
                    elif refused.reason in ("insufficient_scope", "claim_mismatch"):
                        merged.append(f"{entry.key} (token rule)")
        lines.append(f"route {route.name}: {len(merged)} tools: {', '.join(merged)}")
        lines += [f"route {route.name}: clash: {clash.describe()}" for clash in index.clashes]
        lines += glob_check.probed(route, lists)  # a policy glob that matches no tool: a warning
    return lines, ok


async def _lists(
    http: aiohttp.ClientSession, upstream: UpstreamConfig
) -> Mapping[str, Mapping[str, Any]] | str:
    """Every page of each list `upstream` has (a session of its own, closed after), as one result per list;
    or why it could not be listed. A list the server does not have is empty."""
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
                return {method: await _every_page(session, method) for method in LISTS}
            finally:
                await session.close()
    except TimeoutError:
        return f"no answer within {PROBE_TIMEOUT:g} s"
    except (UpstreamError, _Refused) as exc:
        return str(exc)


class _Refused(Exception):
    pass


async def _every_page(session: UpstreamSession, method: str) -> Mapping[str, Any]:
    kind = LISTS[method][0]
    out: list[Any] = []
    params: dict[str, Any] = {}
    for _ in range(MAX_PAGES):
        reply = await session.request(method, params, PROBE_TIMEOUT)
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

"""Readiness and the probes (`/healthz`, `/readyz`), the peer-keys route, and which port serves what."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from proxy.calls.saturation import saturation
from proxy.cluster.agreement import Agreement, keys_detail, serve_keys
from proxy.config import UpstreamConfig
from proxy.process.appstate import CALLS, CODEC, CONFIG, ERAS, KEY_CHECK, PEERS, POOLS, ROTATION, STATE
from proxy.process.periodic import every
from proxy.upstream.pool import no_call_answer
from proxy.upstream.reachability import CommandChecks

_ADMIN = frozenset({"/healthz", "/readyz", "/metrics"})


@web.middleware
async def ports(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """With `replica.peer_port` set, the peer routes (/_mrtr/…) are served on it only, and of the rest only
    the probes and /metrics are (an admin port as well)."""
    peer_port = request.app[CONFIG].replica.peer_port
    if peer_port is not None:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        on_peer_port = isinstance(sockname, tuple) and sockname[1] == peer_port
        peer_route = request.path.startswith("/_mrtr/")
        if (peer_route and not on_peer_port) or (
            on_peer_port and not peer_route and request.path not in _ADMIN
        ):
            raise web.HTTPNotFound()
    return await handler(request)


async def peer_key_checks(app: web.Application) -> AsyncIterator[None]:
    """Cleanup context: ask the peers for their key ids at once (before readiness), then every
    `replica.peer_check_s` seconds (cluster/agreement.py judges the answers); without peers, alone."""
    check = app[KEY_CHECK]
    if not check.enabled:
        check.agreement = Agreement("alone")
        yield
        return
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http,
        every(
            app[CONFIG].replica.peer_check_s,
            lambda: check.check(http, app[CODEC].ring),
            name="peer-key-check",
            failed="keys.peer_check_failed",
            at_once=True,
        ),
    ):
        yield


async def peer_keys(request: web.Request) -> web.Response:
    return await serve_keys(request, request.app[PEERS])


async def healthz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def upstream_reachable(
    upstream: UpstreamConfig, commands: CommandChecks | None = None, timeout: float = 1.0
) -> bool:
    """Can the upstream be reached: a TCP connection to a URL's host and port opens within `timeout` (no
    MCP exchange: a probe opens no session); a stdio command starts and answers `initialize`
    (upstream/reachability.py)."""
    if upstream.command is not None:
        commands = commands or CommandChecks()
        return await commands.reachable(upstream, no_call_answer(upstream))
    parts = urlsplit(upstream.url or "")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(parts.hostname, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def _probe_eras(app: web.Application, reachable: list[str], timeout: float = 2.0) -> None:
    """Probe the era of reachable upstreams not probed yet (without credentials: one that wants them stays
    unknown until a client's request probes it), for at most `timeout`."""
    eras = app[ERAS]
    unknown = [name for name, era in eras.describe().items() if era == "unknown" and name in reachable]
    if unknown:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(eras.era(name) for name in unknown))


async def readyz(request: web.Request) -> web.Response:
    """Ready: keys loaded (always, once started), not draining, and at least one upstream reachable. One
    upstream down does not take a gateway out of rotation for the others: the body says which is down.
    Saturation is not unreadiness: a full replica still serves plain calls, retries of its parked calls and
    new calls as room frees, and when every replica is full a Service that routes on readiness would have no
    endpoints left, so plain calls that worked would fail too. It is said in the body (`saturated`), in
    `mrtr_proxy_saturated`, and to each refused call (503 -31003, which a balancer may retry elsewhere)."""
    app = request.app
    upstreams = app[CONFIG].upstreams
    commands = app[STATE].commands
    reachable = await asyncio.gather(*(upstream_reachable(up, commands) for up in upstreams))
    await _probe_eras(app, [up.name for up, ok in zip(upstreams, reachable, strict=True) if ok])
    ring, agreement = app[CODEC].ring, app[KEY_CHECK].agreement
    body = {
        "key_ring": keys_detail(ring, app[ROTATION].describe(ring, time.monotonic()), agreement),
        "parked_calls": app[CALLS].registry.parked_count,
        "upstreams": {
            up.name: "reachable" if ok else "unreachable" for up, ok in zip(upstreams, reachable, strict=True)
        },
        "upstream_eras": app[ERAS].describe(),  # legacy, modern, or unknown (not probed yet)
    }
    if app[STATE].draining:
        return web.json_response({"status": "draining", **body}, status=503)
    if not any(reachable):
        return web.json_response({"status": "no upstream reachable", **body}, status=503)
    if agreement.verdict == "checking":  # not before it knows whether its peers hold its keys
        return web.json_response({"status": "checking peers' keys", **body}, status=503)
    if agreement.verdict == "mismatch" and app[CONFIG].replica.key_mismatch == "unready":
        return web.json_response({"status": "key_mismatch", **body}, status=503)
    if full := saturation(app[CALLS], app[POOLS]):
        body["saturated"] = full
    return web.json_response({"status": "ready", **body})

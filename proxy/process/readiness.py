"""Readiness and the probes (`/healthz`, `/readyz`), the peer-keys route, and which port serves what."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from proxy.calls.saturation import saturation
from proxy.cluster.agreement import Agreement, keys_detail, serve_keys
from proxy.config import UpstreamConfig
from proxy.process.appstate import (
    CALLS,
    CODEC,
    CONFIG,
    ERA_SETTINGS,
    ERAS,
    KEY_CHECK,
    PEERS,
    POOLS,
    ROTATION,
    ROUTES,
    STATE,
    UPSTREAM_HTTP,
)
from proxy.process.periodic import every
from proxy.upstream.era import speaks_modern
from proxy.upstream.pool_sessions import no_call_answer
from proxy.upstream.reachability import InitializeChecks, command_answers, url_answers

WRONG_ERA = "wrong era"  # /readyz's state of an upstream whose `era` setting does not fit the server
URL_WAIT_S = 1.5  # within the chart's 2 s probe timeout; a slower check answers the next probe
_ADMIN = frozenset({"/healthz", "/readyz", "/metrics"})


def ports(request: web.Request) -> None:
    """With `replica.peer_port` set, the peer routes (/_mrtr/…) are served on it only, and of the rest only
    the probes and /metrics are (an admin port as well): HTTPNotFound otherwise. A gate of the app's
    outermost middleware (front/fallback.py's `json_answers_with`), checked before every request."""
    peer_port = request.app[CONFIG].replica.peer_port
    if peer_port is not None:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        on_peer_port = isinstance(sockname, tuple) and sockname[1] == peer_port
        peer_route = request.path.startswith("/_mrtr/")
        if (peer_route and not on_peer_port) or (
            on_peer_port and not peer_route and request.path not in _ADMIN
        ):
            raise web.HTTPNotFound()


async def peer_key_checks(app: web.Application) -> AsyncIterator[None]:
    """Cleanup context: ask the peers for their key ids at once (before readiness), then every
    `replica.peer_check_s` seconds (cluster/agreement.py judges the answers); without peers, alone."""
    check = app[KEY_CHECK]
    if not check.enabled:
        check.agreement = Agreement("alone")
        yield
        return
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(force_close=True), cookie_jar=aiohttp.DummyCookieJar()
        ) as http,
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


async def port_open(upstream: UpstreamConfig, timeout: float = 1.0) -> bool:
    """A TCP connection to a URL upstream's host and port opens within `timeout`."""
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


async def upstream_state(app: web.Application, upstream: UpstreamConfig) -> tuple[str, str | None]:
    """`reachable`, `unreachable` (nothing answers) or `not initialising` (it answers, but `initialize`
        fails), with why when it is not reachable. A stdio command: its 2026-07-28 child answered
    `server/discover` (era.py), or it starts and answers `initialize`. A URL:
        its port opens within 1 s and it has answered `initialize` once since start — a session of its pool
        did, or the check's own session (a failure kept RECHECK_S, see upstream/reachability.py)."""
    checks: InitializeChecks = app[STATE].initialize_checks
    answer = no_call_answer(upstream)
    if upstream.command is not None:
        if upstream.era == "modern" and (wrong := await _era_setting(app, upstream)) is not None:
            return WRONG_ERA, wrong  # a legacy stdio server under era: modern
        if speaks_modern(await _era(app, upstream.name)):  # its 2026-07-28 child answered server/discover
            return "reachable", None
        problem = await checks.problem(upstream.name, lambda: command_answers(upstream, answer))
        wrong = None
        if problem is not None and upstream.era == "legacy":  # a 2026-07-28-only stdio server?
            wrong = await _era_setting(app, upstream, refused=True)
        if wrong:
            return WRONG_ERA, wrong
        return ("reachable", None) if problem is None else ("unreachable", problem)
    if not await port_open(upstream):
        return "unreachable", "its port does not accept connections"
    if upstream.era == "modern" and (wrong := await _era_setting(app, upstream)) is not None:
        return WRONG_ERA, wrong  # a legacy server under era: modern (pool sessions do not say so)
    if app[POOLS][upstream.name].initialised or upstream.name in checks.answered:
        return "reachable", None
    if speaks_modern(await _era(app, upstream.name)):  # it answered server/discover: no initialize to expect
        return "reachable", None
    http = app[UPSTREAM_HTTP][upstream.name]
    problem = await checks.problem(upstream.name, lambda: url_answers(http, upstream, answer), URL_WAIT_S)
    if problem is not None:
        if upstream.era == "legacy" and (wrong := await _era_setting(app, upstream, refused=True)):
            return WRONG_ERA, wrong  # a 2026-07-28-only server under era: legacy, in one line
        return "not initialising", problem
    checks.answered.add(upstream.name)  # once since start is enough: from now on the TCP check only
    return "reachable", None


async def _era_setting(
    app: web.Application, upstream: UpstreamConfig, *, refused: bool = False
) -> str | None:
    """The line naming a wrong `era` setting (upstream/era_setting.py), checked once since start and again
    while a line is held (a server swapped in place may fit the setting now), for at most URL_WAIT_S."""
    settings = app[ERA_SETTINGS]
    name = upstream.name
    if name in settings.checked and name not in settings.wrong and not refused:
        return None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(URL_WAIT_S):
            await settings.check(name, initialize_refused=refused)
    return settings.wrong.get(name)


async def _era(app: web.Application, name: str, timeout: float = URL_WAIT_S) -> str:
    """The upstream's era, probed (without credentials: one that wants them stays unknown until a client's
    request probes it) if not known yet, for at most `timeout`."""
    eras = app[ERAS]
    if eras.describe()[name] == "unknown":
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await eras.era(name)
    return eras.describe()[name]


async def readyz(request: web.Request) -> web.Response:
    """Ready: keys loaded (always, once started), not draining, and at least one upstream reachable. One
    upstream down does not take a gateway out of rotation for the others: the body says which is down, and
    why (`upstream_problems`). Saturation is not unreadiness: a full replica still serves plain calls, retries
    of its parked calls and new calls as room frees, and when every replica is full a Service that routes on
    readiness would have no endpoints left, so plain calls that worked would fail too. It is said in the body
    (`saturated`), in `mrtr_proxy_saturated`, and to each refused call (503 -31003, which a balancer may retry
    elsewhere)."""
    app = request.app
    upstreams = app[CONFIG].upstreams
    states = await asyncio.gather(*(upstream_state(app, up) for up in upstreams))
    reachable = [state == "reachable" for state, _ in states]
    ring, agreement = app[CODEC].ring, app[KEY_CHECK].agreement
    body: dict[str, object] = {
        "key_ring": keys_detail(ring, app[ROTATION].describe(ring, time.monotonic()), agreement),
        "parked_calls": app[CALLS].registry.parked_count,
        "upstreams": {up.name: state for up, (state, _) in zip(upstreams, states, strict=True)},
        "upstream_eras": app[ERAS].describe(),  # legacy, modern, both, or unknown (not probed yet)
    }
    if learned := app[ERAS].paths.learned():  # two-era upstreams' tools whose path this replica learned
        body["learned_tools"] = learned
    if routes := app[CONFIG].routes:  # aggregated routes: who the last lists left out, name clashes
        now = time.monotonic()
        body["routes"] = {
            r.name: app[ROUTES].detail(r.name, [m.upstream for m in r.upstreams], now) for r in routes
        }
    if problems := {up.name: why for up, (_, why) in zip(upstreams, states, strict=True) if why}:
        body["upstream_problems"] = problems
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

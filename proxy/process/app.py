"""`create_app(config)`: wires the layers together with typed AppKeys; resources live in cleanup contexts."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import aiohttp
import structlog
from aiohttp import web

from proxy.auth.metadata import WELL_KNOWN
from proxy.auth.setup import prepare
from proxy.calls.outcomes import CallSettings
from proxy.calls.registry import CallRegistry
from proxy.calls.roots import RootsBook
from proxy.calls.saturation import saturation
from proxy.calls.service import CallService
from proxy.cluster.agreement import KEYS_PATH, PeerKeyCheck
from proxy.cluster.keys import promote_due_key
from proxy.config import Config
from proxy.front.address import AddressSource
from proxy.front.cors import Cors, preflight_gate
from proxy.front.endpoint import Endpoint
from proxy.front.fallback import json_answers_with
from proxy.front.legacy.bridge.front import BridgeSettings, LegacyBridge
from proxy.front.legacy.front import LegacyFront
from proxy.front.legacy.mirror.front import MIRROR_PEER_PATH, LegacyMirror, peer_route
from proxy.front.legacy.quota import SessionQuota
from proxy.front.modern.aggregate.list_cache import ListCache
from proxy.front.modern.front import ModernFront
from proxy.front.modern.inner import InnerFront
from proxy.front.modern.listen.front import ListenFront
from proxy.front.modern.relay.native import NativeRelay
from proxy.front.oauth import OAUTH, OAuthFront, metadata_endpoint
from proxy.front.peers import FORWARD_PREFIX, Peers
from proxy.front.planner import Planner
from proxy.front.principal import resolver
from proxy.front.request_ids import echo_request_id
from proxy.handle import HandleCodec, KeyRing
from proxy.handle.rotation import Rotation
from proxy.observe.metrics import METRICS, Metrics, metrics_endpoint
from proxy.observe.tracing import Tracing
from proxy.observe.tracing import setup as setup_tracing
from proxy.process import readiness
from proxy.process.appstate import (
    CALLS,
    CODEC,
    CONFIG,
    ERA_SETTINGS,
    ERAS,
    FRONT,
    FRONT_DOOR,
    HTTP,
    KEY_CHECK,
    MIRROR,
    PEERS,
    POOLS,
    PREPARED,
    ROTATION,
    STATE,
    TASKS,
    TRACING,
    UPSTREAM_HTTP,
    RuntimeState,
)
from proxy.process.keys import install_sighup, key_ring, key_sources_fingerprint, reload_keys
from proxy.process.migration import migration_book
from proxy.process.periodic import every
from proxy.process.routing import aggregated
from proxy.tasks.front import TaskFront
from proxy.tasks.manager import TaskManager, TaskSettings
from proxy.tasks.policy import TaskPolicy
from proxy.upstream.era import EraBook
from proxy.upstream.era_setting import EraSettings
from proxy.upstream.lean_http import IDLE_TTL, LeanClient
from proxy.upstream.pool import SessionPool
from proxy.upstream.pool_sessions import no_call_answer, session_adopter, session_factory
from proxy.upstream.senders import ModernSenders
from proxy.upstream.tls import tls_sessions

log = structlog.get_logger(__name__)

HOUSEKEEPING_INTERVAL = 1.0


def create_app(
    config: Config,
    *,
    ring: KeyRing | None = None,
    handle_signals: bool = False,
    tracing: Tracing | None = None,
) -> web.Application:
    """The proxy as an aiohttp application. `handle_signals` installs SIGHUP (reload the key ring).
    `tracing`: instead of the one `config.tracing` asks for (tests). Raises TracingUnavailable, and
    AuthSetupError when a static JWKS, a service credential or a TLS file cannot be used."""
    cors = Cors(config.front.allowed_origins)  # browsers on front.allowed_origins (front/cors.py)
    # One middleware: JSON-RPC answers for what aiohttp would answer in text, with the peer port's refusals
    # and CORS preflights checked inside it (front/fallback.py), and the listener's guard told of each
    # request from it (`serve` sets its watch), not as hops of their own.
    door = json_answers_with(readiness.ports, preflight_gate(cors))
    app = web.Application(client_max_size=config.front.max_body_bytes, middlewares=[door])
    app[FRONT_DOOR] = door
    app[CONFIG] = config
    app[PREPARED] = prepare(config)
    app[STATE] = RuntimeState()
    app[ROTATION] = Rotation(config.keys.promote_after_s)
    app[CODEC] = codec = HandleCodec(ring or key_ring(config, rotation=app[ROTATION]))
    # Bounded: a forwarded retry runs at most one round (calls.call_timeout_s) on the owner.
    app[PEERS] = Peers(
        config.replica_address, lambda: codec.ring, answer_timeout=config.calls.call_timeout_s + 30
    )
    app[KEY_CHECK] = PeerKeyCheck(app[PEERS], config.replica_address, config.replica.peers)
    app[METRICS] = Metrics((u.name for u in config.upstreams), config.metrics.tools)
    app[METRICS].limits(
        max_calls=config.calls.max_parked,
        max_sessions={u.name: u.pool.max_sessions for u in config.upstreams},
        drain_grace_s=config.calls.drain_grace_s,
    )
    app[TRACING] = tracing if tracing is not None else setup_tracing(config.tracing)

    async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        # One receiver for both: aiohttp awaits each receiver, a coroutine per receiver per answer.
        echo_request_id(request, response)
        cors.on_prepare(request, response)

    app.on_response_prepare.append(on_prepare)
    app.on_cleanup.append(_stop_tracing)
    app.cleanup_ctx.append(_upstreams)
    app.cleanup_ctx.append(_era_settings)
    app.cleanup_ctx.append(_housekeeping)
    app.cleanup_ctx.append(readiness.peer_key_checks)
    if handle_signals:
        app.on_startup.append(install_sighup)
    app.router.add_route("*", "/mcp", _mcp)
    app.router.add_route("*", "/servers/{upstream}/mcp", _mcp)
    # Retries forwarded by another replica to the one that holds their parked call (see front/peers.py).
    app.router.add_route("POST", f"{FORWARD_PREFIX}/mcp", _mcp)
    app.router.add_route("POST", f"{FORWARD_PREFIX}/servers/{{upstream}}/mcp", _mcp)
    # RFC 9728 protected-resource metadata: the root form and every route's path-suffixed form.
    app.router.add_get(WELL_KNOWN, metadata_endpoint)
    app.router.add_get(WELL_KNOWN + "/{tail:.*}", metadata_endpoint)
    app.router.add_get(KEYS_PATH, readiness.peer_keys)
    app.router.add_post(MIRROR_PEER_PATH, peer_route)  # a legacy client's answer or cancel, to its call
    app.router.add_get("/healthz", readiness.healthz)
    app.router.add_get("/readyz", readiness.readyz)
    if config.metrics.public:  # else only on the admin listener (proxy/process/admin.py)
        app.router.add_get("/metrics", metrics_endpoint)
    return app


async def _upstreams(app: web.Application) -> AsyncIterator[None]:
    """One HTTP client, one session pool per upstream, and the call service over them."""
    config = app[CONFIG]
    http = aiohttp.ClientSession(
        # Idle connections kept for the lean client's IDLE_TTL, below servers' own 5 s (lean_http.py)
        connector=aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=IDLE_TTL),
        cookie_jar=aiohttp.DummyCookieJar(),  # shared by every user: an upstream's cookie goes to no one
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=max(u.timeouts.connect_s for u in config.upstreams)
        ),
    )
    app[HTTP] = http
    tls_clients = tls_sessions(app[PREPARED].tls, http.timeout)  # private CA / client certificate
    clients = {up.name: tls_clients.get(up.name, http) for up in config.upstreams}
    app[UPSTREAM_HTTP] = clients
    # The legacy Streamable HTTP sessions' POSTs and every request to a modern upstream but the era probe
    # (lean_http.py); the rest on aiohttp
    lean = LeanClient()
    roots = RootsBook()  # what each pooled session's server asked of roots before any call (calls/roots.py)
    # stdio upstreams' 2026-07-28 children (one per upstream), and how any modern upstream is sent to
    senders = ModernSenders({u.name: u for u in config.upstreams}, clients, lean=lean)
    app[ERAS] = eras = EraBook({u.name: u for u in config.upstreams}, clients, senders.children)
    lists = ListCache()  # the aggregated routes' list pages: every pooled session's list_changed reaches it
    heard = {
        up.name: functools.partial(lists.heard, up.name) if config.routes else None for up in config.upstreams
    }
    pools = {
        up.name: SessionPool(
            up.name,
            session_factory(up, clients[up.name], roots, heard[up.name], lean),
            max_sessions=up.pool.max_sessions,
            idle_ttl=up.pool.idle_ttl_s,
            adopter=session_adopter(up, clients[up.name], lean),
            reuse=up.pool.reuse_sessions,
            acquire_timeout=up.pool.acquire_timeout_s,
            on_lost=functools.partial(eras.suspect, up.name),
            max_per_principal=up.pool.max_sessions_per_principal,
        )
        for up in config.upstreams
    }
    app[POOLS] = pools
    calls = config.calls
    app[CALLS] = CallService(
        pools,
        app[CODEC],
        CallRegistry(
            max_calls=calls.max_parked,
            max_per_principal=calls.max_parked_per_principal,
            max_per_address=calls.max_calls_per_address,
            first_round_ttl=calls.first_round_ttl_s,
        ),
        CallSettings(
            gather_window=calls.gather_window_ms / 1000,
            parked_ttl=calls.parked_ttl_s,
            call_timeout=calls.call_timeout_s,
            owner=config.replica_address,
            parked_share=calls.parked_share,
        ),
        observer=app[METRICS],
        roots=roots,
    )
    service = app[CALLS]
    app[METRICS].watch(
        service.registry,
        pools,
        saturation=lambda: saturation(service, pools),
        eras=eras.describe,
        learned=eras.paths.learned,
    )
    app[TASKS] = TaskManager(
        app[CALLS],
        app[CODEC],
        TaskSettings(
            ttl_ms=calls.tasks.ttl_ms,
            poll_interval_ms=calls.tasks.poll_interval_ms,
            owner=config.replica_address,
            max_tasks=calls.max_parked,
        ),
    )
    tasks = TaskFront(app[TASKS], TaskPolicy(calls.tasks), app[CODEC], config.replica_address)
    by_name = {u.name: u for u in config.upstreams}
    # Legacy clients of sse/stdio upstreams: a session of their own each (front/legacy/bridge/front.py).
    settings = BridgeSettings.from_config(config)
    quota = SessionQuota(  # legacy sessions per principal and client address, relayed and bridged alike
        per_principal=config.front.legacy_sessions_per_principal,
        per_address=config.front.legacy_sessions_per_address,
    )
    addresses = AddressSource.from_config(config.front)
    bridge = LegacyBridge(
        http,
        app[CODEC],
        by_name,
        no_call_answer,
        settings=settings,
        state=app[STATE],
        quota=quota,
        addresses=addresses,
        clients=clients,
    )
    upstreams = {u.name: u for u in config.upstreams}
    app[MIRROR] = mirror = LegacyMirror.from_config(
        config,
        senders,
        eras,
        app[CODEC],
        app[KEY_CHECK],
        state=app[STATE],
        admission=app[CALLS].registry,
        addresses=addresses,
    )
    principal = resolver(config.principal)
    app[OAUTH] = OAuthFront.from_config(config, app[PREPARED], http, clients)
    relay = NativeRelay.from_config(config, senders, eras, app[CODEC])  # to 2026-07-28 upstreams
    aggregate = aggregated(app, pools, tasks, senders, eras, cache=lists)  # routes of several upstreams
    listen = ListenFront(
        front=config.front, pools=pools, state=app[STATE], tasks=tasks, relay=relay, aggregate=aggregate
    )
    modern = ModernFront(
        planner=Planner(upstreams, eras, app[CODEC], relay=relay is not None),  # which job serves a request
        front=config.front,
        upstreams=upstreams,
        pools=pools,
        calls=app[CALLS],
        principal=principal,
        peers=app[PEERS],
        state=app[STATE],
        tasks=tasks,
        listen=listen,
        oauth=app[OAUTH],
        relay=relay,
        aggregate=aggregate,
    )
    mirror.inner = InnerFront(modern, app[CALLS])  # legacy clients of routes and of `legacy_tools`
    app[FRONT] = Endpoint(
        front=config.front,
        upstreams=upstreams,
        principal=principal,
        legacy=LegacyFront(
            http,
            app[CODEC],
            by_name,
            bridge=bridge,
            clients=clients,
            quota=quota,
            addresses=addresses,
            mirror=mirror,
            planner=modern.pipeline.planner,
        ),
        modern=modern,
        tracing=app[TRACING],
        oauth=app[OAUTH],
        migration=migration_book(app, modern, mirror),  # the migration report's counts
    )
    try:
        yield
    finally:
        await app[TASKS].close()
        await app[CALLS].close()
        await bridge.close()
        await app[OAUTH].close()  # a JWKS fetch still in flight
        await app[STATE].initialize_checks.close()  # a /readyz check still running
        await app[PEERS].close()
        await asyncio.gather(*(p.close() for p in pools.values()), return_exceptions=True)
        await senders.close()  # stdio upstreams' 2026-07-28 children
        await asyncio.gather(lean.close(), *(c.close() for c in tls_clients.values()), return_exceptions=True)
        await http.close()


async def _era_settings(app: web.Application) -> AsyncIterator[None]:
    """The check of each configured `era` (upstream/era_setting.py): told by the era book when a configured
    verdict failed a request, asked by /readyz."""
    config = app[CONFIG]
    app[ERA_SETTINGS] = checks = EraSettings({u.name: u for u in config.upstreams}, app[UPSTREAM_HTTP])
    app[ERAS].on_setting_doubted = checks.doubted
    try:
        yield
    finally:
        app[ERAS].on_setting_doubted = None
        await checks.close()  # a check still running


async def _mcp(request: web.Request) -> web.StreamResponse:
    return await request.app[FRONT].handle(request)


async def _stop_tracing(app: web.Application) -> None:
    await asyncio.to_thread(app[TRACING].shutdown)  # flushes spans not exported yet (blocking I/O)


async def _housekeeping(app: web.Application) -> AsyncIterator[None]:
    """Reap parked calls past their TTL and idle upstream sessions, once a second."""

    config = app[CONFIG]
    keys_seen = key_sources_fingerprint(config)

    async def once() -> None:
        nonlocal keys_seen
        await app[TASKS].reap_expired()
        await app[CALLS].reap_expired()
        for pool in app[POOLS].values():
            pool.reap_idle()
        if (current := key_sources_fingerprint(config)) != keys_seen:
            keys_seen = current
            reload_keys(app)
        promote_due_key(app[ROTATION], app[CODEC])

    async with every(HOUSEKEEPING_INTERVAL, once, name="housekeeping", failed="housekeeping.failed"):
        yield


async def drain(app: web.Application) -> None:
    """SIGTERM: readiness goes false at once, new calls are refused (-31005, retry elsewhere), retries of
    parked calls are served for `calls.drain_grace_s`, then what is left is handed over or cancelled."""
    app[STATE].draining = True
    app[METRICS].drain_started()
    log.info(
        "drain.started",
        parked_calls=app[CALLS].registry.parked_count,
        grace_s=app[CONFIG].calls.drain_grace_s,
    )
    loop = asyncio.get_running_loop()
    grace = app[CONFIG].calls.drain_grace_s
    deadline = loop.time() + grace
    await app[CALLS].drain(grace)
    app[MIRROR].calls.shut_down()  # legacy clients of modern upstreams still waiting are told (-31011)
    # Retries relayed to their owner are not calls of this replica: wait for their answers too (each is
    # bounded: its owner answers, is found gone, or the forward times out).
    while app[STATE].forwarding and loop.time() < deadline + 5:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    app[STATE].stopped = True
    log.info("drain.finished")

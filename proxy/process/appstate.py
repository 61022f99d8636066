"""The typed keys of the application's state (`app[CODEC]`, …) and what changes while it runs. `app.py`
re-exports them; `readiness.py` and `admin.py` read them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from proxy.auth.setup import Prepared
from proxy.calls.service import CallService
from proxy.cluster.agreement import PeerKeyCheck
from proxy.config import Config
from proxy.front.endpoint import Endpoint
from proxy.front.fallback import JsonAnswers
from proxy.front.legacy.mirror.front import MIRROR
from proxy.front.peers import Peers
from proxy.handle import HandleCodec
from proxy.handle.rotation import Rotation
from proxy.migration.tally import MigrationBook
from proxy.observe.tracing import Tracing
from proxy.routes.health import RouteHealth
from proxy.tasks.manager import TaskManager
from proxy.upstream.era import EraBook
from proxy.upstream.era_setting import EraSettings
from proxy.upstream.pool import SessionPool
from proxy.upstream.reachability import InitializeChecks

__all__ = [
    "CALLS",
    "CODEC",
    "CONFIG",
    "ERAS",
    "ERA_SETTINGS",
    "FRONT",
    "HTTP",
    "KEY_CHECK",
    "MIGRATION",
    "MIRROR",
    "PEERS",
    "POOLS",
    "PREPARED",
    "ROTATION",
    "ROUTES",
    "STATE",
    "TASKS",
    "TRACING",
    "RuntimeState",
]

CONFIG = web.AppKey("config", Config)
CODEC = web.AppKey("codec", HandleCodec)
POOLS = web.AppKey("pools", Mapping[str, SessionPool])
FRONT = web.AppKey("front", Endpoint)
CALLS = web.AppKey("calls", CallService)
TASKS = web.AppKey("tasks", TaskManager)
TRACING = web.AppKey("tracing", Tracing)
FRONT_DOOR = web.AppKey("front_door", JsonAnswers)  # the one middleware (front/fallback.py)
HTTP = web.AppKey("http", aiohttp.ClientSession)
UPSTREAM_HTTP = web.AppKey("upstream_http", Mapping[str, aiohttp.ClientSession])  # per upstream (its TLS)
PREPARED = web.AppKey("prepared", Prepared)
MIGRATION = web.AppKey("migration", MigrationBook)  # the migration report's counts (proxy/migration)
ROUTES = web.AppKey("routes", RouteHealth)  # what /readyz shows of the aggregated routes
ERAS = web.AppKey("eras", EraBook)  # each upstream's protocol era (proxy/upstream/era.py)
ERA_SETTINGS = web.AppKey(
    "era_settings", EraSettings
)  # a wrong `era` setting (proxy/upstream/era_setting.py)


@dataclass(slots=True)
class RuntimeState:
    """What changes while the process runs: set once shutdown begins."""

    draining: bool = False
    stopped: bool = False  # the drain is over: nothing more is processed (forwarded retries get 503)
    forwarding: int = 0  # retries this replica is relaying to their owner right now
    # /readyz: do stdio commands, and URLs no session has initialised yet, answer `initialize`
    initialize_checks: InitializeChecks = field(default_factory=InitializeChecks)


STATE = web.AppKey("state", RuntimeState)
ROTATION = web.AppKey("rotation", Rotation)
PEERS = web.AppKey("peers", Peers)
KEY_CHECK = web.AppKey("key_check", PeerKeyCheck)

"""In-process proxy and a raw 2026-07-28 HTTP client, for tests that assert exact wire shapes."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.config import (
    CallsConfig,
    Config,
    FrontConfig,
    KeysConfig,
    ListenConfig,
    MigrationConfig,
    PrincipalConfig,
    RouteConfig,
    StaticRoot,
    Transport,
    UpstreamConfig,
)
from proxy.handle import KeyRing
from proxy.observe.tracing import Tracing
from proxy.process.app import CALLS, CODEC, create_app
from proxy.wire import mcp
from proxy.wire.sse import SSEDecoder

ALL_CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
# Without roots: a server that asks for roots before any call (server-everything) then never does, so each
# call's first round is the tool's own (with roots declared, the proxy asks those first: calls/roots.py).
NO_ROOTS_CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}}
VERSION = "2026-07-28"


@dataclass
class RunningProxy:
    url: str
    app: web.Application
    ring: KeyRing

    @property
    def parked(self) -> int:
        return self.app[CALLS].registry.parked_count

    @property
    def live(self) -> int:
        return len(self.app[CALLS].registry)


@contextlib.asynccontextmanager
async def running_proxy(
    upstream_url: str | UpstreamConfig,
    *,
    ring: KeyRing | None = None,
    static_roots: tuple[StaticRoot, ...] = (),
    front: FrontConfig | None = None,
    keys: KeysConfig | None = None,
    principal: PrincipalConfig | None = None,
    names: tuple[str, ...] = ("default",),
    transport: Transport = "streamable-http",
    protocol_versions: tuple[str, ...] | None = None,
    extra: tuple[UpstreamConfig, ...] = (),
    tracing: Tracing | None = None,
    public_url: str | None = None,
    port: int | None = None,
    routes: tuple[RouteConfig, ...] = (),
    handler_cancellation: bool = True,
    migration: MigrationConfig | None = None,
    **calls: Any,
) -> AsyncIterator[RunningProxy]:
    """The proxy on 127.0.0.1 (free port) in front of `upstream_url` (under each of `names`: the first is
    also served at /mcp, each at /servers/<name>/mcp); stopped on exit. `transport` and `protocol_versions`
    configure the upstream (defaults: streamable-http, every legacy version). `upstream_url` may also be a
    whole `UpstreamConfig` (e.g. a stdio upstream): it is served under each of `names`, with `static_roots`
    when given; `transport` and `protocol_versions` are then ignored. `extra` upstreams are served too
    (a gateway). `tracing`: e.g. `proxy.observe.tracing.setup(config, exporter=InMemorySpanExporter())`.
    `public_url`: listen.public_url (the base of the routes' OAuth resource URLs). `port`: listen there
    instead of on a free port (a peer started first must know the proxy's URL). `routes`: aggregated
    routes over these upstreams (/servers/<route>/mcp). `handler_cancellation`: True
    (aiohttp's TestServer, and `mrtr-proxy serve`: process/startup.py) a client's hang-up cancels its
    request's handler; False (aiohttp's own default, for an app run by another runner) the handler runs on
    and its next write to the gone client raises."""
    upstream: dict[str, Any] = {"url": upstream_url, "static_roots": static_roots, "transport": transport}
    if protocol_versions is not None:
        upstream["protocol_versions"] = protocol_versions
    config = Config(
        upstreams=tuple(
            replace(upstream_url, name=n, static_roots=static_roots or upstream_url.static_roots)
            if isinstance(upstream_url, UpstreamConfig)
            else UpstreamConfig(name=n, **upstream)
            for n in names
        )
        + extra,
        routes=routes,
        listen=ListenConfig(host="127.0.0.1", port=8080, public_url=public_url),
        front=front or FrontConfig(),
        keys=keys or KeysConfig(),
        principal=principal or PrincipalConfig(),
        calls=CallsConfig(**calls),
        migration=migration or MigrationConfig(),
    )
    app = create_app(config, ring=ring if ring is not None or keys else KeyRing.ephemeral(), tracing=tracing)
    if not handler_cancellation:  # TestServer always cancels: the app on a runner of its own
        runner = web.AppRunner(app, handler_cancellation=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port or 0)
        await site.start()
        try:
            bound = runner.addresses[0][1]
            yield RunningProxy(f"http://127.0.0.1:{bound}/mcp", app, app[CODEC].ring)
        finally:
            await runner.cleanup()
        return
    server = TestServer(app, host="127.0.0.1", port=port)
    await server.start_server()
    try:
        yield RunningProxy(str(server.make_url("/mcp")), app, app[CODEC].ring)
    finally:
        await server.close()


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: Mapping[str, str]
    notifications: list[dict[str, Any]] = field(default_factory=list)  # before the answer, on an SSE reply

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.body, self.body
        return self.body["result"]  # type: ignore[no-any-return]

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, self.body
        return self.body["error"]  # type: ignore[no-any-return]


@dataclass
class RawClient:
    """Speaks 2026-07-28 by hand: every header and `_meta` field visible and overridable."""

    url: str
    http: aiohttp.ClientSession
    capabilities: dict[str, Any] = field(default_factory=lambda: dict(ALL_CAPS))
    authorization: str | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def body(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-test-client", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        }
        return {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": {**(params or {}), "_meta": meta},
        }

    def headers(self, body: dict[str, Any]) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": body["method"],
        }
        params = body.get("params", {})
        name = params.get(mcp.NAMED_METHODS.get(body["method"], "name"))  # tasks/*: the taskId
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        if self.authorization:
            headers["Authorization"] = self.authorization
        return headers

    async def send(self, body: dict[str, Any] | bytes, headers: Mapping[str, str] | None = None) -> Reply:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs = dict(headers) if headers is not None else self.headers(body)  # type: ignore[arg-type]
        async with self.http.post(self.url, data=data, headers=hdrs) as resp:
            raw = await resp.read()
            if resp.content_type == "text/event-stream":
                messages = [json.loads(e.data) for e in SSEDecoder().feed(raw) if e.data.strip()]
                final = messages.pop() if messages and "method" not in messages[-1] else {}
                return Reply(resp.status, final, resp.headers, messages)
            parsed = json.loads(raw) if raw and resp.content_type == "application/json" else {}
            return Reply(resp.status, parsed, resp.headers)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Reply:
        return await self.send(self.body(method, params))

    async def call(self, name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> Reply:
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}, **extra})

    async def retry(
        self, first: Reply, responses: dict[str, Any], name: str, arguments: dict[str, Any] | None = None
    ) -> Reply:
        """Retry `tools/call name` with the round's requestState and these inputResponses."""
        return await self.call(
            name, arguments, inputResponses=responses, requestState=first.result["requestState"]
        )


def accept_name(name: str = "Alice") -> dict[str, Any]:
    return {"action": "accept", "content": {"name": name}}


# A complete, valid answer to server-everything's `trigger-elicitation-request` form (its requestedSchema).
EVERYTHING_FORM: dict[str, Any] = {
    "name": "Ann",
    "email": "ann@example.com",
    "homepage": "https://ann.example",
    "birthdate": "1990-02-28",
    "integer": 7,
    "number": 2.5,
    "untitledSingleSelectEnum": "Joey",
    "untitledMultipleSelectEnum": ["Piano"],
    "titledSingleSelectEnum": "hero-2",
    "titledMultipleSelectEnum": ["fish-1", "fish-3"],
}


SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "Paris"},
    "model": "m",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///work/project", "name": "project"}]}

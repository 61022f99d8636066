"""OAuth at the front: validate mode's check before anything else runs, the upstream's 401/403 relayed
with a `WWW-Authenticate` that points at the proxy's metadata, and the metadata documents themselves
(`/.well-known/oauth-protected-resource` + the route's path, and the root form). See proxy/auth/."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from proxy.auth import metadata
from proxy.auth.gate import Admitted, AuthGate, KeySource
from proxy.auth.jwks import JwksCache, JwksUnavailable, http_fetcher
from proxy.auth.setup import Prepared
from proxy.auth.tokens import Rejected
from proxy.auth.upstream_metadata import UpstreamMetadata
from proxy.config import Config, RouteConfig, UpstreamConfig
from proxy.front.peers import FORWARD_PREFIX
from proxy.observe.line import Outcome, RequestLine
from proxy.upstream.base import UpstreamAuthChallenge
from proxy.wire import jsonrpc

log = structlog.get_logger(__name__)


class AuthRefused(Exception):
    """An answer with an HTTP status of its own (401, 403, 503), a JSON-RPC error body, maybe a challenge."""

    def __init__(self, status: int, message: str, www_authenticate: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.www_authenticate = status, message, www_authenticate

    def response(self, request_id: jsonrpc.RequestId | None) -> web.Response:
        error = jsonrpc.error(request_id, jsonrpc.INVALID_REQUEST, self.message)
        headers = {"WWW-Authenticate": self.www_authenticate} if self.www_authenticate else {}
        return web.Response(
            status=self.status, body=jsonrpc.dumps(error), content_type="application/json", headers=headers
        )


class OAuthFront:
    def __init__(
        self,
        gates: Mapping[str, AuthGate],
        upstream_docs: Mapping[str, UpstreamMetadata],
        *,
        by_host: Mapping[str, str],
        default: str,
    ) -> None:
        self._gates = gates
        self._docs = upstream_docs
        self._by_host = by_host
        self._default = default
        self._caches = [gate.keys for gate in gates.values() if isinstance(gate.keys, JwksCache)]

    async def close(self) -> None:
        """Stop JWKS fetches still in flight."""
        for cache in self._caches:
            await cache.close()

    @classmethod
    def from_config(
        cls,
        config: Config,
        prepared: Prepared,
        http: aiohttp.ClientSession,
        clients: Mapping[str, aiohttp.ClientSession],
    ) -> OAuthFront:
        """One AuthGate per upstream (validate mode: with its signing keys, fetched with `http`), and the
        upstreams' own metadata documents for pass-through mode (fetched with each upstream's client)."""
        gates = {}
        for up in (*config.upstreams, *map(route_as_upstream, config.routes)):
            keys: KeySource | None = prepared.static_keys.get(up.name)
            if up.auth.mode == "validate" and keys is None and up.auth.jwks_url:
                keys = JwksCache(
                    http_fetcher(http, up.auth.jwks_url),
                    ttl_s=up.auth.jwks_cache_ttl_s,
                    min_refresh_s=up.auth.jwks_min_refresh_s,
                )
            gates[up.name] = AuthGate(
                up,
                listen_public_url=config.listen.public_url,
                keys=keys,
                service_credential=prepared.credentials.get(up.name),
            )
        docs = {
            up.name: UpstreamMetadata(clients[up.name], up.url)
            for up in config.upstreams
            if up.url is not None and up.auth.mode == "passthrough"
        }
        by_host = {h.lower(): up.name for up in config.upstreams for h in up.hosts}
        by_host |= {h.lower(): route.name for route in config.routes for h in route.hosts}
        alone = next((u.name for u in config.upstreams if u.standalone), config.upstreams[0].name)
        default = next((r.name for r in config.routes if r.default), alone)
        return cls(gates, docs, by_host=by_host, default=default)

    def resource(self, request: web.Request, upstream: str) -> str:
        path = request.path.removeprefix(FORWARD_PREFIX)
        return self._gates[upstream].resource(path, f"{request.scheme}://{request.host}")

    async def admit(self, request: web.Request, upstream: str, line: RequestLine) -> Admitted | None:
        """validate mode: the verified request, else AuthRefused; pass-through: None (nothing to check)."""
        gate = self._gates[upstream]
        if not gate.validates:
            return None
        resource = self.resource(request, upstream)
        try:
            return await gate.admit(request.headers, resource)
        except Rejected as exc:
            line.set_outcome(Outcome.UNAUTHORIZED, exc.reason)
            word = "Forbidden" if exc.status == 403 else "Unauthorized"
            what = exc.description or f"a bearer token for {resource} is required"
            raise AuthRefused(exc.status, f"{word}: {what}", gate.challenge(exc, resource)) from None
        except JwksUnavailable as exc:
            line.set_outcome(Outcome.UNAUTHORIZED, "keys_unavailable")
            log.warning("auth.keys_unavailable", upstream=upstream, error=str(exc))
            raise AuthRefused(503, "Authorization keys are unavailable just now; retry shortly") from None

    def refused_principal(self, request: web.Request, upstream: str, line: RequestLine) -> AuthRefused:
        """principal.source jwt_claim and an Authorization header that is not a bearer JWT."""
        line.set_outcome(Outcome.UNAUTHORIZED, "not_a_jwt")
        resource = self.resource(request, upstream)
        rejected = Rejected(401, "invalid_token", "not_a_jwt", "the access token is not a JWT")
        return AuthRefused(
            401,
            "Unauthorized: the access token is not a JWT",
            self._gates[upstream].challenge(rejected, resource),
        )

    def upstream_judges(self, upstream: str) -> bool:
        """Pass-through to an HTTP upstream: only the upstream can tell whether a client's credentials are
        good, so nothing cached from another client's session may answer it (validate mode: the proxy
        already judged; stdio: no credentials at all)."""
        gate = self._gates[upstream]
        return not gate.validates and gate.upstream.url is not None

    def relayed(self, request: web.Request, upstream: str, exc: UpstreamAuthChallenge) -> AuthRefused:
        """The upstream refused the client's credentials: the client gets its status and challenge."""
        header = self.relayed_header(request, upstream, exc.www_authenticate)
        word = "Forbidden" if exc.status == 403 else "Unauthorized"
        return AuthRefused(exc.status, f"{word}: upstream {upstream!r} refused the credentials", header)

    def relayed_header(self, request: web.Request, upstream: str, raw: str | None) -> str:
        if (docs := self._docs.get(upstream)) is not None:
            docs.saw_challenge(raw)
        return AuthGate.relayed(raw, self.resource(request, upstream))

    async def serve_metadata(self, request: web.Request) -> web.Response:
        """GET /.well-known/oauth-protected-resource[/<route path>] (RFC 9728 §3)."""
        tail = request.match_info.get("tail", "").strip("/")
        found = self._route(tail, request)
        if found is None:
            raise web.HTTPNotFound(text="no protected resource at this path")
        upstream, route = found
        gate = self._gates[upstream]
        resource = gate.resource(route, f"{request.scheme}://{request.host}")
        doc: Mapping[str, Any] | None
        if gate.validates:
            doc = metadata.generated(gate.auth, resource)
        elif gate.auth.metadata is not None:
            doc = metadata.rewritten(gate.auth.metadata, resource)
        else:
            upstream_doc = await self._docs[upstream].document() if upstream in self._docs else None
            doc = None if upstream_doc is None else metadata.rewritten(upstream_doc, resource)
        if doc is None:
            raise web.HTTPNotFound(text=f"upstream {upstream!r} publishes no protected-resource metadata")
        return web.json_response(
            dict(doc), headers={"Cache-Control": "max-age=300", "Access-Control-Allow-Origin": "*"}
        )

    def _route(self, tail: str, request: web.Request) -> tuple[str, str] | None:
        host = (request.host or "").split(":", 1)[0].lower()
        if tail in ("", "mcp"):
            return self._by_host.get(host, self._default), "/mcp"
        parts = tail.split("/")
        if len(parts) == 3 and parts[0] == "servers" and parts[2] == "mcp" and parts[1] in self._gates:
            return parts[1], f"/{tail}"
        for name, gate in self._gates.items():  # a public_url behind an ingress that maps paths
            if gate.auth.public_url and metadata.metadata_url(gate.auth.public_url).endswith(f"/{tail}"):
                return name, "/mcp"
        return None


def route_as_upstream(route: RouteConfig) -> UpstreamConfig:
    """An aggregated route's gate is an upstream's gate with the route's `auth`: it admits tokens for the
    route's resource URL; in validate mode its `upstream_credential` and `claim_headers` say what goes to
    every upstream of the route (no client header is forwarded besides). No URL: nothing of the route's
    own is fetched, and only its upstreams judge credentials in pass-through mode."""
    return UpstreamConfig(
        name=route.name, transport="stdio", command="-", forward_headers=(), auth=route.auth
    )


OAUTH = web.AppKey("oauth", OAuthFront)


async def metadata_endpoint(request: web.Request) -> web.Response:
    """The aiohttp handler of the metadata routes (the app's OAuthFront serves them)."""
    return await request.app[OAUTH].serve_metadata(request)

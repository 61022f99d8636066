"""One upstream's authorization policy: which resource a route is, validating a request's bearer token
(validate mode), what goes upstream instead of or beside it, and the challenges clients get (RFC 6750 §3
with RFC 9728's `resource_metadata`). The signing keys come from a `KeySource` (proxy/auth/jwks.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import jwt

from proxy.auth import challenge, metadata
from proxy.auth.tokens import (
    JoseHeader,
    Rejected,
    TokenPolicy,
    Verified,
    bearer_token,
    check_type,
    jose_header,
    verify,
)
from proxy.config import UpstreamConfig
from proxy.handle import principal_digest


class KeySource(Protocol):
    async def key(self, header: JoseHeader) -> jwt.PyJWK: ...


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request validate mode let through: its principal and the headers that go upstream for it."""

    principal: str
    forwarded: tuple[tuple[str, str], ...]
    verified: Verified


class AuthGate:
    def __init__(
        self,
        upstream: UpstreamConfig,
        *,
        listen_public_url: str | None,
        keys: KeySource | None = None,
        service_credential: str | None = None,
    ) -> None:
        self.upstream = upstream
        self.auth = upstream.auth
        self._listen_public_url = listen_public_url
        self.keys = keys
        self._credential = service_credential
        self._policies: dict[str, TokenPolicy] = {}

    @property
    def validates(self) -> bool:
        return self.auth.mode == "validate"

    def resource(self, route_path: str, request_origin: str) -> str:
        return metadata.resource_url(self.auth, self._listen_public_url, route_path, request_origin)

    async def admit(self, headers: Mapping[str, str], resource: str) -> Admitted:
        """validate mode: the request's token, verified for `resource`. Raises Rejected (and JwksUnavailable
        when no signing keys can be had)."""
        assert self.keys is not None, "validate mode has a key source"
        policy = self._policies.get(resource)
        if policy is None:
            policy = self._policies.setdefault(resource, TokenPolicy.of(self.auth, resource))
        token = bearer_token(headers.get("Authorization"))
        header = jose_header(token, policy.algorithms)
        check_type(header, policy)  # before any key is looked up: a wrong kind of JWT costs no fetch
        verified = verify(token, header, await self.keys.key(header), policy)
        principal = principal_digest(f"oauth\0{verified.issuer}\0{verified.principal}")
        return Admitted(principal, self._forwarded(verified, headers), verified)

    def _forwarded(self, verified: Verified, headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """The upstream's credential header per `upstream_credential`, the claim headers, and the other
        `forward_headers` (never the client's Authorization unless the source is client_token)."""
        cred = self.auth.upstream_credential
        out: list[tuple[str, str]] = []
        if cred.source == "client_token" and "Authorization" in headers:
            out.append(("authorization", headers["Authorization"]))
        elif self._credential is not None:
            out.append((cred.header, self._credential))
        taken = {name for name, _ in out} | {"authorization"}
        for header, claim in self.auth.claim_headers.items():
            value = verified.claims.get(claim)
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                text = str(value)
                if text.isprintable() and len(text) <= 1024:
                    out.append((header, text))
                    taken.add(header)
        out += [(n, headers[n]) for n in self.upstream.forward_headers if n not in taken and n in headers]
        return tuple(out)

    def challenge(self, rejected: Rejected, resource: str) -> str:
        """The proxy's own challenge (validate mode, or a refused principal)."""
        scope = " ".join(self.auth.required_scopes) or None
        return challenge.build(
            {
                "error": rejected.error,
                "error_description": rejected.description,
                "resource_metadata": metadata.metadata_url(resource),
                "scope": scope,
            }
        )

    @staticmethod
    def relayed(upstream_header: str | None, resource: str) -> str:
        """An upstream's challenge as the client gets it: its error, description, scope and realm, with
        `resource_metadata` pointing at the proxy's document for the route the client called."""
        found = challenge.bearer(challenge.parse(upstream_header or ""))
        params = dict(found.params) if found is not None else {}
        return challenge.build(
            {
                "realm": params.get("realm"),
                "error": params.get("error"),
                "error_description": params.get("error_description"),
                "resource_metadata": metadata.metadata_url(resource),
                "scope": params.get("scope"),
            }
        )

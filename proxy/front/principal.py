"""Who a request comes from, as a short digest: what handles are bound to and per-principal limits count.

Sources (config `principal.source`): the whole `Authorization` header; a claim of a bearer JWT that an
ingress has already verified (the proxy only reads it, and refuses a header that is not a JWT at all); or a
header a trusted ingress sets. Upstreams in `auth.mode: validate` use the verified claim instead
(proxy/auth/gate.py). Pure.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

from proxy.config import PrincipalConfig
from proxy.handle import principal_digest
from proxy.routes.policy import Grant

Resolver = Callable[[Mapping[str, str]], str]


class Identity(NamedTuple):
    """Who a request is from, as the endpoint established it (front/endpoint.py `_identify`). (A named
    tuple, immutable as a frozen dataclass: made for every request, in C — a frozen dataclass's `__init__`
    sets each field through `object.__setattr__`.)"""

    principal: str  # the digest handles are bound to and per-principal limits count
    upstream_headers: tuple[tuple[str, str], ...] | None  # validate mode: the headers that go upstream for it
    grant: Grant | None  # validate mode: what the verified token grants (scopes, claims)


_SEGMENT = re.compile(r"^[A-Za-z0-9_-]+$")


class PrincipalRefused(Exception):
    """`principal.source: jwt_claim` and an Authorization header that is not a `Bearer <JWT>` carrying the
    claim: refused (401), never bound to some digest an attacker could choose."""


def jwt_claim(authorization: str | None, claim: str) -> str | None:
    """The string value of `claim` in a `Bearer <JWT>` header's payload, or None when the header is not a
    compact JWS (three base64url segments, a JSON header with `alg`, a JSON object payload, a signature)
    or lacks the claim. Does NOT verify the signature: that is the ingress's job (or validate mode's)."""
    if not authorization or authorization[:7].lower() != "bearer ":
        return None
    parts = authorization[7:].strip().split(".")
    if len(parts) != 3 or not all(_SEGMENT.match(p) for p in parts):
        return None
    header, payload = _b64json(parts[0]), _b64json(parts[1])
    if not isinstance(header, dict) or not isinstance(header.get("alg"), str) or header["alg"] == "none":
        return None
    value = payload.get(claim) if isinstance(payload, dict) else None
    return value if isinstance(value, str) and value else None


def _b64json(segment: str) -> object:
    try:
        return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error, RecursionError):  # RecursionError: '[' nested thousands deep
        return None


def resolver(config: PrincipalConfig) -> Resolver:
    if config.source == "header":
        name = config.header or ""

        def from_header(headers: Mapping[str, str]) -> str:
            value = headers.get(name)
            return principal_digest(f"header:{value}" if value else None)

        return from_header
    if config.source == "jwt_claim":
        claim = config.claim

        def from_claim(headers: Mapping[str, str]) -> str:
            authorization = headers.get("Authorization")
            if not authorization:
                return principal_digest(None)  # anonymous, as with every source
            value = jwt_claim(authorization, claim)
            if value is None:
                raise PrincipalRefused("the Authorization header is not a bearer JWT with the claim")
            return principal_digest(f"jwt\0{claim}\0{value}")

        return from_claim
    return lambda headers: principal_digest(headers.get("Authorization"))

"""Who a request comes from, as a short digest: what handles are bound to and per-principal limits count.

Sources (config `principal.source`): the whole `Authorization` header; a claim of a bearer JWT that an
ingress has already verified (the proxy only reads it); or a header a trusted ingress sets. Pure.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping

from proxy.config import PrincipalConfig
from proxy.handle import principal_digest

Resolver = Callable[[Mapping[str, str]], str]


def jwt_claim(authorization: str | None, claim: str) -> str | None:
    """The string value of `claim` in a `Bearer <JWT>` header's payload, or None. Does NOT verify."""
    if not authorization or authorization[:7].lower() != "bearer ":
        return None
    parts = authorization[7:].strip().split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    value = payload.get(claim) if isinstance(payload, dict) else None
    return value if isinstance(value, str) and value else None


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
            value = jwt_claim(authorization, claim)
            # No readable claim: bind to the whole header instead, which is never looser.
            return principal_digest(f"jwt:{claim}={value}" if value is not None else authorization)

        return from_claim
    return lambda headers: principal_digest(headers.get("Authorization"))

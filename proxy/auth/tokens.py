"""Bearer JWT access tokens (RFC 6750, RFC 9068): take the token from the header, check the JOSE header
against the allow-list, verify signature and claims with PyJWT, check scopes. Pure CPU, no I/O: the
signing key comes from the caller (proxy/auth/jwks.py). Error descriptions never echo token contents."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from proxy.config import AuthConfig

_TOKEN68 = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
NEVER = frozenset({"none", "HS256", "HS384", "HS512"})  # no unsigned tokens, no shared-secret confusion


class Rejected(Exception):
    """The request's credentials are not good enough. `status` 401 (missing or invalid token) or 403
    (insufficient scope); `error` the RFC 6750 code (None: no credentials were sent at all); `reason` a
    short label for the log and metrics; `description` safe to show the client."""

    def __init__(self, status: int, error: str | None, reason: str, description: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.error, self.reason, self.description = status, error, reason, description


@dataclass(frozen=True, slots=True)
class Verified:
    """A token that passed every check. `principal` is the value of the configured claim."""

    issuer: str
    principal: str
    scopes: frozenset[str]
    claims: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class JoseHeader:
    alg: str
    kid: str | None
    typ: str | None = None


@dataclass(frozen=True, slots=True)
class TokenPolicy:
    issuers: tuple[str, ...]
    audiences: tuple[str, ...]
    algorithms: frozenset[str]
    token_types: frozenset[str]
    leeway_s: float
    required_scopes: tuple[str, ...]
    principal_claim: str

    @classmethod
    def of(cls, auth: AuthConfig, resource: str) -> TokenPolicy:
        """The policy of one route: the audience is its resource URL unless `auth.audience` says otherwise."""
        return cls(
            issuers=auth.issuers,
            audiences=auth.audience or (resource,),
            algorithms=frozenset(auth.algorithms) - NEVER,
            token_types=frozenset(media_type(t) for t in auth.token_types),
            leeway_s=auth.leeway_s,
            required_scopes=auth.required_scopes,
            principal_claim=auth.principal_claim,
        )


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header. No header, or another scheme: Rejected
    with no error code (the client is asked to authenticate); a malformed one: invalid_request."""
    if not authorization or not authorization.strip():
        raise Rejected(401, None, "no_token")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise Rejected(401, None, "not_bearer")
    token = token.strip()
    if not _TOKEN68.match(token):
        raise Rejected(401, "invalid_request", "malformed_header", "malformed Authorization header")
    return token


def jose_header(token: str, algorithms: frozenset[str]) -> JoseHeader:
    """The JOSE header of a compact JWS, checked against the allow-list before any key is looked up."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts[:2]):
        raise Rejected(401, "invalid_token", "not_a_jwt", "the access token is not a JWT")
    header = _b64json(parts[0])
    if not isinstance(header, dict) or not isinstance(header.get("alg"), str):
        raise Rejected(401, "invalid_token", "not_a_jwt", "the access token is not a JWT")
    alg, kid = header["alg"], header.get("kid")
    if alg not in algorithms:
        raise Rejected(
            401, "invalid_token", "alg_not_allowed", f"signing algorithm {_safe(alg)} not accepted"
        )
    if header.get("crit") is not None:
        raise Rejected(401, "invalid_token", "crit_header", "critical JOSE header extensions not supported")
    typ = header.get("typ")
    return JoseHeader(alg, kid if isinstance(kid, str) else None, typ if isinstance(typ, str) else None)


def media_type(typ: str) -> str:
    """A JOSE `typ` as compared (RFC 7515 §4.1.9): without case, `application/` left out."""
    lowered = typ.strip().lower()
    return lowered.removeprefix("application/")


def check_type(header: JoseHeader, policy: TokenPolicy) -> None:
    """RFC 9068 §4: the access token's `typ` is `at+jwt` (or what `auth.token_types` adds; no `typ` means
    JWT, RFC 7519 §5.1), so an ID token or another JWT from the same issuer is not taken for one."""
    typ = media_type(header.typ) if header.typ is not None else "jwt"
    if typ not in policy.token_types:
        raise Rejected(
            401,
            "invalid_token",
            "wrong_type",
            f"the token is not an access token (JOSE typ {_safe_typ(header.typ)}; expected "
            f"{' or '.join(sorted(policy.token_types))})",
        )


def verify(token: str, header: JoseHeader, key: jwt.PyJWK, policy: TokenPolicy) -> Verified:
    """Signature, `iss`, `aud`, `exp`, `nbf`, `iat` (with leeway), the principal claim, then scopes."""
    try:
        claims = jwt.decode(
            token,
            key.key,
            algorithms=[header.alg],
            audience=list(policy.audiences),
            issuer=list(policy.issuers),
            leeway=policy.leeway_s,
            options={"require": ["exp", "iss", "aud"], "verify_sub": False},
        )
    except jwt.ExpiredSignatureError:
        raise Rejected(401, "invalid_token", "expired", "the access token expired") from None
    except jwt.ImmatureSignatureError:
        raise Rejected(401, "invalid_token", "not_yet_valid", "the access token is not valid yet") from None
    except jwt.InvalidAudienceError:
        raise Rejected(
            401,
            "invalid_token",
            "wrong_audience",
            f"the access token is not for this resource (audience must be {policy.audiences[0]})",
        ) from None
    except jwt.InvalidIssuerError:
        raise Rejected(
            401, "invalid_token", "wrong_issuer", "the access token's issuer is not accepted"
        ) from None
    except jwt.MissingRequiredClaimError as exc:
        raise Rejected(
            401, "invalid_token", "missing_claim", f"the access token has no {exc.claim}"
        ) from None
    except jwt.InvalidSignatureError:
        raise Rejected(
            401, "invalid_token", "bad_signature", "the access token's signature is invalid"
        ) from None
    except (jwt.PyJWTError, TypeError, ValueError):
        raise Rejected(401, "invalid_token", "invalid", "the access token is invalid") from None
    for name in ("exp", "nbf", "iat"):  # NumericDate (RFC 7519 §2): PyJWT lets "9999999999" through
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise Rejected(401, "invalid_token", "bad_claim", f"the access token's {name} is not a number")
    principal = claims.get(policy.principal_claim)
    if not isinstance(principal, str) or not principal:
        raise Rejected(
            401, "invalid_token", "missing_claim", f"the access token has no {policy.principal_claim}"
        )
    scopes = scopes_of(claims)
    if missing := [s for s in policy.required_scopes if s not in scopes]:
        raise Rejected(403, "insufficient_scope", "insufficient_scope", f"needs scope {' '.join(missing)}")
    return Verified(str(claims["iss"]), principal, scopes, claims)


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """`scope` (RFC 9068: space-separated) or `scp` (a list, as some servers issue it)."""
    scope, scp = claims.get("scope"), claims.get("scp")
    out: Iterable[Any] = scope.split() if isinstance(scope, str) else scp if isinstance(scp, list) else ()
    return frozenset(s for s in out if isinstance(s, str))


def _b64json(part: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error, RecursionError):  # RecursionError: '[' nested thousands deep
        return None


def _safe(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9]{1,16}", value) else "(unrecognised)"


def _safe_typ(value: str | None) -> str:
    if value is None:
        return "absent"
    return value if re.fullmatch(r"[A-Za-z0-9+/.\-]{1,32}", value) else "(unrecognised)"

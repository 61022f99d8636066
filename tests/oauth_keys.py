"""Test signing keys and tokens: RSA and EC keys made with `cryptography`, their JWKS, JWTs minted with
PyJWT. Shared by the unit tests of proxy/auth and the e2e validate-mode tests."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


@dataclass
class SigningKey:
    kid: str
    alg: str = "RS256"
    private: Any = field(default=None)

    def __post_init__(self) -> None:
        if self.private is None:
            self.private = (
                ec.generate_private_key(ec.SECP256R1())
                if self.alg.startswith("ES")
                else rsa.generate_private_key(public_exponent=65537, key_size=2048)
            )

    @property
    def jwk(self) -> dict[str, Any]:
        algo = ECAlgorithm if self.alg.startswith("ES") else RSAAlgorithm
        doc: dict[str, Any] = json.loads(algo.to_jwk(self.private.public_key()))
        return {**doc, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def mint(self, claims: dict[str, Any], **header: Any) -> str:
        # RFC 9068 access tokens say typ at+jwt (validate mode checks it; PyJWT would write JWT)
        headers = {"kid": self.kid, "typ": "at+jwt", **header}
        return jwt.encode(claims, self.private, algorithm=self.alg, headers=headers)


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [k.jwk for k in keys]}


def claims(
    *, iss: str, aud: str, sub: str = "alice", scope: str = "mcp", ttl: int = 300, **extra: Any
) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": iss, "aud": aud, "sub": sub, "scope": scope, "iat": now, "exp": now + ttl, **extra}


def alg_none(payload: dict[str, Any], kid: str = "k1") -> str:
    """An unsigned JWT (`alg: none`), as an attacker would send it."""

    def b64(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'none', 'typ': 'JWT', 'kid': kid})}.{b64(payload)}."


def tampered(token: str) -> str:
    """The same token with a changed payload (sub) and the original signature."""
    head, payload, sig = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body["sub"] = "mallory"
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{sig}"

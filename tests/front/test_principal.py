"""principal.source jwt_claim parses a real JWT or refuses (hardening issue, item 6)."""

from __future__ import annotations

import base64

import pytest
from oauth_keys import SigningKey, alg_none

from proxy.config import PrincipalConfig
from proxy.front.principal import PrincipalRefused, jwt_claim, resolver
from proxy.handle import principal_digest


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


RESOLVE = resolver(PrincipalConfig(source="jwt_claim", claim="sub"))


def test_a_real_jwt_gives_its_claim() -> None:
    token = SigningKey("k").mint({"sub": "alice"})
    assert jwt_claim(f"Bearer {token}", "sub") == "alice"
    refreshed = SigningKey("k").mint({"sub": "alice", "exp": 2**31})
    assert RESOLVE({"Authorization": f"Bearer {token}"}) == RESOLVE({"Authorization": f"Bearer {refreshed}"})


@pytest.mark.parametrize(
    "header",
    [
        "jwt:sub=alice",  # the reported bypass: not a JWT at all
        "Bearer jwt:sub=alice",
        "Bearer a.b",
        "Bearer e30.eyJzdWIiOiJhbGljZSJ9.sig",  # header {} has no alg
        "Bearer eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.sig",  # payload not JSON
        "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.",  # no signature
        f"Bearer {alg_none({'sub': 'alice'})}",
        "Bearer eyJhbGciOiJSUzI1NiJ9.eyJ4IjoxfQ.c2ln",  # no sub claim
        # 5,500 nested '[' as the JOSE header, then as the payload: was a RecursionError (HTTP 500)
        f"Bearer {_b64(b'[' * 5500)}.eyJzdWIiOiJhbGljZSJ9.c2ln",
        "Bearer eyJhbGciOiJSUzI1NiJ9." + _b64(b'{"a":' * 1200) + ".c2ln",
    ],
)
def test_anything_else_is_refused_never_alice(header: str) -> None:
    with pytest.raises(PrincipalRefused):
        RESOLVE({"Authorization": header})
    assert jwt_claim(header, "sub") is None


def test_no_header_is_the_anonymous_principal() -> None:
    assert RESOLVE({}) == principal_digest(None)
    assert RESOLVE({"Authorization": f"Bearer {SigningKey('k').mint({'sub': 'alice'})}"}) != principal_digest(
        "jwt:sub=alice"
    )

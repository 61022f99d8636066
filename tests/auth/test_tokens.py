"""Bearer JWT checks against keys made in the test (the e2e attack table runs them against the proxy)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
from oauth_keys import SigningKey, alg_none, claims, jwks, tampered

from proxy.auth.jwks import JwksCache, JwksUnavailable, KeySet, StaticKeys
from proxy.auth.tokens import (
    Rejected,
    TokenPolicy,
    bearer_token,
    check_type,
    jose_header,
    scopes_of,
    verify,
)
from proxy.config import AuthConfig

ISS, AUD = "https://as.example", "https://p.example/mcp"
KEY = SigningKey("k1")
EC_KEY = SigningKey("e1", alg="ES256")
AUTH = AuthConfig(mode="validate", authorization_servers=(ISS,), required_scopes=("mcp",), jwks_file=None)
POLICY = TokenPolicy.of(AUTH, AUD)
KEYS = StaticKeys(KeySet(jwks(KEY, EC_KEY)))


def check(token: str, policy: TokenPolicy = POLICY) -> Any:
    async def run() -> Any:
        header = jose_header(bearer_token(f"Bearer {token}"), policy.algorithms)
        check_type(header, policy)  # as the gate does, before the key lookup
        return verify(token, header, await KEYS.key(header), policy)

    return asyncio.run(run())


def reason(token: str, policy: TokenPolicy = POLICY) -> tuple[int, str | None, str]:
    with pytest.raises(Rejected) as info:
        check(token, policy)
    return info.value.status, info.value.error, info.value.reason


def test_good_tokens_rsa_and_ec() -> None:
    ok = check(KEY.mint(claims(iss=ISS, aud=AUD, scope="mcp extra")))
    assert (ok.issuer, ok.principal, ok.scopes) == (ISS, "alice", frozenset({"mcp", "extra"}))
    assert check(EC_KEY.mint(claims(iss=ISS, aud=[AUD, "other"], sub="bob"))).principal == "bob"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (KEY.mint(claims(iss=ISS, aud=AUD, ttl=-120)), (401, "invalid_token", "expired")),
        (KEY.mint(claims(iss=ISS, aud="https://elsewhere/mcp")), (401, "invalid_token", "wrong_audience")),
        (KEY.mint(claims(iss="https://evil.example", aud=AUD)), (401, "invalid_token", "wrong_issuer")),
        (SigningKey("unknown").mint(claims(iss=ISS, aud=AUD)), (401, "invalid_token", "unknown_key")),
        (tampered(KEY.mint(claims(iss=ISS, aud=AUD))), (401, "invalid_token", "bad_signature")),
        (
            SigningKey("k1").mint(claims(iss=ISS, aud=AUD)),
            (401, "invalid_token", "bad_signature"),
        ),  # same kid
        (
            KEY.mint(claims(iss=ISS, aud=AUD, scope="other")),
            (403, "insufficient_scope", "insufficient_scope"),
        ),
        (alg_none(claims(iss=ISS, aud=AUD)), (401, "invalid_token", "alg_not_allowed")),
        (KEY.mint(claims(iss=ISS, aud=AUD, nbf=2**40)), (401, "invalid_token", "not_yet_valid")),
        (KEY.mint({"iss": ISS, "aud": AUD, "sub": "a"}), (401, "invalid_token", "missing_claim")),  # no exp
        (KEY.mint(claims(iss=ISS, aud=AUD, sub="")), (401, "invalid_token", "missing_claim")),
        ("not.a.jwt", (401, "invalid_token", "not_a_jwt")),
        ("abc", (401, "invalid_token", "not_a_jwt")),
    ],
)
def test_each_bad_token_gets_its_reason(token: str, expected: tuple[int, str, str]) -> None:
    assert reason(token) == expected


def test_the_token_type_is_an_access_token_unless_configured_otherwise() -> None:
    """RFC 9068 §4: typ at+jwt. An ID token (typ JWT, or none) from the same issuer was once accepted."""
    payload = claims(iss=ISS, aud=AUD)
    for typ in ("at+jwt", "application/at+jwt", "AT+JWT"):
        assert check(KEY.mint(payload, typ=typ)).principal == "alice"
    for typ in ("JWT", "dpop+jwt", None):
        assert reason(KEY.mint(payload, typ=typ)) == (401, "invalid_token", "wrong_type")
    with pytest.raises(Rejected) as info:
        check(KEY.mint(payload, typ="JWT"))
    assert info.value.description == "the token is not an access token (JOSE typ JWT; expected at+jwt)"
    lenient = TokenPolicy.of(AuthConfig(authorization_servers=(ISS,), token_types=("at+jwt", "JWT")), AUD)
    for typ in ("JWT", None, "at+jwt"):  # an absent typ means JWT (RFC 7519 §5.1)
        assert check(KEY.mint(payload, typ=typ), lenient).principal == "alice"
    assert reason(KEY.mint(payload, typ="id+jwt"), lenient) == (401, "invalid_token", "wrong_type")


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
def test_a_numeric_date_that_is_not_a_number_is_refused(claim: str) -> None:
    """PyJWT takes `"exp": "9999999999"` (a string: a token that never expires) as a date and let it
    through; `"nbf": "1"` and `"iat": "1"` likewise."""
    text = "9999999999" if claim == "exp" else "1"
    assert reason(KEY.mint(claims(iss=ISS, aud=AUD, **{claim: text}))) == (
        401,
        "invalid_token",
        "bad_claim",
    )
    fraction = {"exp": 2**33 + 0.5, "nbf": 1.5, "iat": 1.5}[claim]  # a NumericDate may have a fraction
    assert check(KEY.mint(claims(iss=ISS, aud=AUD, **{claim: fraction}))).principal == "alice"


def test_hmac_with_the_public_key_is_refused_before_any_key_lookup() -> None:
    """Algorithm confusion: HS256 'signed' with the RSA public key as the secret."""
    with pytest.raises(Rejected) as info:
        jose_header("eyJhbGciOiJIUzI1NiIsImtpZCI6ImsxIn0.e30.c2ln", POLICY.algorithms)
    assert info.value.reason == "alg_not_allowed"
    assert "none" not in TokenPolicy.of(AuthConfig(algorithms=("RS256",)), AUD).algorithms


def test_the_header_shapes() -> None:
    for header, why in [
        (None, "no_token"),
        ("", "no_token"),
        ("Basic dTpw", "not_bearer"),
        ("Bearer a b", "malformed_header"),
    ]:
        with pytest.raises(Rejected) as info:
            bearer_token(header)
        assert info.value.reason == why
        assert info.value.error == (None if why != "malformed_header" else "invalid_request")
    assert bearer_token("bearer  abc.def.ghi ") == "abc.def.ghi"


def test_descriptions_never_echo_token_contents() -> None:
    token = KEY.mint(claims(iss="https://evil.example/SECRETISS", aud="https://SECRETAUD", sub="SECRETSUB"))
    with pytest.raises(Rejected) as info:
        check(token)
    assert "SECRET" not in (info.value.description or "")


def test_scopes_from_scope_or_scp() -> None:
    assert scopes_of({"scope": "a b"}) == {"a", "b"}
    assert scopes_of({"scp": ["a", 1]}) == {"a"}
    assert scopes_of({}) == frozenset()


def test_jwks_cache_refreshes_on_unknown_kid_at_most_once_per_interval() -> None:
    docs = [jwks(KEY)]
    fetched: list[int] = []
    now = [0.0]

    async def fetch() -> Any:
        fetched.append(1)
        return docs[-1]

    async def run() -> None:
        cache = JwksCache(fetch, ttl_s=300, min_refresh_s=10, clock=lambda: now[0])
        new = SigningKey("k2")
        header = jose_header(KEY.mint(claims(iss=ISS, aud=AUD)), POLICY.algorithms)
        await cache.key(header)
        assert cache.fetches == 1
        new_header = jose_header(new.mint(claims(iss=ISS, aud=AUD)), POLICY.algorithms)
        now[0] = 5  # rotated, but too soon after the last fetch: a flood of new kids costs nothing
        docs.append(jwks(KEY, new))
        for _ in range(50):
            with pytest.raises(Rejected):
                await cache.key(new_header)
        assert cache.fetches == 1
        now[0] = 11  # the interval has passed: one refetch picks the rotated key up
        await asyncio.gather(*(cache.key(new_header) for _ in range(20)))
        assert cache.fetches == 2
        now[0] = 400  # past the TTL: refetched; a failed fetch keeps the known keys
        docs.append("not a jwks")
        await cache.key(header)
        assert cache.fetches == 3

    asyncio.run(run())


def test_jwks_cache_with_nothing_fetched_reports_unavailable() -> None:
    async def fetch() -> Any:
        raise JwksUnavailable("down")

    async def run() -> None:
        cache = JwksCache(fetch, ttl_s=300, min_refresh_s=10, clock=lambda: 0.0)
        header = jose_header(KEY.mint(claims(iss=ISS, aud=AUD)), POLICY.algorithms)
        for _ in range(3):
            with pytest.raises(JwksUnavailable):
                await cache.key(header)
        assert cache.fetches == 1

    asyncio.run(run())


def test_keyset_ignores_encryption_keys_and_mismatched_algs() -> None:
    enc = {**SigningKey("x").jwk, "use": "enc"}
    keys = KeySet({"keys": [enc, EC_KEY.jwk]})
    assert keys.kids == ("e1",)
    header = jose_header(EC_KEY.mint(claims(iss=ISS, aud=AUD)), POLICY.algorithms)
    assert keys.find(header) is not None
    rs_on_ec = jose_header(
        SigningKey("e1").mint(claims(iss=ISS, aud=AUD)), POLICY.algorithms
    )  # RS256, kid e1
    assert keys.find(rs_on_ec) is None
    with pytest.raises(JwksUnavailable):
        KeySet({"no": "keys"})


def test_a_deeply_nested_jose_header_is_invalid_token_not_a_recursion_error() -> None:
    """5,500 nested '[' as the JOSE header was an uncaught RecursionError: HTTP 500 before authentication."""
    for raw in (b"[" * 5500, b'{"a":' * 1200):
        head = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        with pytest.raises(Rejected) as info:
            jose_header(f"{head}.eyJzdWIiOiJhbGljZSJ9.c2ln", frozenset({"RS256"}))
        assert (info.value.status, info.value.error, info.value.reason) == (401, "invalid_token", "not_a_jwt")

"""Issue 3 on real peers: key rotation, principal binding sources, limits, credential pass-through."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import RawClient, accept_name, running_proxy
from proxy.config import FrontConfig, KeysConfig, PrincipalConfig, UpstreamConfig
from proxy.handle import generate_key_b64
from proxy.process.app import CODEC
from proxy.process.keys import reload_keys

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

INVALID = {"code": -32602, "message": "Invalid requestState"}


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def jwt(claims: dict[str, object]) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"Bearer {part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


async def test_key_rotation(fastmcp_url: str, http: aiohttp.ClientSession, tmp_path: Path) -> None:
    """Old handles resume after a new first key is added; they fail once the old key is removed."""
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "1-old").write_text(generate_key_b64())
    async with running_proxy(fastmcp_url, keys=KeysConfig(dirs=(keys,))) as proxy:
        client = RawClient(proxy.url, http)
        old_a = await client.call("ask_name")
        old_b = await client.call("ask_name")
        old_kid = proxy.app[CODEC].ring.kids[0]

        (keys / "0-new").write_text(generate_key_b64())  # sorts first: it seals from now on
        assert reload_keys(proxy.app)
        assert proxy.app[CODEC].ring.kids[1] == old_kid
        resumed = await client.retry(old_a, {"elicit-1": accept_name("A")}, "ask_name")
        assert resumed.result["content"][0]["text"] == "accept:A"
        new_c = await client.call("ask_name")

        (keys / "1-old").unlink()
        assert reload_keys(proxy.app)
        assert proxy.app[CODEC].ring.kids == (proxy.app[CODEC].ring.kids[0],)
        refused = await client.retry(old_b, {"elicit-1": accept_name("B")}, "ask_name")
        assert refused.status == 503  # a key this replica does not hold (any more): not a forgery
        assert refused.error["code"] == -31012
        resumed = await client.retry(new_c, {"elicit-1": accept_name("C")}, "ask_name")
        assert resumed.result["content"][0]["text"] == "accept:C"

        (keys / "0-new").write_text("not a key")
        assert not reload_keys(proxy.app)  # a bad key set is refused; the ring in use stays
        assert len(proxy.app[CODEC].ring.kids) == 1


async def test_changed_key_files_are_picked_up(fastmcp_url: str, tmp_path: Path) -> None:
    (tmp_path / "1-old").write_text(generate_key_b64())
    async with running_proxy(fastmcp_url, keys=KeysConfig(dirs=(tmp_path,))) as proxy:
        before = proxy.app[CODEC].ring.kids
        (tmp_path / "0-new").write_text(generate_key_b64())
        # Housekeeping looks every second.
        await eventually(lambda: len(proxy.app[CODEC].ring.kids) == 2, "housekeeping to add the key")
        assert proxy.app[CODEC].ring.kids[1:] == before


async def test_jwt_claim_principal_survives_token_refresh(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    principal = PrincipalConfig(source="jwt_claim", claim="sub")
    async with running_proxy(fastmcp_url, principal=principal) as proxy:
        alice = RawClient(proxy.url, http, authorization=jwt({"sub": "alice", "iat": 1}))
        first = await alice.call("ask_name")
        alice.authorization = jwt({"sub": "alice", "iat": 2})  # a refreshed token, same user
        mallory = RawClient(proxy.url, http, authorization=jwt({"sub": "mallory"}))
        refused = await mallory.retry(first, {"elicit-1": accept_name("M")}, "ask_name")
        assert refused.error == INVALID
        final = await alice.retry(first, {"elicit-1": accept_name("Alice")}, "ask_name")
        assert final.result["content"][0]["text"] == "accept:Alice"


@pytest.mark.parametrize(
    "forged", ["jwt:sub=alice", "Bearer jwt:sub=alice", "Bearer e30.e30", "Bearer a.b.c"]
)
async def test_jwt_claim_refuses_a_header_that_is_not_a_jwt(
    fastmcp_url: str, http: aiohttp.ClientSession, forged: str
) -> None:
    """Issue 14, item 6: `Authorization: jwt:sub=alice` once became alice. Now a 401 before anything is
    read or sent upstream, and alice's parked call is untouched."""
    principal = PrincipalConfig(source="jwt_claim", claim="sub")
    async with running_proxy(fastmcp_url, principal=principal) as proxy:
        alice = RawClient(proxy.url, http, authorization=jwt({"sub": "alice"}))
        first = await alice.call("ask_name")
        mallory = RawClient(proxy.url, http, authorization=forged)
        refused = await mallory.retry(first, {"elicit-1": accept_name("M")}, "ask_name")
        assert refused.status == 401
        assert refused.error == {"code": -32600, "message": "Unauthorized: the access token is not a JWT"}
        assert (await mallory.call("echo", {"text": "x"})).status == 401
        assert proxy.parked == 1
        final = await alice.retry(first, {"elicit-1": accept_name("Alice")}, "ask_name")
        assert final.result["content"][0]["text"] == "accept:Alice"


async def test_trusted_header_principal(fastmcp_url: str, http: aiohttp.ClientSession) -> None:
    principal = PrincipalConfig(source="header", header="X-Authenticated-User")
    async with running_proxy(fastmcp_url, principal=principal) as proxy:
        client = RawClient(proxy.url, http)
        body = client.body("tools/call", {"name": "ask_name", "arguments": {}})
        first = await client.send(body, {**client.headers(body), "X-Authenticated-User": "ada"})
        retry = client.body(
            "tools/call",
            {
                "name": "ask_name",
                "arguments": {},
                "requestState": first.result["requestState"],
                "inputResponses": {"elicit-1": accept_name("Ada")},
            },
        )
        refused = await client.send(retry, {**client.headers(retry), "X-Authenticated-User": "eve"})
        assert refused.error == INVALID
        final = await client.send(retry, {**client.headers(retry), "X-Authenticated-User": "ada"})
        assert final.result["content"][0]["text"] == "accept:Ada"


async def test_parked_call_limit_per_principal(fastmcp_url: str, http: aiohttp.ClientSession) -> None:
    async with running_proxy(fastmcp_url, max_parked_per_principal=2, max_parked=3) as proxy:
        alice = RawClient(proxy.url, http, authorization="Bearer alice")
        bob = RawClient(proxy.url, http, authorization="Bearer bob")
        parked = [await alice.call("ask_name") for _ in range(2)]
        third = await alice.call("ask_name")
        assert third.error["code"] == -31003
        assert "calls.max_parked_per_principal" in third.error["message"]
        bobs = await bob.call("ask_name")  # another principal is not affected…
        assert bobs.result["resultType"] == "input_required"
        fourth = await bob.call("ask_name")  # …until the proxy-wide limit
        assert fourth.error["code"] == -31003
        assert "calls.max_parked" in fourth.error["message"]
        for first in parked:  # nothing was lost: the parked calls still complete
            final = await alice.retry(first, {"elicit-1": {"action": "decline"}}, "ask_name")
            assert final.result["content"][0]["text"] == "decline"
        assert (await alice.call("echo", {"text": "ok"})).result["resultType"] == "complete"
        await bob.retry(bobs, {"elicit-1": {"action": "cancel"}}, "ask_name")
        assert proxy.live == 0


async def test_rate_limit_per_principal(fastmcp_url: str, http: aiohttp.ClientSession) -> None:
    front = FrontConfig(rate_limit_per_s=0.5, rate_burst=2)
    async with running_proxy(fastmcp_url, front=front) as proxy:
        alice = RawClient(proxy.url, http, authorization="Bearer alice")
        bob = RawClient(proxy.url, http, authorization="Bearer bob")
        assert (await alice.request("ping")).status == 200
        assert (await alice.request("ping")).status == 200
        limited = await alice.request("ping")
        assert limited.status == 429
        assert limited.error["code"] == -31003
        assert "front.rate_limit_per_s" in limited.error["message"]
        assert (await bob.request("ping")).status == 200


async def test_authorization_is_passed_through_per_principal(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    """The upstream sees each client's own credentials, on sessions never shared between them."""
    async with running_proxy(fastmcp_url) as proxy:
        alice = RawClient(proxy.url, http, authorization="Bearer alice-token")
        bob = RawClient(proxy.url, http, authorization="Bearer bob-token")
        seen = {}
        for name, client in (("alice", alice), ("bob", bob), ("alice-again", alice)):
            reply = await client.call("whoami")
            seen[name] = reply.result["content"][0]["text"].split("|")
        assert seen["alice"][0] == "Bearer alice-token"
        assert seen["bob"][0] == "Bearer bob-token"
        assert seen["alice"][1] != seen["bob"][1]  # different upstream sessions
        assert seen["alice-again"][1] == seen["alice"][1]  # and the pool reuses alice's own


async def test_forward_headers_empty_keeps_the_clients_token_from_the_upstream(
    fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    """Issue 14, item 6: token pass-through is explicit (`forward_headers`, default `[authorization]`);
    `forward_headers: []` sends the upstream no client credential, and principals still get their own
    sessions and handles."""
    config = UpstreamConfig(name="default", url=fastmcp_url, forward_headers=())
    async with running_proxy(config) as proxy:
        alice = RawClient(proxy.url, http, authorization="Bearer alice-token")
        bob = RawClient(proxy.url, http, authorization="Bearer bob-token")
        auth, _session = (await alice.call("whoami")).result["content"][0]["text"].split("|")
        assert auth == ""
        first = await alice.call("ask_name")
        refused = await bob.retry(first, {"elicit-1": accept_name("B")}, "ask_name")
        assert refused.error == INVALID
        final = await alice.retry(first, {"elicit-1": accept_name("Alice")}, "ask_name")
        assert final.result["content"][0]["text"] == "accept:Alice"

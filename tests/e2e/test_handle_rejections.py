"""Every way a requestState can be wrong gets the same JSON-RPC error, and harms nothing.

Each case parks a real call on FastMCP 1.30, presents a bad handle, and checks: error -32602 with the one
fixed message "Invalid requestState"; the parked call is still parked; the real owner can still resume it.
The one exception is a handle whose (clear) key id names no key of this replica: 503 with -31012, so a
balancer sends it to a replica that may hold the key (docs/operations.md, "Keys and rotation": why that
reveals nothing).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
import pytest_asyncio
from waiting import eventually

from e2e.harness import RawClient, Reply, RunningProxy, accept_name, running_proxy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

INVALID = {"code": -32602, "message": "Invalid requestState"}
KEY_NOT_HELD = {
    "code": -31012,
    "message": "This proxy replica does not hold the key that sealed requestState; nothing was done. "
    "Send the request again: another replica may hold the key.",
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(fastmcp_url: str) -> AsyncIterator[RunningProxy]:
    async with running_proxy(fastmcp_url, names=("default", "other")) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def flip(state: str, index: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(state + "=" * (-len(state) % 4)))
    raw[index] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


async def assert_rejected_then_owner_resumes(
    proxy: RunningProxy,
    owner: RawClient,
    first: Reply,
    attempt: Callable[[], Awaitable[Reply]],
    *,
    tool: str = "ask_name",
    arguments: dict[str, object] | None = None,
    key_not_held: bool = False,
) -> None:
    parked_before = proxy.parked
    rejected = await attempt()
    if key_not_held:
        assert rejected.status == 503
        assert rejected.error == KEY_NOT_HELD
        assert rejected.headers["Retry-After"] == "1"
    else:
        assert rejected.status == 200
        assert rejected.error == INVALID  # same code, same message, no data: nothing to learn from it
    assert proxy.parked == parked_before  # the parked call is untouched
    final = await owner.retry(first, {"elicit-1": accept_name("Owner")}, tool, arguments)
    assert final.result["resultType"] == "complete"
    assert "accept:Owner" in final.result["content"][0]["text"]


def _variants(state: str) -> dict[str, str]:
    raw_len = len(base64.urlsafe_b64decode(state + "=" * (-len(state) % 4)))
    return {
        "version byte flipped": flip(state, 0),
        "key id flipped": flip(state, 3),
        "nonce flipped": flip(state, 12),
        "ciphertext flipped": flip(state, raw_len // 2),
        "tag flipped": flip(state, raw_len - 1),
        "truncated": state[:-6],
        "extended": state + "AAAA",
        "base64 noise": "bm9pc2Ugbm9pc2Ugbm9pc2Ugbm9pc2Ugbm9pc2Ugbm9pc2Ugbm9pc2U",
        "padding added": state + "==",
        "not base64": state[:20] + "*" + state[21:],
        "empty": "",
        "huge": "A" * 100_000,
    }


@pytest.mark.parametrize("variant", list(_variants("AAAA" * 40)))
async def test_mangled_handle(proxy: RunningProxy, http: aiohttp.ClientSession, variant: str) -> None:
    owner = RawClient(proxy.url, http)
    first = await owner.call("ask_name")
    bad = _variants(first.result["requestState"])[variant]
    await assert_rejected_then_owner_resumes(
        proxy,
        owner,
        first,
        lambda: owner.call("ask_name", inputResponses={"elicit-1": accept_name("Mallory")}, requestState=bad),
        key_not_held=variant == "key id flipped",
    )


async def test_handle_from_another_proxy_key(
    proxy: RunningProxy, fastmcp_url: str, http: aiohttp.ClientSession
) -> None:
    """A genuine handle sealed by another deployment's key (unknown key id)."""
    owner = RawClient(proxy.url, http)
    first = await owner.call("ask_name")
    async with running_proxy(fastmcp_url) as stranger:
        foreign_client = RawClient(stranger.url, http)
        foreign = await foreign_client.call("ask_name")
        await assert_rejected_then_owner_resumes(
            proxy,
            owner,
            first,
            lambda: owner.retry(foreign, {"elicit-1": accept_name("Mallory")}, "ask_name"),
            key_not_held=True,
        )
        await foreign_client.retry(foreign, {"elicit-1": {"action": "cancel"}}, "ask_name")


@pytest.mark.parametrize("thief_token", ["Bearer mallory-token", None], ids=["other user", "no credentials"])
async def test_other_principal(
    proxy: RunningProxy, http: aiohttp.ClientSession, thief_token: str | None
) -> None:
    owner = RawClient(proxy.url, http, authorization="Bearer alice-token")
    thief = RawClient(proxy.url, http, authorization=thief_token)
    first = await owner.call("ask_name")
    await assert_rejected_then_owner_resumes(
        proxy, owner, first, lambda: thief.retry(first, {"elicit-1": accept_name("Mallory")}, "ask_name")
    )


async def test_other_tool(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    owner = RawClient(proxy.url, http)
    first = await owner.call("ask_name")
    await assert_rejected_then_owner_resumes(
        proxy, owner, first, lambda: owner.retry(first, {"elicit-1": accept_name("Mallory")}, "two_questions")
    )


async def test_other_arguments(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    owner = RawClient(proxy.url, http)
    first = await owner.call("ask_name", {})
    await assert_rejected_then_owner_resumes(
        proxy,
        owner,
        first,
        lambda: owner.retry(first, {"elicit-1": accept_name("Mallory")}, "ask_name", {"extra": 1}),
    )


async def test_other_upstream(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    owner = RawClient(proxy.url, http)
    first = await owner.call("ask_name")
    other = RawClient(proxy.url.replace("/mcp", "/servers/other/mcp"), http)
    await assert_rejected_then_owner_resumes(
        proxy, owner, first, lambda: other.retry(first, {"elicit-1": accept_name("Mallory")}, "ask_name")
    )


async def test_replayed_round(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    client = RawClient(proxy.url, http)
    first = await client.call("two_questions")
    second = await client.retry(first, {"elicit-1": accept_name("Alice")}, "two_questions")
    assert second.result["resultType"] == "input_required"
    replay = await client.retry(first, {"elicit-1": accept_name("Mallory")}, "two_questions")
    assert replay.error == INVALID
    final = await client.retry(
        second, {"elicit-2": {"action": "accept", "content": {"color": "red"}}}, "two_questions"
    )
    assert final.result["content"][0]["text"] == "accept:Alice|accept:red"
    after = await client.retry(second, {"elicit-2": {"action": "decline"}}, "two_questions")
    assert after.error == INVALID  # the call is over: its handles are replays, refused, never re-run


async def test_two_retries_race_with_one_handle(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    client = RawClient(proxy.url, http)
    first = await client.call("ask_name")
    replies = await asyncio.gather(
        client.retry(first, {"elicit-1": accept_name("One")}, "ask_name"),
        client.retry(first, {"elicit-1": accept_name("Two")}, "ask_name"),
    )
    outcomes = sorted("result" if "result" in r.body else r.error["message"] for r in replies)
    assert outcomes == ["Invalid requestState", "result"]


async def test_expired_handle_and_reaped_call(fastmcp_url: str, http: aiohttp.ClientSession) -> None:
    """Past its TTL the call is reaped — the upstream tool is told `cancel` — and its handle is refused."""
    async with running_proxy(fastmcp_url, parked_ttl_s=1) as short:
        client = RawClient(short.url, http)
        first = await client.call("ask_name")
        assert short.parked == 1
        await eventually(lambda: short.live == 0, "the reaper (every second) to end the call")
        late = await client.retry(first, {"elicit-1": accept_name("Late")}, "ask_name")
        assert late.error == INVALID
        outcomes = await client.call("outcomes")
        assert outcomes.result["content"][0]["text"].split(",")[-1] == "cancel"

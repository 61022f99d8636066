"""SessionPool with a fake session factory: reuse by key, limits, reaping, plain requests, server info."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from proxy.translate.capabilities import ClientCapabilities
from proxy.upstream.base import NotDelivered, ServerInfo, UpstreamError
from proxy.upstream.pool import PoolExhausted, PoolKey, PoolKeys, SessionPool
from proxy.wire import jsonrpc

KEY_A = PoolKey(ClientCapabilities(elicitation_form=True))
KEY_B = PoolKey(ClientCapabilities(sampling=True))
KEY_A_AUTH = PoolKey(ClientCapabilities(elicitation_form=True), (("authorization", "Bearer x"),))
INFO = ServerInfo("2025-11-25", {"tools": {}}, {"name": "legacy", "version": "1"}, None)


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeSession:
    def __init__(self, n: int, key: PoolKey) -> None:
        self.session_id = f"s{n}"
        self.key = key
        self.info = INFO  # one server behind the address (test_a_new_session_of_another_server_is_reported)
        self.alive = True
        self.closed = 0
        self.requests: list[tuple[str, Mapping[str, Any], float]] = []

    async def request(self, method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        self.requests.append((method, params, timeout))
        return jsonrpc.Result(1, {"session": self.session_id})

    async def close(self) -> None:
        self.closed += 1
        self.alive = False

    def __repr__(self) -> str:
        return f"<FakeSession {self.session_id}>"


class Factory:
    def __init__(self) -> None:
        self.opened: list[FakeSession] = []
        self.fail: BaseException | None = None
        self.gate: asyncio.Event | None = None

    async def __call__(self, key: PoolKey) -> Any:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        session = FakeSession(len(self.opened) + 1, key)
        self.opened.append(session)
        return session


@pytest.fixture
def factory() -> Factory:
    return Factory()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_pool(factory: Factory, clock: Clock, max_sessions: int = 4, idle_ttl: float = 60.0) -> SessionPool:
    return SessionPool("github", factory, max_sessions=max_sessions, idle_ttl=idle_ttl, clock=clock)


async def settle() -> None:
    """Let the pool's background close tasks run."""
    for _ in range(3):
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------------------------------------
# acquire / release
# ---------------------------------------------------------------------------------------------------------


async def test_acquire_reuses_an_idle_session_of_the_same_key(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    first = await pool.acquire(KEY_A)
    assert first.key == KEY_A  # type: ignore[attr-defined]
    pool.release(KEY_A, first, reusable=True)
    again = await pool.acquire(KEY_A)
    assert again is first
    assert len(factory.opened) == 1
    assert pool.size == 1


async def test_equal_keys_share(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    s = await pool.acquire(PoolKey(ClientCapabilities(elicitation_form=True)))
    pool.release(KEY_A, s, reusable=True)
    assert await pool.acquire(KEY_A) is s


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(KEY_A, KEY_B, id="other-capabilities"),
        pytest.param(KEY_A, KEY_A_AUTH, id="other-forwarded-credentials"),
        pytest.param(
            KEY_A_AUTH,
            PoolKey(ClientCapabilities(elicitation_form=True), (("authorization", "Bearer y"),)),
            id="other-credential-value",
        ),
    ],
)
async def test_different_keys_never_share(
    factory: Factory, clock: Clock, first: PoolKey, second: PoolKey
) -> None:
    pool = make_pool(factory, clock)
    s1 = await pool.acquire(first)
    pool.release(first, s1, reusable=True)
    s2 = await pool.acquire(second)
    assert s2 is not s1
    assert s2.key == second  # type: ignore[attr-defined]
    assert pool.size == 2


async def test_busy_sessions_are_not_shared_by_acquire(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    s1 = await pool.acquire(KEY_A)
    s2 = await pool.acquire(KEY_A)
    assert s1 is not s2
    assert pool.size == 2


async def test_release_not_reusable_closes(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    s1 = await pool.acquire(KEY_A)
    pool.release(KEY_A, s1, reusable=False)
    assert pool.size == 0
    await settle()
    assert factory.opened[0].closed == 1
    s2 = await pool.acquire(KEY_A)
    assert s2 is not s1


async def test_release_of_a_dead_session_closes_it(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    s1 = await pool.acquire(KEY_A)
    factory.opened[0].alive = False
    pool.release(KEY_A, s1, reusable=True)
    assert pool.size == 0
    await settle()
    assert factory.opened[0].closed == 1


async def test_dead_idle_sessions_are_not_reused(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    s1 = await pool.acquire(KEY_A)
    s2 = await pool.acquire(KEY_A)
    pool.release(KEY_A, s1, reusable=True)
    pool.release(KEY_A, s2, reusable=True)
    factory.opened[0].alive = factory.opened[1].alive = False
    s3 = await pool.acquire(KEY_A)
    assert s3 not in (s1, s2)
    await settle()
    assert [s.closed for s in factory.opened] == [1, 1, 0]
    assert pool.size == 1


async def test_dead_idle_session_skipped_for_a_live_one(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    s1 = await pool.acquire(KEY_A)
    s2 = await pool.acquire(KEY_A)
    pool.release(KEY_A, s1, reusable=True)
    pool.release(KEY_A, s2, reusable=True)
    factory.opened[1].alive = False  # the most recently released one
    assert await pool.acquire(KEY_A) is s1
    assert len(factory.opened) == 2


# ---------------------------------------------------------------------------------------------------------
# Limits and factory failures
# ---------------------------------------------------------------------------------------------------------


async def test_max_sessions(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock, max_sessions=2)
    s1 = await pool.acquire(KEY_A)
    await pool.acquire(KEY_B)
    with pytest.raises(PoolExhausted, match=r"upstream 'github' has 2 sessions open \(pool.max_sessions\)"):
        await pool.acquire(KEY_A)
    with pytest.raises(PoolExhausted):
        await pool.request(KEY_A_AUTH, "tools/list", {}, 5)  # no session of this key to share
    pool.release(KEY_A, s1, reusable=True)
    assert await pool.acquire(KEY_A) is s1


async def test_request_shares_a_busy_session_at_the_limit(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock, max_sessions=1)
    s1 = await pool.acquire(KEY_A)
    answer = await pool.request(KEY_A, "tools/list", {}, 5)
    assert answer == jsonrpc.Result(1, {"session": s1.session_id})


async def test_opening_sessions_count_toward_the_limit(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock, max_sessions=1)
    factory.gate = asyncio.Event()
    opening = asyncio.ensure_future(pool.acquire(KEY_A))
    await settle()
    assert pool.size == 1
    with pytest.raises(PoolExhausted):
        await pool.acquire(KEY_B)
    factory.gate.set()
    await opening
    assert pool.size == 1


@pytest.mark.parametrize(
    ("exc", "fragment"),
    [
        pytest.param(RuntimeError("boom"), "could not open a session: RuntimeError: boom", id="bug-wrapped"),
        pytest.param(OSError("refused"), "could not open a session: OSError: refused", id="os-error-wrapped"),
        pytest.param(UpstreamError("initialize failed"), "initialize failed", id="upstream-error-as-is"),
    ],
)
async def test_factory_failure(factory: Factory, clock: Clock, exc: Exception, fragment: str) -> None:
    pool = make_pool(factory, clock)
    factory.fail = exc
    with pytest.raises(UpstreamError) as info:
        await pool.acquire(KEY_A)
    assert str(info.value) == fragment
    if isinstance(exc, UpstreamError):
        assert info.value is exc
    else:
        assert info.value.__cause__ is exc
    assert pool.size == 0  # the opening slot is given back
    factory.fail = None
    assert await pool.acquire(KEY_A) is factory.opened[0]


async def test_factory_cancellation_is_not_wrapped(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    factory.gate = asyncio.Event()
    task = asyncio.ensure_future(pool.acquire(KEY_A))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.size == 0


@pytest.mark.parametrize("alive", [True, False], ids=["live-idle", "dead-idle"])
async def test_idle_sessions_of_another_key_make_room(factory: Factory, clock: Clock, alive: bool) -> None:
    pool = make_pool(factory, clock, max_sessions=2)
    a1, a2 = await pool.acquire(KEY_A), await pool.acquire(KEY_A)
    pool.release(KEY_A, a1, reusable=True)
    pool.release(KEY_A, a2, reusable=True)
    for s in factory.opened:
        s.alive = alive
    b = await pool.acquire(KEY_B)
    assert b.key == KEY_B  # type: ignore[attr-defined]
    assert pool.size <= 2


# ---------------------------------------------------------------------------------------------------------
# reap_idle
# ---------------------------------------------------------------------------------------------------------


async def test_reap_idle(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock, idle_ttl=10)
    old, new, busy = await pool.acquire(KEY_A), await pool.acquire(KEY_B), await pool.acquire(KEY_A)
    pool.release(KEY_A, old, reusable=True)  # idle since 100
    clock.now = 105
    pool.release(KEY_B, new, reusable=True)  # idle since 105
    clock.now = 109.9
    assert pool.reap_idle() == 0
    clock.now = 110  # exactly the TTL: reaped
    assert pool.reap_idle() == 1
    await settle()
    assert [s.closed for s in factory.opened] == [1, 0, 0]
    assert pool.size == 2
    assert await pool.acquire(KEY_B) is new
    pool.release(KEY_B, new, reusable=True)  # idle again since 110
    clock.now = 1000
    assert pool.reap_idle() == 1
    assert pool.size == 1  # only the busy one
    assert busy.alive


async def test_a_failed_plain_request_does_not_make_its_session_look_used(
    factory: Factory, clock: Clock
) -> None:
    """Issue 41 #3: each failed list refreshed the session's idle time, so a client that kept listing
    kept a broken session (its server answering an error every time) from ever being reaped."""
    pool = make_pool(factory, clock, idle_ttl=10)
    assert (await pool.request(KEY_A, "tools/list", {}, 5)).result == {"session": "s1"}  # used at 100
    (session,) = factory.opened

    async def refused(method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        raise UpstreamError("upstream answered HTTP 400: no use")

    session.request = refused  # type: ignore[method-assign]
    for now in (105.0, 109.0):
        clock.now = now
        with pytest.raises(UpstreamError, match="HTTP 400"):
            await pool.request(KEY_A, "tools/list", {}, 5)
    clock.now = 110  # ten seconds after its last answer: reaped, failures or not
    assert pool.reap_idle() == 1


async def test_a_request_the_upstream_never_got_is_sent_again_on_a_fresh_session_not_an_idle_one(
    factory: Factory, clock: Clock
) -> None:
    """Issue 41 #3 (found by `make soak`): after a restart every idle session belongs to the gone process;
    the one resend went on the next idle one and failed the same way. Now every idle session is dropped and
    the resend opens a fresh session."""
    pool = make_pool(factory, clock)
    first, second, busy = await pool.acquire(KEY_A), await pool.acquire(KEY_A), await pool.acquire(KEY_A)
    pool.release(KEY_A, first, reusable=True)
    pool.release(KEY_A, second, reusable=True)

    async def forgotten(method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        raise NotDelivered("upstream no longer knows the session (HTTP 404; did it restart?)")

    for gone in (first, second, busy):  # `busy`: a call's, of the gone process too, not yet told
        gone.request = forgotten  # type: ignore[method-assign]
    answer = await pool.request(KEY_A, "tools/list", {}, 5)
    assert answer.result == {"session": "s4"}  # a fresh session, not the other dead idle one nor the busy one
    await settle()
    assert first.closed == second.closed == 1
    assert pool.size == 2  # the busy one (its call finds out on its own) and the fresh one


async def test_reap_idle_closes_dead_sessions_at_any_age(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock, idle_ttl=10)
    s1, s2 = await pool.acquire(KEY_A), await pool.acquire(KEY_A)
    pool.release(KEY_A, s1, reusable=True)
    pool.release(KEY_A, s2, reusable=True)
    factory.opened[0].alive = False
    assert pool.reap_idle() == 1
    assert pool.size == 1
    assert await pool.acquire(KEY_A) is s2


async def test_reap_idle_empty_pool(factory: Factory, clock: Clock) -> None:
    assert make_pool(factory, clock).reap_idle() == 0


# ---------------------------------------------------------------------------------------------------------
# request
# ---------------------------------------------------------------------------------------------------------


async def test_request_prefers_an_idle_session(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    busy = await pool.acquire(KEY_A)
    idle = await pool.acquire(KEY_A)
    pool.release(KEY_A, idle, reusable=True)
    answer = await pool.request(KEY_A, "tools/list", {"cursor": "c"}, 7.5)
    assert answer == jsonrpc.Result(1, {"session": idle.session_id})
    assert factory.opened[1].requests == [("tools/list", {"cursor": "c"}, 7.5)]
    assert factory.opened[0].requests == []
    assert busy.alive


async def test_request_then_a_busy_session(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    busy = await pool.acquire(KEY_A)
    await pool.request(KEY_A, "prompts/list", {}, 5)
    assert len(factory.opened) == 1
    assert factory.opened[0].requests[0][0] == "prompts/list"
    assert pool.size == 1
    assert await pool.acquire(KEY_A) is not busy  # the request did not make the busy session idle


async def test_request_skips_dead_idle_for_a_live_busy(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    await pool.acquire(KEY_A)
    dead = await pool.acquire(KEY_A)
    pool.release(KEY_A, dead, reusable=True)
    factory.opened[1].alive = False
    await pool.request(KEY_A, "tools/list", {}, 5)
    assert [len(s.requests) for s in factory.opened] == [1, 0]


async def test_request_opens_one_and_keeps_it_idle(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    other = await pool.acquire(KEY_B)
    pool.release(KEY_B, other, reusable=True)
    await pool.request(KEY_A, "tools/list", {}, 5)
    assert len(factory.opened) == 2
    opened = factory.opened[1]
    assert opened.key == KEY_A
    assert opened.requests == [("tools/list", {}, 5)]
    assert pool.size == 2
    assert await pool.acquire(KEY_A) is opened
    await pool.request(KEY_A, "tools/list", {}, 5)  # the only KEY_A session is busy: shared
    assert len(opened.requests) == 2
    assert len(factory.opened) == 2


# ---------------------------------------------------------------------------------------------------------
# server_info and close
# ---------------------------------------------------------------------------------------------------------


async def test_server_info_opens_once_and_caches(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    assert await pool.server_info(KEY_A) == INFO
    assert len(factory.opened) == 1
    assert pool.size == 1  # the session it opened is kept, idle
    assert await pool.server_info(KEY_B) == INFO
    assert len(factory.opened) == 1
    assert await pool.acquire(KEY_A) is factory.opened[0]


async def test_server_info_from_an_already_opened_session(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    await pool.acquire(KEY_B)
    assert await pool.server_info(KEY_A) == INFO
    assert len(factory.opened) == 1


async def test_server_info_after_a_plain_request(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    await pool.request(KEY_A, "tools/list", {}, 5)
    assert await pool.server_info(KEY_A) == INFO
    assert len(factory.opened) == 1


async def test_server_info_failure_propagates(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    factory.fail = UpstreamError("down")
    with pytest.raises(UpstreamError, match="down"):
        await pool.server_info(KEY_A)
    factory.fail = None
    assert await pool.server_info(KEY_A) == INFO


async def test_close(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    idle, busy = await pool.acquire(KEY_A), await pool.acquire(KEY_B)
    pool.release(KEY_A, idle, reusable=True)
    released = await pool.acquire(KEY_A)
    pool.release(KEY_A, released, reusable=False)  # a pending background close
    await pool.close()
    assert pool.size == 0
    assert all(s.closed == 1 for s in factory.opened)
    assert not busy.alive


async def test_sessions_are_never_shared_between_principals(factory: Factory, clock: Clock) -> None:
    pool = make_pool(factory, clock)
    alice = PoolKey(ClientCapabilities(roots=True), principal="alice")
    bob = PoolKey(ClientCapabilities(roots=True), principal="bob")
    s1 = await pool.acquire(alice)
    pool.release(alice, s1, reusable=True)
    s2 = await pool.acquire(bob)
    assert s2 is not s1  # bob never gets alice's session, even with the same capabilities
    pool.release(bob, s2, reusable=True)
    assert await pool.acquire(alice) is s1


async def test_without_reuse_every_call_gets_a_fresh_session(factory: Factory, clock: Clock) -> None:
    pool = SessionPool("github", factory, max_sessions=4, idle_ttl=60, clock=clock, reuse=False)
    s1 = await pool.acquire(KEY_A)
    pool.release(KEY_A, s1, reusable=True)
    s2 = await pool.acquire(KEY_A)
    assert s2 is not s1
    await settle()
    assert factory.opened[0].closed == 1


async def test_lost_sessions_and_failed_opens_are_reported(factory: Factory, clock: Clock) -> None:
    """What makes upstream/era.py probe an upstream again: a session that died under the pool, or one
    that could not be opened (the server may have been replaced by one of another era). A live session
    closed on purpose is no such sign."""
    lost: list[str] = []
    pool = SessionPool("github", factory, max_sessions=4, idle_ttl=60.0, clock=clock, on_lost=lost.append)
    live = await pool.acquire(KEY_A)
    pool.release(KEY_A, live, reusable=False)
    assert lost == []
    dead = await pool.acquire(KEY_A)
    factory.opened[1].alive = False
    pool.release(KEY_A, dead, reusable=True)
    assert lost == ["a session died"]
    factory.fail = UpstreamError("initialize refused: HTTP 400")
    with pytest.raises(UpstreamError):
        await pool.acquire(KEY_A)
    assert lost[-1] == "could not open a session: initialize refused: HTTP 400"
    await settle()


async def test_a_new_session_of_another_server_is_reported(factory: Factory, clock: Clock) -> None:
    """Issue 43 item 4: the server behind the address was replaced in place (its initialize names another
    server or protocol version). The cheap signal of a new era: reported once, without a session dying."""
    lost: list[str] = []
    pool = SessionPool("github", factory, max_sessions=4, idle_ttl=60.0, clock=clock, on_lost=lost.append)
    await pool.acquire(KEY_A)
    await pool.acquire(KEY_B)
    assert lost == []  # the same server
    original = FakeSession.__init__

    def upgraded(self: FakeSession, n: int, key: PoolKey) -> None:
        original(self, n, key)
        self.info = ServerInfo("2025-11-25", {}, {"name": "fastmcp4-fixture", "version": "4.2.3"}, None)

    FakeSession.__init__ = upgraded  # type: ignore[method-assign]
    try:
        await pool.acquire(KEY_A)
        await pool.acquire(KEY_B)
    finally:
        FakeSession.__init__ = original  # type: ignore[method-assign]
    assert lost == ["a new session's initialize shows another server (fastmcp4-fixture 4.2.3, 2025-11-25)"]
    assert (await pool.server_info(KEY_A)).server_info["name"] == "fastmcp4-fixture"
    await settle()


async def test_one_principal_holds_at_most_max_per_principal_sessions() -> None:
    """Issue 29 item 9 (pool.max_sessions_per_principal; 4 by default for stdio): past it, the principal's
    own idle session is closed for room, else PoolExhausted at once, naming the key."""
    factory = Factory()
    pool = SessionPool("kids", factory, max_sessions=10, idle_ttl=60, max_per_principal=2)
    alice_a = PoolKey(ClientCapabilities(elicitation_form=True), principal="alice")
    alice_b = PoolKey(ClientCapabilities(sampling=True), principal="alice")
    first, second = await pool.acquire(alice_a), await pool.acquire(alice_a)
    with pytest.raises(PoolExhausted) as refused:
        await pool.acquire(alice_b)
    assert str(refused.value).startswith(
        "this client holds 2 sessions of upstream 'kids' (pool.max_sessions_per_principal)"
    )
    bob = await pool.acquire(PoolKey(ClientCapabilities(elicitation_form=True), principal="bob"))
    assert pool.held_by("alice") == 2 and pool.held_by("bob") == 1
    pool.release(alice_a, first, reusable=True)  # idle: closed to make room for alice's other key
    third = await pool.acquire(alice_b)
    await asyncio.sleep(0)
    assert first.closed == 1 and third is not first
    assert pool.held_by("alice") == 2
    pool.release(alice_a, second, reusable=False)
    pool.release(alice_b, third, reusable=False)
    pool.release(bob.key, bob, reusable=False)  # type: ignore[attr-defined]
    await pool.close()


def test_a_pool_key_hashes_once_and_compares_by_its_fields() -> None:
    """The hash is kept on the key after its first use; equality and repr are the fields' alone."""
    caps = ClientCapabilities(sampling=True)
    one, other = (
        PoolKey(caps, (("authorization", "Bearer a"),), "p"),
        PoolKey(caps, (("authorization", "Bearer a"),), "p"),
    )
    assert hash(one) == hash(other) == hash(one) and one == other
    assert {one: 1}[other] == 1
    assert one != PoolKey(caps, (("authorization", "Bearer b"),), "p") and one != PoolKey(caps, (), "q")
    assert "_hash" not in repr(one)


def test_pool_keys_give_one_object_per_value_and_stay_bounded() -> None:
    """The front's keys (PoolKeys.of): the same object for the same capabilities, forwarded headers and
    principal, so the pool's maps find it by identity; never one key for two principals or two tokens; a
    flood of distinct values empties the table instead of growing it, and a key made anew is still equal."""
    keys, caps = PoolKeys(limit=4), ClientCapabilities(sampling=True)
    alice = keys.of(caps, (("authorization", "Bearer a"),), "alice")
    assert keys.of(caps, (("authorization", "Bearer a"),), "alice") is alice
    assert keys.of(caps, (("authorization", "Bearer b"),), "alice") != alice
    assert keys.of(caps, (("authorization", "Bearer a"),), "bob") != alice
    for n in range(10):  # a flood of principals
        keys.of(caps, (), f"p{n}")
    assert len(keys._keys) <= 4
    again = keys.of(caps, (("authorization", "Bearer a"),), "alice")
    assert again == alice and {alice: "session"}[again] == "session"

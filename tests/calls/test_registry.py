"""CallRegistry: admission limits, park/take, expiry on an injected clock, idempotent removal."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.calls.registry import ENDED_PER_CALL, CallBusy, CallRegistry, LimitExceeded, LiveCall
from proxy.translate.capabilities import ClientCapabilities
from proxy.translate.exchange import Exchange
from proxy.upstream.base import Inbox

PER_PRINCIPAL = "calls.max_parked_per_principal"


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def call(call_id: str, principal: str = "alice") -> LiveCall:
    session: Any = object()  # the registry never touches the session or the pool key
    key: Any = object()
    return LiveCall(
        id=call_id,
        upstream="up",
        method="tools/call",
        principal=principal,
        target_source="t",
        key=key,
        session=session,
        exchange=Exchange(ClientCapabilities()),
        inbox=Inbox(),
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def reg(clock: Clock) -> CallRegistry:
    return CallRegistry(max_calls=3, max_per_principal=2, clock=clock)


def test_add_get_len_iter(reg: CallRegistry) -> None:
    a, b = call("a"), call("b", "bob")
    reg.add(a)
    reg.add(b)
    assert len(reg) == 2
    assert reg.get("a") is a
    assert reg.get("missing") is None
    assert list(reg) == [a, b]


def test_iter_is_a_snapshot(reg: CallRegistry) -> None:
    for c in (call("a"), call("b", "bob")):
        reg.add(c)
    for c in reg:
        reg.remove(c)
    assert len(reg) == 0


def test_total_limit(reg: CallRegistry) -> None:
    reg.add(call("a", "p1"))
    reg.add(call("b", "p2"))
    reg.add(call("c", "p3"))
    for attempt in (lambda: reg.admit("p4"), lambda: reg.add(call("d", "p4"))):
        with pytest.raises(
            LimitExceeded, match=r"the proxy holds 3 parked or running calls \(calls.max_parked\)"
        ):
            attempt()
    assert len(reg) == 3
    assert reg.get("d") is None


def test_per_principal_limit(reg: CallRegistry) -> None:
    reg.add(call("a1", "alice"))
    reg.add(call("a2", "alice"))
    with pytest.raises(LimitExceeded, match=r"this client holds 2 parked or running calls") as info:
        reg.add(call("a3", "alice"))
    assert PER_PRINCIPAL in str(info.value)
    assert reg.get("a3") is None
    reg.admit("bob")  # another principal is not affected
    reg.add(call("b1", "bob"))
    assert len(reg) == 3


def test_total_limit_checked_before_per_principal() -> None:
    reg = CallRegistry(max_calls=1, max_per_principal=1)
    reg.add(call("a", "alice"))
    with pytest.raises(LimitExceeded, match=r"calls.max_parked\)"):
        reg.admit("alice")


def test_remove_frees_slots_and_is_idempotent(reg: CallRegistry) -> None:
    a1, a2 = call("a1"), call("a2")
    reg.add(a1)
    reg.add(a2)
    reg.remove(a1)
    reg.remove(a1)  # a second remove must not free a second slot
    reg.add(call("a3"))
    with pytest.raises(LimitExceeded, match=PER_PRINCIPAL):
        reg.add(call("a4"))
    assert [c.id for c in reg] == ["a2", "a3"]


def test_remove_unknown_call_is_harmless(reg: CallRegistry) -> None:
    reg.add(call("a"))
    reg.remove(call("never-added"))
    assert len(reg) == 1


def test_per_principal_count_drops_to_zero(reg: CallRegistry) -> None:
    calls = [call("a1"), call("a2")]
    for c in calls:
        reg.add(c)
    for c in calls:
        reg.remove(c)
    assert "alice" not in reg._per_principal  # no empty entries left behind
    reg.add(call("a3"))
    reg.add(call("a4"))


def test_park_and_take(reg: CallRegistry, clock: Clock) -> None:
    c = call("a")
    reg.add(c)
    assert not c.parked
    assert reg.parked_count == 0
    reg.park(c, ttl=30)
    assert c.parked
    assert c.parked_until == 1030.0
    assert reg.parked_count == 1
    reg.take(c)
    assert not c.parked
    assert c.parked_until is None
    assert reg.parked_count == 0
    with pytest.raises(CallBusy) as info:
        reg.take(c)
    assert info.value.args == ("a",)


def test_take_of_a_running_call_is_busy(reg: CallRegistry) -> None:
    c = call("a")
    reg.add(c)
    with pytest.raises(CallBusy, match=r"^a$"):
        reg.take(c)


def test_park_again_moves_the_deadline(reg: CallRegistry, clock: Clock) -> None:
    c = call("a")
    reg.add(c)
    reg.park(c, 10)
    clock.now += 5
    reg.park(c, 10)
    assert c.parked_until == 1015.0


def test_expired(reg: CallRegistry, clock: Clock) -> None:
    short, long, running = call("short"), call("long", "bob"), call("running", "carol")
    for c in (short, long, running):
        reg.add(c)
    reg.park(short, 10)
    reg.park(long, 60)
    assert reg.expired() == []
    clock.now += 9.999
    assert reg.expired() == []
    clock.now = 1010.0  # the deadline itself counts as expired
    assert reg.expired() == [short]
    clock.now += 1000
    assert {c.id for c in reg.expired()} == {"short", "long"}
    reg.take(long)
    assert reg.expired() == [short]
    reg.remove(short)
    assert reg.expired() == []


def test_expired_ignores_calls_taken_before_the_deadline(clock: Clock) -> None:
    reg = CallRegistry(max_calls=5, max_per_principal=5, clock=clock)
    c = call("a")
    reg.add(c)
    reg.park(c, 1)
    reg.take(c)
    clock.now += 100
    assert reg.expired() == []


# ---------------------------------------------------------------------------------------------------------
# Ended calls (replayed handles)
# ---------------------------------------------------------------------------------------------------------


def test_ended_is_remembered_for_the_handle_ttl(reg: CallRegistry, clock: Clock) -> None:
    c = call("a")
    reg.add(c)
    assert not reg.ended("a")
    reg.remove(c, handle_ttl=30)
    assert reg.get("a") is None
    assert reg.ended("a")
    clock.now += 29.999
    assert reg.ended("a")
    clock.now = 1030.0  # the handle's expiry itself: no longer a replay
    assert not reg.ended("a")


def test_remove_without_ttl_is_not_remembered(reg: CallRegistry) -> None:
    c = call("a")
    reg.add(c)
    reg.remove(c)
    assert not reg.ended("a")
    assert not reg.ended("never-seen")


def test_ended_is_bounded_by_a_multiple_of_max_calls(reg: CallRegistry) -> None:
    bound = ENDED_PER_CALL * 3  # max_calls is 3
    for i in range(bound + 2):
        c = call(f"c{i}", f"p{i}")
        reg.add(c)
        reg.remove(c, handle_ttl=60)
    assert [reg.ended(f"c{i}") for i in range(bound + 2)] == [False, False] + [True] * bound
    assert len(reg._ended) == bound


def test_expired_prunes_ended_calls(reg: CallRegistry, clock: Clock) -> None:
    short, long = call("short"), call("long")
    for c, ttl in ((short, 10), (long, 100)):
        reg.add(c)
        reg.remove(c, handle_ttl=ttl)
    clock.now += 10
    assert reg.expired() == []
    assert list(reg._ended) == ["long"]
    assert reg.ended("long")


def test_remove_with_ttl_still_frees_the_slot_once(reg: CallRegistry) -> None:
    a1, a2 = call("a1"), call("a2")
    reg.add(a1)
    reg.add(a2)
    reg.remove(a1, handle_ttl=10)
    reg.remove(a1, handle_ttl=10)
    reg.add(call("a3"))
    with pytest.raises(LimitExceeded, match=PER_PRINCIPAL):
        reg.add(call("a4"))


def test_address_share_counts_calls_whatever_the_principal(clock: Clock) -> None:
    reg = CallRegistry(max_calls=10, max_per_principal=10, max_per_address=2, clock=clock)
    for i in range(2):
        c = call(f"c{i}", f"minted-{i}")
        c.address = "10.0.0.1"
        reg.add(c)
    with pytest.raises(LimitExceeded, match=r"calls.max_calls_per_address") as refused:
        reg.admit("minted-9", "10.0.0.1")
    assert refused.value.reason == "address_share"
    reg.admit("minted-9", "10.0.0.2")  # another address has its own share
    reg.remove(reg.get("c0"))  # type: ignore[arg-type]
    reg.admit("minted-9", "10.0.0.1")
    assert reg.refusals == {"address_share": 1}


def test_parking_is_refused_past_the_upstreams_cap_and_counted_per_upstream(reg: CallRegistry) -> None:
    a, b = call("a"), call("b", "bob")
    reg.add(a)
    reg.add(b)
    reg.may_park(a, cap=1)
    reg.park(a, 60)
    assert reg.parked_in("up") == 1 and reg.parked_count == 1
    with pytest.raises(LimitExceeded, match=r"calls.parked_share") as refused:
        reg.may_park(b, cap=1)
    assert refused.value.reason == "parked_share"
    reg.may_park(a, cap=1)  # an already parked call (a task re-parking it) is not counted twice
    reg.take(a)
    assert reg.parked_in("up") == 0
    reg.may_park(b, cap=1)
    reg.park(b, 60)
    reg.remove(b)
    assert reg.parked_count == 0


def test_a_client_and_its_network_hold_no_more_parked_calls_than_are_still_free(clock: Clock) -> None:
    """Issue 29 item 8: four neighbours are one client; alone it gets half the room, and a newcomer from
    elsewhere always finds some."""
    reg = CallRegistry(max_calls=100, max_per_principal=100, max_per_address=100, clock=clock)
    cap = 12

    def park_from(name: str, address: str) -> None:
        c = call(name, f"minted-{name}")
        c.address = address
        reg.add(c)
        try:
            reg.may_park(c, cap)
        except LimitExceeded:
            reg.remove(c)  # the driver ends a call it may not park
            raise
        reg.park(c, 60)

    for i in range(6):
        park_from(f"n{i}", f"10.9.8.{i % 4 + 1}")
    with pytest.raises(LimitExceeded, match=r"this client's network holds 6 of the 6 calls") as refused:
        park_from("n6", "10.9.8.77")  # a fifth neighbour: the same /24
    assert refused.value.reason == "fair_share"
    park_from("far", "10.9.9.1")  # another /24 is another client
    for i in range(3):
        park_from(f"v6-{i}", f"2001:db8:7:1::{i + 1}")
    with pytest.raises(LimitExceeded, match=r"this client's network holds 3") as refused:
        park_from("v6-3", "2001:db8:7:1::99")  # its /64 holds 3 with 2 free
    assert refused.value.reason == "fair_share"
    assert reg.parked_in("up") == 10
    assert reg.refusals["fair_share"] == 2
    for c in list(reg):
        reg.take(c)  # unparked: the holdings drop with it
    assert reg.parked_in("up") == 0
    for i in range(6):
        park_from(f"again{i}", "10.9.8.1")  # nobody else holds anything: half the room again


def test_the_fair_share_is_off_with_the_address_share(clock: Clock) -> None:
    reg = CallRegistry(max_calls=10, max_per_principal=10, max_per_address=0, clock=clock)
    for i in range(4):
        c = call(f"c{i}", f"p{i}")
        c.address = "10.0.0.1"
        reg.add(c)
        reg.may_park(c, cap=4)
        reg.park(c, 60)
    assert reg.parked_in("up") == 4


def test_principals_that_never_answered_park_for_the_first_round_ttl_only(clock: Clock) -> None:
    reg = CallRegistry(max_calls=10, max_per_principal=10, first_round_ttl=5, clock=clock)
    new, known = call("n", "newcomer"), call("k", "regular")
    reg.add(new)
    reg.add(known)
    reg.prove("regular")
    assert reg.park(new, 600) == 5
    assert reg.park(known, 600) == 600
    clock.now += 6
    assert reg.overdue(new) and not reg.overdue(known)
    assert reg.expired() == [new]


def test_operator_cancelled_calls_are_remembered_like_ended_ones(reg: CallRegistry, clock: Clock) -> None:
    """A call an operator cancelled is told apart from one that simply ended, for as long as its handles
    live, and forgotten with the other ended calls (bounded, pruned on expiry)."""
    cancelled, finished = call("cancelled"), call("finished")
    for c in (cancelled, finished):
        reg.add(c)
    reg.remove(cancelled, handle_ttl=60, by_operator=True)
    reg.remove(finished, handle_ttl=60)
    assert reg.cancelled_by_operator("cancelled") and reg.ended("cancelled")
    assert not reg.cancelled_by_operator("finished") and reg.ended("finished")
    clock.now += 61
    reg.expired()
    assert not reg.cancelled_by_operator("cancelled") and not reg._cancelled
    bound = ENDED_PER_CALL * 3
    for i in range(bound + 1):
        c = call(f"c{i}", f"p{i}")
        reg.add(c)
        reg.remove(c, handle_ttl=60, by_operator=True)
    assert len(reg._cancelled) == len(reg._ended) == bound  # the oldest went with its ended entry
    assert not reg.cancelled_by_operator("c0") and reg.cancelled_by_operator(f"c{bound}")


def test_the_target_digest_is_computed_once_when_first_needed() -> None:
    computed: list[int] = []

    def digest() -> str:
        computed.append(1)
        return "digest"

    live = call("c1")
    live.target_source = digest
    assert computed == []  # a call that never parks never computes it
    assert live.target == live.target == "digest"
    assert computed == [1]
    assert live.target_source == "digest"  # what it was computed from is no longer held


def test_calls_held_elsewhere_share_every_limit(reg: CallRegistry) -> None:
    """A mirrored call (front/legacy/mirror/calls.py) is held outside the registry but counts against the
    total, the principal's and the address's shares, and a registered call counts against it."""
    reg.hold("alice", "10.0.0.1")
    reg.add(call("a", "alice"))
    with pytest.raises(LimitExceeded, match=PER_PRINCIPAL):
        reg.hold("alice")
    reg.hold("bob")
    assert reg.held == 3 and len(reg) == 1
    with pytest.raises(LimitExceeded, match=r"calls.max_parked\)"):
        reg.add(call("b", "carol"))
    with pytest.raises(LimitExceeded, match=r"calls.max_parked\)"):
        reg.hold("carol")
    reg.let_go("alice", "10.0.0.1")
    reg.hold("carol")
    assert reg.held == 3
    reg.let_go("bob")
    reg.let_go("carol")
    reg.remove(reg.get("a"))  # type: ignore[arg-type]
    assert reg.held == 0
    by_address = CallRegistry(max_calls=10, max_per_principal=10, max_per_address=1)
    by_address.hold("alice", "10.0.0.1")
    with pytest.raises(LimitExceeded, match=r"calls\.max_calls_per_address"):
        by_address.hold("bob", "10.0.0.1")

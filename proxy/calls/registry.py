"""Live calls by id: running ones and parked ones waiting for the client's retry.

A call is admitted before it starts, parked with a deadline when it returns `input_required`, taken back
by the retry that holds its current handle, and forgotten when it ends — whichever way it ends.

**Fair admission** (issue 14): anyone can mint principals (a new `Authorization` value is a new one), so
no single source may take the capacity others need. A new call is refused (`LimitExceeded`, with a
`reason` for the metrics) when the replica holds `max_calls`, when its principal holds `max_per_principal`,
or when its client address holds `max_per_address` (running and parked calls alike). Parking is refused
once an upstream holds its `park_cap` parked calls (the service computes it from `calls.parked_share` of
`pool.max_sessions`), so calls that never ask for input always find a session; and, with the per-address
share on, when the call's client — its address, or its /24 or /64 (calls/fairness.py) — already holds as
many of that upstream's parked calls as are still free: a few addresses cannot take the whole room. A
principal that never completed a call it was asked input for gets at most `first_round_ttl` seconds per
park, every round and tasks included: a flood of minted principals ties sessions up for that long, not for
`calls.parked_ttl_s`, whatever rounds it answers.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.calls.fairness import client_keys, over_fair_share
from proxy.translate.exchange import Exchange
from proxy.upstream.base import Inbox, UpstreamSession
from proxy.upstream.pool import PoolKey
from proxy.wire.jsonrpc import RequestId

ENDED_PER_CALL = 8  # ended calls remembered per call slot (~100 bytes each)


class LimitExceeded(Exception):
    """A limit refused a call. `reason` (for metrics and readiness) is one of REFUSAL_REASONS."""

    def __init__(self, message: str, reason: str = "calls_total") -> None:
        super().__init__(message)
        self.reason = reason


# calls_total / principal_share / address_share: admission of a new call; parked_share / fair_share:
# parking it; pool_full (pool.py): no session within pool.acquire_timeout_s.
REFUSAL_REASONS = (
    "calls_total",
    "principal_share",
    "address_share",
    "parked_share",
    "fair_share",
    "pool_full",
)


class CallBusy(Exception):
    """A retry arrived for a call that another retry is already driving."""


@dataclass(slots=True, eq=False)
class LiveCall:
    id: str
    upstream: str
    method: str
    principal: str
    # The target digest sealed into its handles (handle/codec.py), or how to compute it: computed when the
    # first handle is sealed, so a call that never parks (most calls) never pays for it.
    target_source: str | Callable[[], str]
    key: PoolKey
    session: UpstreamSession
    exchange: Exchange
    inbox: Inbox
    upstream_id: RequestId = 0
    started: float = field(default_factory=time.monotonic)
    parked_until: float | None = None  # monotonic deadline while parked; None while a request drives it
    parked_at: float = 0.0  # when it was last parked (monotonic)
    task: str | None = None  # the Tasks-extension task that owns the call (proxy/tasks), if any
    first_span: str | None = None  # the span of the call's first round, when tracing (sealed into handles)
    # Not sent upstream yet (method, params): its first round asks the client what the session's server
    # asked before any call (calls/roots.py); the retry that answers sends it.
    unsent: tuple[str, Mapping[str, Any]] | None = None
    address: str = ""  # the client's address (per-address share); "" when unknown
    tool: str = ""  # the tool (or method) called: what adaptive gathering learns by (calls/gathering.py)

    @property
    def parked(self) -> bool:
        return self.parked_until is not None

    @property
    def target(self) -> str:
        source = self.target_source
        if not isinstance(source, str):
            source = self.target_source = source()  # and the request's params are no longer held
        return source


class CallRegistry:
    def __init__(
        self,
        *,
        max_calls: int,
        max_per_principal: int,
        max_per_address: int = 0,
        first_round_ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._max = max_calls
        self._max_per_principal = max_per_principal
        self._max_per_address = max_per_address  # 0: no per-address share
        self._first_round_ttl = first_round_ttl  # None: no shorter first round
        self._clock = clock
        self._calls: dict[str, LiveCall] = {}
        self._per_principal: Counter[str] = Counter()
        self._per_address: Counter[str] = Counter()
        self._parked: Counter[str] = Counter()  # parked calls by upstream
        self._held: Counter[tuple[str, str]] = Counter()  # parked calls by (upstream, client key)
        # Principals that answered an input request here (most recent last), bounded like the calls.
        self._proven: OrderedDict[str, None] = OrderedDict()
        self.refusals: Counter[str] = Counter()  # by reason, since start
        # Calls that ended, remembered until their last handle expires, so a replayed handle is told apart
        # from a lost call. Insertion-ordered, so the oldest go first; bounded by ENDED_PER_CALL * max_calls
        # (the service also refuses any handle this replica issued for a call it no longer holds).
        self._ended: dict[str, float] = {}
        self._cancelled: set[str] = set()  # the ended calls an operator cancelled (a subset of _ended)
        # Calls held elsewhere that count against the same limits (the mirror: front/legacy/mirror/calls.py)
        self._elsewhere = 0

    def __len__(self) -> int:
        return len(self._calls)

    def __iter__(self) -> Iterator[LiveCall]:
        return iter(list(self._calls.values()))

    @property
    def parked_count(self) -> int:
        return sum(self._parked.values())

    @property
    def max_calls(self) -> int:
        return self._max

    @property
    def held(self) -> int:
        """Every call this replica holds: its own and those held elsewhere (`hold`)."""
        return len(self._calls) + self._elsewhere

    def hold(self, principal: str, address: str = "") -> None:
        """Admit a call that lives outside the registry (a mirrored call, which waits for its legacy
        client's answers as a parked call does) and count it against calls.max_parked, the principal's and
        the address's shares until `let_go`. Raises LimitExceeded as `admit` does."""
        self.admit(principal, address)
        self._elsewhere += 1
        self._per_principal[principal] += 1
        if address:
            self._per_address[address] += 1

    def let_go(self, principal: str, address: str = "") -> None:
        """A call admitted by `hold` ended."""
        self._elsewhere -= 1
        _decrement(self._per_principal, principal)
        if address:
            _decrement(self._per_address, address)

    def parked_in(self, upstream: str) -> int:
        return self._parked[upstream]

    def admit(self, principal: str, address: str = "") -> None:
        """Refuse a new call when the proxy, this principal or this client address is at its limit."""
        if self.held >= self._max:
            self._refuse(
                f"the proxy holds {self._max} parked or running calls (calls.max_parked)", "calls_total"
            )
        if self._per_principal[principal] >= self._max_per_principal:
            self._refuse(
                f"this client holds {self._max_per_principal} parked or running calls "
                "(calls.max_parked_per_principal); finish or abandon some first",
                "principal_share",
            )
        if address and 0 < self._max_per_address <= self._per_address[address]:
            self._refuse(
                f"this client address holds {self._max_per_address} parked or running calls "
                "(calls.max_calls_per_address); finish or abandon some first",
                "address_share",
            )

    def refused(self, reason: str) -> None:
        """Count a refusal decided elsewhere (the pool had no session in time)."""
        self.refusals[reason] += 1

    def _refuse(self, message: str, reason: str) -> None:
        self.refusals[reason] += 1
        raise LimitExceeded(message, reason)

    def add(self, call: LiveCall) -> None:
        if call.id in self._calls:
            raise ValueError(f"call id {call.id!r} is already registered")
        self.admit(call.principal, call.address)
        self._calls[call.id] = call
        self._per_principal[call.principal] += 1
        if call.address:
            self._per_address[call.address] += 1

    def may_park(self, call: LiveCall, cap: int) -> None:
        """Refuse to park `call` when its upstream already holds `cap` parked calls, or (per-address share
        on) when its client or its client's network holds as many of them as are still free."""
        if call.parked:
            return
        parked = self._parked[call.upstream]
        if parked >= cap:
            self._refuse(
                f"{cap} calls wait for input on upstream {call.upstream!r} (calls.parked_share of "
                "pool.max_sessions, kept free for calls that do not ask for input)",
                "parked_share",
            )
        if self._max_per_address <= 0:
            return
        for n, key in enumerate(client_keys(call.address)):
            if over_fair_share(self._held[call.upstream, key], parked, cap):
                who = "this client address" if n == 0 else "this client's network"
                self._refuse(
                    f"{who} holds {self._held[call.upstream, key]} of the {parked} calls waiting for input "
                    f"on upstream {call.upstream!r}; while room is short no client may hold more than is "
                    "still free (calls.parked_share)",
                    "fair_share",
                )

    def prove(self, principal: str) -> None:
        """`principal` completed a call it was asked input for: its calls park for the full TTL from now
        on. (Answering a round is not enough: a minted principal answers anything to keep its calls.)"""
        self._proven[principal] = None
        self._proven.move_to_end(principal)
        while len(self._proven) > self._max:
            self._proven.popitem(last=False)

    def proven(self, principal: str) -> bool:
        return principal in self._proven

    def get(self, call_id: str) -> LiveCall | None:
        return self._calls.get(call_id)

    def park(self, call: LiveCall, ttl: float) -> float:
        """Park `call` for `ttl` seconds, or less for a principal that never completed a round; returns
        the TTL it got (its handle must not outlive it)."""
        if self._first_round_ttl is not None and call.principal not in self._proven:
            ttl = min(ttl, self._first_round_ttl)
        if not call.parked:
            self._parked[call.upstream] += 1
            for key in client_keys(call.address):
                self._held[call.upstream, key] += 1
        call.parked_at = self._clock()
        call.parked_until = call.parked_at + ttl
        return ttl

    def parked_for(self, call: LiveCall) -> float:
        """Seconds since `call` was last parked."""
        return self._clock() - call.parked_at

    def take(self, call: LiveCall) -> None:
        """A retry starts driving the call; a second concurrent retry gets CallBusy."""
        if not call.parked:
            raise CallBusy(call.id)
        call.parked_until = None
        self._unpark(call)

    def _unpark(self, call: LiveCall) -> None:
        _decrement(self._parked, call.upstream)
        for key in client_keys(call.address):
            _decrement(self._held, (call.upstream, key))

    def remove(self, call: LiveCall, *, handle_ttl: float = 0.0, by_operator: bool = False) -> None:
        """Forget a call; its handles (valid for `handle_ttl` more seconds) count as replays from now on,
        or, `by_operator`, as retries of a call an operator cancelled (`cancelled_by_operator`)."""
        if handle_ttl > 0:
            self._ended[call.id] = self._clock() + handle_ttl
            if by_operator:
                self._cancelled.add(call.id)
            while len(self._ended) > ENDED_PER_CALL * self._max:
                self._forget_ended(next(iter(self._ended)))
        if self._calls.pop(call.id, None) is not None:
            if call.parked:
                self._unpark(call)
            _decrement(self._per_principal, call.principal)
            if call.address:
                _decrement(self._per_address, call.address)

    def ended(self, call_id: str) -> bool:
        """Did this call end here recently (so its handle is a replay, not a lost call)?"""
        until = self._ended.get(call_id)
        return until is not None and until > self._clock()

    def cancelled_by_operator(self, call_id: str) -> bool:
        """Did an operator cancel this call here recently (its retry is told so)?"""
        return call_id in self._cancelled and self.ended(call_id)

    def _forget_ended(self, call_id: str) -> None:
        del self._ended[call_id]
        self._cancelled.discard(call_id)

    def overdue(self, call: LiveCall) -> bool:
        """Is `call` parked past its deadline (the reaper will end it)?"""
        return call.parked_until is not None and call.parked_until <= self._clock()

    def expired(self) -> list[LiveCall]:
        now = self._clock()
        for call_id in [c for c, until in self._ended.items() if until <= now]:
            self._forget_ended(call_id)
        return [c for c in self._calls.values() if c.parked_until is not None and c.parked_until <= now]


def _decrement(counter: Counter[Any], key: Any) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]

"""Live calls by id: running ones and parked ones waiting for the client's retry.

A call is admitted before it starts (limits, total and per principal), parked with a deadline when it
returns `input_required`, taken back by the retry that holds its current handle, and forgotten when it
ends — whichever way it ends.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.pool import PoolKey
from proxy.translate.exchange import Exchange
from proxy.upstream.base import Inbox, UpstreamSession
from proxy.wire.jsonrpc import RequestId


class LimitExceeded(Exception):
    pass


class CallBusy(Exception):
    """A retry arrived for a call that another retry is already driving."""


@dataclass(slots=True, eq=False)
class LiveCall:
    id: str
    upstream: str
    method: str
    principal: str
    target: str
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

    @property
    def parked(self) -> bool:
        return self.parked_until is not None


class CallRegistry:
    def __init__(
        self, *, max_calls: int, max_per_principal: int, clock: Callable[[], float] = time.monotonic
    ):
        self._max = max_calls
        self._max_per_principal = max_per_principal
        self._clock = clock
        self._calls: dict[str, LiveCall] = {}
        self._per_principal: Counter[str] = Counter()
        # Calls that ended, remembered until their last handle expires, so a replayed handle is told apart
        # from a lost call. Insertion-ordered, so the oldest go first; bounded by `max_calls`.
        self._ended: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def __iter__(self) -> Iterator[LiveCall]:
        return iter(list(self._calls.values()))

    @property
    def parked_count(self) -> int:
        return sum(1 for c in self._calls.values() if c.parked)

    def admit(self, principal: str) -> None:
        """Refuse a new call when the proxy or this principal is at its limit."""
        if len(self._calls) >= self._max:
            raise LimitExceeded(f"the proxy holds {self._max} parked or running calls (calls.max_parked)")
        if self._per_principal[principal] >= self._max_per_principal:
            raise LimitExceeded(
                f"this client holds {self._max_per_principal} parked or running calls "
                "(calls.max_parked_per_principal); finish or abandon some first"
            )

    def add(self, call: LiveCall) -> None:
        if call.id in self._calls:
            raise ValueError(f"call id {call.id!r} is already registered")
        self.admit(call.principal)
        self._calls[call.id] = call
        self._per_principal[call.principal] += 1

    def get(self, call_id: str) -> LiveCall | None:
        return self._calls.get(call_id)

    def park(self, call: LiveCall, ttl: float) -> None:
        call.parked_at = self._clock()
        call.parked_until = call.parked_at + ttl

    def parked_for(self, call: LiveCall) -> float:
        """Seconds since `call` was last parked."""
        return self._clock() - call.parked_at

    def take(self, call: LiveCall) -> None:
        """A retry starts driving the call; a second concurrent retry gets CallBusy."""
        if not call.parked:
            raise CallBusy(call.id)
        call.parked_until = None

    def remove(self, call: LiveCall, *, handle_ttl: float = 0.0) -> None:
        """Forget a call; its handles (valid for `handle_ttl` more seconds) count as replays from now on."""
        if handle_ttl > 0:
            self._ended[call.id] = self._clock() + handle_ttl
            while len(self._ended) > self._max:
                del self._ended[next(iter(self._ended))]
        if self._calls.pop(call.id, None) is not None:
            self._per_principal[call.principal] -= 1
            if self._per_principal[call.principal] <= 0:
                del self._per_principal[call.principal]

    def ended(self, call_id: str) -> bool:
        """Did this call end here recently (so its handle is a replay, not a lost call)?"""
        until = self._ended.get(call_id)
        return until is not None and until > self._clock()

    def expired(self) -> list[LiveCall]:
        now = self._clock()
        for call_id in [c for c, until in self._ended.items() if until <= now]:
            del self._ended[call_id]
        return [c for c in self._calls.values() if c.parked_until is not None and c.parked_until <= now]

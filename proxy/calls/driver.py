"""The engine under the call service: drives a live call on its upstream session, parks it, ends it.

`EngineState` is what every part of the service shares (pools, codec, registry, settings, and `stopping`);
`CallDriver` makes the moves they all make: `drive` a call until it completes, fails or asks for input (then
`park` it with a sealed handle), `deliver` the client's input, `finish` or `abandon` it. service.py (start,
resume), takeover.py and drain.py hold a driver and the state, nothing of each other's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import structlog

from proxy.calls.gathering import GatherLearner, GatherWindow
from proxy.calls.outcomes import (
    CallObserver,
    CallSettings,
    Completed,
    Failed,
    InvalidRequestState,
    NeedsInput,
    NoObserver,
    NotificationSink,
    Outcome,
    Running,
    shut_down,
    too_many_calls,
    too_many_inputs,
)
from proxy.calls.registry import CallRegistry, LimitExceeded, LiveCall
from proxy.calls.roots import RootsBook, SessionRoots, deliver_input, settle_unasked
from proxy.calls.scope import SessionLevels
from proxy.calls.wording import not_run, timed_out, upstream_failed
from proxy.handle import Claims, HandleCodec, carried_ids, carried_session
from proxy.handle.claims import MAX_PENDING, MAX_STR
from proxy.upstream.base import TransportLost, UpstreamError
from proxy.upstream.pool import SessionPool
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.calls.service")


def _carried_position(session_id: str | None, last_event: str | None) -> tuple[str, str | None]:
    """The session and last event id a handle carries. An id too long for it is digested (the session) or
    left out (the event id); either way the call cannot be taken over: there is no event id to resume from."""
    session = carried_session(session_id or "")
    if session != (session_id or "") or (last_event is not None and len(last_event) > MAX_STR):
        return session, None
    return session, last_event


def _asks_input(item: object) -> bool:
    return isinstance(item, jsonrpc.Request) and item.method in mcp.INPUT_REQUEST_METHODS


class Expiry(Enum):
    """What the deadline a `drive` waits for means when it passes."""

    TIMEOUT = "timeout"  # the round's calls.call_timeout_s: the call is abandoned
    PARK = "park"  # the gather window closed: the round is parked for its client
    YIELD = "yield"  # `yield_after` ran out: the call is left Running for its task to drive on


# As module globals: a global load in the drive loop, not an Enum class attribute look-up.
_TIMEOUT, _PARK, _YIELD = Expiry.TIMEOUT, Expiry.PARK, Expiry.YIELD


@dataclass(slots=True, eq=False)
class EngineState:
    """What the call service's parts (service, driver, takeover, drain) share; one per service."""

    pools: Mapping[str, SessionPool]
    codec: HandleCodec
    registry: CallRegistry
    settings: CallSettings
    clock: Callable[[], float]  # the handles' clock (seconds since the epoch)
    observer: CallObserver
    roots: RootsBook | None  # the sessions' roots state (calls/roots.py); None: none kept
    levels: SessionLevels  # the log level set on each upstream session (calls/scope.py)
    gathering: GatherLearner  # what adaptive gathering learned on this replica (calls/gathering.py)
    # Handles this replica issued since it started name calls it knows: one it no longer holds ended
    # (unless it is stopping and left its calls for another replica to take over).
    started: int
    stopping: bool = False  # drain's grace is over: a call cut now was cut by this replica shutting down

    @classmethod
    def of(
        cls,
        pools: Mapping[str, SessionPool],
        codec: HandleCodec,
        registry: CallRegistry,
        settings: CallSettings,
        clock: Callable[[], float],
        *,
        observer: CallObserver | None,
        roots: RootsBook | None,
    ) -> EngineState:
        return cls(
            pools,
            codec,
            registry,
            settings,
            clock,
            observer or NoObserver(),
            roots,
            SessionLevels(),
            GatherLearner(settings.gather_window),
            int(clock()),
        )


class CallDriver:
    """Drives, parks and ends calls. Its references to the shared parts are copied once: the drive loop
    reads them as one attribute each, as before the parts were split."""

    def __init__(self, state: EngineState) -> None:
        self._state = state
        self._pools = state.pools
        self._codec = state.codec
        self._registry = state.registry
        self._settings = state.settings
        self._clock = state.clock
        self._roots = state.roots
        self._gathering = state.gathering

    async def lost(self, call: LiveCall, lost: TransportLost) -> Failed:
        """The call's session can no longer deliver its messages. Refused before it reached the tool (a
        forgotten session, a 4xx): "did not run", safe to send again; else it may have run, not re-run."""
        if self._state.stopping:
            await self.abandon(call, "the proxy is shutting down")
            return Failed(shut_down("it was cancelled upstream"))
        self.finish(call, reusable=False)
        unrun = lost.refused or not lost.delivered
        said = not_run(lost.reason) if unrun else upstream_failed(lost.reason)
        return Failed(said, undelivered=not lost.delivered, challenge=lost.challenge)

    def session_roots(self, call: LiveCall) -> SessionRoots | None:
        """The roots state of the call's session, when its client declared roots (calls/roots.py)."""
        if self._roots is None or not call.key.capabilities.roots:
            return None
        return self._roots.of(call.session)

    async def deliver(self, call: LiveCall, responses: Mapping[str, Any]) -> Failed | None:
        # Nothing of the parked round answered yet: a request waiting in the inbox was sent without waiting
        # for any answer, a burst that came apart (calls/gathering.py).
        if not call.exchange.answered and call.inbox.holds(_asks_input):
            self._gathering.split((call.upstream, call.tool), self._registry.parked_for(call))
        try:
            await deliver_input(call, responses, self.session_roots(call))
        except UpstreamError as exc:
            await self.abandon(call, "could not deliver the client's input")
            return Failed(upstream_failed(f"could not deliver the input: {exc}"))
        return None

    def check_current(self, call: LiveCall, claims: Claims) -> None:
        pending_ids, hashed = carried_ids({k: p.legacy_id for k, p in call.exchange.pending.items()})
        if claims.round != call.exchange.round or (dict(claims.pending), claims.hashed) != (
            pending_ids,
            hashed,
        ):
            raise InvalidRequestState("stale_round")
        if (
            claims.session != carried_session(call.session.session_id or "")
            or claims.principal != call.principal
        ):
            raise InvalidRequestState("call_mismatch")

    async def drive(
        self,
        call: LiveCall,
        notify: NotificationSink | None,
        *,
        yield_after: float | None = None,
        park_ttl: float | None = None,
    ) -> Outcome:
        loop = asyncio.get_running_loop()
        round_deadline = loop.time() + self._settings.call_timeout
        yield_at = None if yield_after is None else loop.time() + yield_after
        # The gather window: once the upstream asks for input, wait for more requests sent together with
        # it, at most `gather_window`, and no longer than the learned quiet period after the latest one
        # (calls/gathering.py: a tool only ever seen sending lone requests is parked at once).
        window = GatherWindow(self._gathering, (call.upstream, call.tool))
        try:
            while True:
                if call.exchange.has_pending and window.deadline is None:
                    window.open(loop.time(), len(call.exchange.pending))
                # Which deadline is armed decides what its expiry means (not loop.time(): uvloop's timers may
                # fire a little before the deadline they were set for).
                deadline, on_expiry = round_deadline, _TIMEOUT
                if window.deadline is not None and window.deadline <= deadline:
                    deadline, on_expiry = window.deadline, _PARK
                elif yield_at is not None and window.deadline is None and yield_at <= deadline:
                    deadline, on_expiry = yield_at, _YIELD  # input being gathered: no yielding
                # What the upstream sent next (here, not in a coroutine of its own: one frame fewer each time
                # the call's task resumes). A window already over with nothing received parks at once,
                # without arming a timer or waiting a loop iteration (a tool seen sending lone requests has
                # no quiet period: calls/gathering.py); a call to yield at once (a task from the start:
                # tasks/policy.py) yields at once, however soon its upstream may answer.
                try:
                    if not call.inbox.empty():
                        item = call.inbox.get_nowait()
                    elif on_expiry is not _TIMEOUT and deadline <= loop.time():
                        raise TimeoutError
                    else:
                        item = await call.inbox.get_by(deadline)
                except TimeoutError:
                    if on_expiry is _PARK:
                        window.parked()
                        return await self.park(call, park_ttl)
                    if on_expiry is _YIELD:
                        return Running(call)
                    await self.abandon(call, "the upstream did not answer in time")
                    return Failed(timed_out(self._settings.call_timeout, cancelled=True))
                match item:
                    case jsonrpc.Result() | jsonrpc.Error():
                        await settle_unasked(call, self.session_roots(call))
                        if call.exchange.round > 0:  # its client answered every round it was asked
                            self._registry.prove(call.principal)
                        self.finish(call, reusable=True)
                        return Completed(item)
                    case jsonrpc.Request():
                        queued = await self._on_server_request(call, item)
                        if isinstance(queued, Failed):
                            return queued
                        if queued and window.deadline is not None:  # one more arrived: the window stays open
                            window.more(loop.time())
                    case jsonrpc.Notification():
                        if notify is not None:
                            await notify(item)
                    case TransportLost():
                        return await self.lost(call, item)
        except UpstreamError as exc:
            await self.abandon(call, str(exc))
            if self._state.stopping:
                return Failed(shut_down("it was cancelled upstream"))
            return Failed(upstream_failed(str(exc)))
        except BaseException:
            await asyncio.shield(self.abandon(call, "the client went away"))
            raise

    async def _on_server_request(self, call: LiveCall, req: jsonrpc.Request) -> bool | Failed:
        """True: `req` waits for the client's input; False: it was answered at once. Failed: the upstream
        asked more than one round carries (MAX_PENDING), and the call was cancelled upstream."""
        reply = call.exchange.on_server_request(req)
        if reply is not None:
            await call.session.send(reply.message())
            return False
        if len(call.exchange.pending) > MAX_PENDING:
            await self.abandon(call, f"the upstream asked more than {MAX_PENDING} at once")
            return Failed(too_many_inputs(MAX_PENDING))
        return True

    def park_cap(self, upstream: str) -> int:
        """How many calls may wait for input on `upstream` at once (calls.parked_share of its pool)."""
        return max(1, int(self._pools[upstream].max_sessions * self._settings.parked_share))

    async def park(self, call: LiveCall, ttl: float | None = None) -> NeedsInput | Failed:
        """Park the call for its client's answer, unless its upstream's share for parked calls is full:
        then the call ends (the upstream is told) with -31003, and the sessions stay free for calls that
        do not ask for input."""
        try:
            self._registry.may_park(call, self.park_cap(call.upstream))
        except LimitExceeded as exc:
            await self.abandon(call, "too many calls wait for input")
            return Failed(too_many_calls(exc))
        ttl = self._registry.park(call, self._settings.parked_ttl if ttl is None else ttl)
        rnd = call.exchange.open_round()
        pending, hashed = carried_ids(rnd.pending_ids)  # an id too long to carry: its digest (claims.py)
        session, last_event = _carried_position(call.session.session_id, call.session.last_event_id)
        now = int(self._clock())
        claims = Claims(
            upstream=call.upstream,
            session=session,
            call=call.id,
            round=rnd.round,
            pending=pending,
            owner=self._settings.owner,
            principal=call.principal,
            target=call.target,
            issued_at=now,
            expires_at=now + int(ttl),
            last_event=last_event,
            request=None if call.unsent is not None else call.upstream_id,
            trace=call.first_span,
            hashed=hashed,
        )
        return NeedsInput(rnd.input_requests, self._codec.seal(claims), rnd.round, call.id)

    def _handle_ttl(self, call: LiveCall) -> float:
        """How long the call's handles outlive it: none were issued before its first round was opened (a
        pass-through call), so there is nothing to tell apart from a lost call, and nothing to remember."""
        return self._settings.parked_ttl if call.exchange.round > 0 else 0.0

    def finish(self, call: LiveCall, *, reusable: bool) -> None:
        call.session.end_call()
        self._registry.remove(call, handle_ttl=self._handle_ttl(call))
        self._pools[call.upstream].release(call.key, call.session, reusable=reusable)

    async def abandon(self, call: LiveCall, reason: str, *, by_operator: bool = False) -> None:
        """Give up on a call: answer its pending requests, tell the upstream, drop the session."""
        if self._registry.get(call.id) is None:
            return
        self._registry.remove(call, handle_ttl=self._handle_ttl(call), by_operator=by_operator)
        try:
            with contextlib.suppress(UpstreamError, TimeoutError):
                async with asyncio.timeout(5):
                    for reply in call.exchange.cancel_all(f"Cancelled by mrtr-proxy: {reason}"):
                        await call.session.send(reply.message())
                    if call.unsent is None:  # else the upstream never got the call
                        await call.session.send(
                            jsonrpc.Notification(
                                mcp.CANCELLED, {"requestId": call.upstream_id, "reason": reason}
                            )
                        )
        finally:  # even when the client hangs up mid-send: the call is out of the registry already, and
            # no retry of this abandon would find it to release its session (or stdio child)
            call.session.end_call()
            self._pools[call.upstream].release(call.key, call.session, reusable=False)

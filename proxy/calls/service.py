"""Runs `tools/call`, `prompts/get` and `resources/read` on a legacy upstream as MRTR rounds.

`start` sends the call upstream on a session of its own and drives it until it completes or the upstream
asks for input; then the live call is parked and the client gets `input_required` with a sealed handle.
`resume` unseals the handle, checks it against the retry, answers the parked legacy requests and drives on.
A call is never re-sent upstream: it resumes, or it fails with a clear error.

The parts: outcomes.py (what goes in and out), driver.py (the state the parts share; driving, parking, ending
a call), takeover.py (a call whose replica is gone), drain.py (reaping and shutdown). `CallService` holds one
of each and the state they share, and is all its callers see.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

from proxy.calls.drain import Drain
from proxy.calls.driver import CallDriver, EngineState, log
from proxy.calls.gathering import GatherLearner, tool_of
from proxy.calls.ids import call_id
from proxy.calls.outcomes import (
    CallObserver,
    CallRequest,
    CallSettings,
    Failed,
    Forward,
    InvalidRequestState,
    NotificationSink,
    Outcome,
    OwnerGone,
    invalid_responses,
    too_many_calls,
)
from proxy.calls.registry import CallBusy, CallRegistry, LimitExceeded, LiveCall
from proxy.calls.roots import RootsBook, ask_first
from proxy.calls.scope import scoped_sink
from proxy.calls.takeover import Takeover
from proxy.calls.wording import cancelled_by_operator, unavailable
from proxy.handle import HandleCodec, HandleError, target_digest
from proxy.translate.exchange import Exchange
from proxy.translate.notes import call_progress_token, with_progress_token
from proxy.upstream.base import NotDelivered, UpstreamAuthChallenge, UpstreamError, UpstreamSession
from proxy.upstream.inbox import LeanQueue
from proxy.upstream.pool import PoolExhausted, SessionPool
from proxy.wire import mcp

HELD_CHECK_S = 5.0  # the ping that checks a session holding server requests is still its server's


class CallService:
    """Runs calls as MRTR rounds: `start`, `resume`, and for tasks `drive` and `answer`; ends them for the
    process: `reap_expired`, `cancel_parked`, `drain`, `close` (see the module docstring)."""

    def __init__(
        self,
        pools: Mapping[str, SessionPool],
        codec: HandleCodec,
        registry: CallRegistry,
        settings: CallSettings,
        clock: Callable[[], float] = time.time,
        *,
        observer: CallObserver | None = None,
        roots: RootsBook | None = None,  # the sessions' roots state (calls/roots.py); None: none kept
    ) -> None:
        self._state = state = EngineState.of(
            pools, codec, registry, settings, clock, observer=observer, roots=roots
        )
        self._driver = driver = CallDriver(state)
        self._takeover = Takeover(state, driver)
        self._drain = Drain(state, driver)
        # What start and resume read on every call, as one attribute each.
        self._pools, self._codec, self._registry, self._settings = pools, codec, registry, settings
        self._roots, self._levels, self._observer = roots, state.levels, state.observer

    @property
    def registry(self) -> CallRegistry:
        return self._registry

    @property
    def gathering(self) -> GatherLearner:
        """What adaptive gathering learned on this replica (calls/gathering.py)."""
        return self._state.gathering

    def park_cap(self, upstream: str) -> int:
        """How many calls may wait for input on `upstream` at once (calls.parked_share of its pool)."""
        return self._driver.park_cap(upstream)

    async def start(
        self, req: CallRequest, notify: NotificationSink | None = None, *, yield_after: float | None = None
    ) -> Outcome:
        """Run a new call. If its request certainly never reached the upstream (the upstream restarted and
        forgot the pooled session, or refused the connection), it is sent once more on a fresh session.

        `yield_after` (seconds): a call still running then, and not asking for input, is left `Running` for
        its caller to `drive` on in the background (a task, proxy/tasks)."""
        outcome = await self._start_once(req, notify, yield_after)
        if isinstance(outcome, Failed) and outcome.undelivered:
            log.info("call.resent_undelivered", upstream=req.upstream, reason=outcome.error.message)
            self._pools[
                req.upstream
            ].suspect_idle()  # else it would go on another session of the gone process
            outcome = await self._start_once(req, notify, yield_after)
        return outcome

    async def _start_once(
        self, req: CallRequest, notify: NotificationSink | None, yield_after: float | None = None
    ) -> Outcome:
        pool = self._pools[req.upstream]
        try:
            self._registry.admit(req.principal, req.address)
            session = await pool.acquire(req.key)
        except LimitExceeded as exc:
            return Failed(too_many_calls(exc), refused=True)
        except PoolExhausted as exc:
            self._registry.refused("pool_full")
            return Failed(too_many_calls(exc), refused=True)
        except UpstreamError as exc:
            return Failed(
                unavailable(req.upstream, exc),
                challenge=exc if isinstance(exc, UpstreamAuthChallenge) else None,
            )
        if (gone := await self._held_from_gone_process(req, session)) is not None:
            pool.release(req.key, session, reusable=False)
            return Failed(unavailable(req.upstream, gone), undelivered=True)  # sent again on a new session
        call = LiveCall(
            id=call_id(),
            upstream=req.upstream,
            method=req.method,
            principal=req.principal,
            target_source=functools.partial(target_digest, req.method, req.params),
            key=req.key,
            session=session,
            exchange=Exchange(req.key.capabilities),
            inbox=LeanQueue(),  # not Inbox(): calling a subscripted generic costs ~1 µs more
            first_span=req.link.span,
            address=req.address,
            tool=tool_of(req.method, req.params),
        )
        try:
            self._registry.add(call)
        except LimitExceeded as exc:
            pool.release(req.key, session, reusable=True)
            return Failed(too_many_calls(exc), refused=True)
        req.link.joined(call.id, 1, call.first_span)
        call.unsent = (req.method, with_progress_token(req.params, call_progress_token(call.id)))
        roots = self._driver.session_roots(call)
        try:
            await self._levels.ensure(session, req.log_level)
            if roots is not None:
                await roots.settle()  # a new session: its server's start-up roots/list comes first
        except BaseException:  # the client went away before the call was sent: end it, tell nobody
            await asyncio.shield(self._driver.abandon(call, "the client went away"))
            raise
        if ask_first(call, roots):
            return await self._driver.park(call)  # sent by the retry that answers (roots.deliver_input)
        method, params = call.unsent
        try:
            call.upstream_id = await session.call(method, params, call.inbox)
        except BaseException:  # the client went away while it was sent: else registered and busy for good
            await asyncio.shield(
                self._driver.abandon(call, "the client went away")
            )  # (unsent: no cancel upstream)
            raise
        call.unsent = None
        sink = scoped_sink(notify, req.params, req.log_level, call.id)
        return await self._driver.drive(call, sink, yield_after=yield_after)

    async def _held_from_gone_process(
        self, req: CallRequest, session: UpstreamSession
    ) -> NotDelivered | None:
        """A session that holds server requests (a start-up roots/list) for its next call is asked a ping
        first: its server may have restarted while it sat idle, and a request from a process that is gone
        must never reach a client. NotDelivered: the session is gone (held requests and all)."""
        roots = self._roots.of(session) if self._roots is not None and req.key.capabilities.roots else None
        if roots is None or not roots.holding:
            return None
        try:
            await session.request(mcp.PING, {}, HELD_CHECK_S)
        except NotDelivered as exc:
            log.info("call.held_requests_dropped", upstream=req.upstream, reason=str(exc))
            return exc
        except UpstreamError:
            pass  # alive but odd (a server that answers no ping): the call finds out
        return None

    async def resume(
        self,
        req: CallRequest,
        request_state: str,
        responses: Mapping[str, Any],
        notify: NotificationSink | None = None,
        *,
        local_only: bool = False,
        owner_gone: OwnerGone | None = None,
        yield_after: float | None = None,
    ) -> Outcome:
        """Continue the parked call `request_state` names. Raises InvalidRequestState for a bad handle.

        A call parked on another replica gives `Forward(owner)`, unless `local_only` (the retry was forwarded
        here). A call unknown here is taken over (or reported lost) only when this replica is its owner (it
        restarted) or itself found the owner gone (`owner_gone`): never because a caller said so, so one
        handle sent at once to its owner and to another replica's peer route is driven by one only.
        `yield_after` as for `start`."""
        try:
            claims = self._codec.open(request_state)
            self._codec.verify(
                claims,
                upstream=req.upstream,
                principal=req.principal,
                target=target_digest(req.method, req.params),
            )
        except HandleError as exc:
            raise InvalidRequestState(exc.reason) from None
        req.link.joined(claims.call, claims.round + 1, claims.trace)
        call = self._registry.get(claims.call)
        if call is None:
            if self._registry.cancelled_by_operator(claims.call):
                return Failed(cancelled_by_operator())
            if self._registry.ended(claims.call) or (
                claims.owner == self._settings.owner
                and claims.issued_at >= self._state.started
                and not self._state.stopping
            ):
                raise InvalidRequestState("call_ended")
            if claims.owner != self._settings.owner:
                if owner_gone is None and not local_only:
                    return Forward(claims.owner)
                if owner_gone is None:  # forwarded here, but the handle names another owner
                    raise InvalidRequestState("not_owner")
            return await self._takeover.take_over(
                req, claims, responses, notify, yield_after=yield_after, owner_gone=owner_gone
            )
        self._driver.check_current(call, claims)
        problem = invalid_responses(call.exchange, responses)
        if problem is not None:
            return Failed(problem)
        parked_for = self._registry.parked_for(call)
        try:
            self._registry.take(call)
        except CallBusy:
            raise InvalidRequestState("round_in_progress") from None
        self._observer.resumed(call.upstream, parked_for)
        try:
            await self._levels.ensure(call.session, req.log_level)
            failed = await self._driver.deliver(call, responses)
        except BaseException:  # the client went away mid-delivery: the call is no longer parked, end it
            await asyncio.shield(self._driver.abandon(call, "the client went away"))
            raise
        if failed is not None:
            return failed
        sink = scoped_sink(notify, req.params, req.log_level, call.id)
        return await self._driver.drive(call, sink, yield_after=yield_after)

    # -- driving a call detached from the request that started it (tasks, proxy/tasks) -------------------

    async def drive(
        self, call: LiveCall, notify: NotificationSink | None = None, *, park_ttl: float | None = None
    ) -> Outcome:
        """Drive on a call left `Running`, or a parked one whose every pending request `answer` delivered,
        until it completes, fails, or asks for input (then parked for `park_ttl` seconds, default
        `calls.parked_ttl_s`). Never `Running` or `Forward`."""
        if call.parked:
            self._registry.take(call)
        return await self._driver.drive(call, notify, park_ttl=park_ttl)

    async def answer(self, call: LiveCall, responses: Mapping[str, Any]) -> Failed | None:
        """Deliver the client's answers to some or all of a parked call's pending requests; the call stays
        parked (`drive` it once nothing is pending). Keys not pending are ignored. Failed: a malformed answer
        (nothing was delivered, the call is untouched), or an upstream that could not take it (the call was
        abandoned). Delivery is shielded: once it starts, the client going away does not cut it short."""
        problem = invalid_responses(call.exchange, responses)
        if problem is not None:
            return Failed(problem)
        return await asyncio.shield(self._driver.deliver(call, responses))

    async def cancel(self, call: LiveCall, reason: str) -> None:
        """End a call for its client: pending requests answered, the upstream told, the session dropped."""
        await self._driver.abandon(call, reason)

    async def end_parked(self, request_state: str, *, principal: str, reason: str) -> bool:
        """End the parked call `request_state` names for its own client, who will not retry it (a legacy
        client's cancel or timeout through the mirror, front/legacy/mirror/calls.py): its pending requests
        answered, the upstream told, the session dropped, at once rather than at its parking deadline.
        False: no such call parked here for this principal (nothing is done)."""
        try:
            claims = self._codec.open(request_state)
        except HandleError:
            return False
        call = self._registry.get(claims.call)
        if call is None or not call.parked or claims.principal != principal:
            return False
        await self._driver.abandon(call, reason)
        return True

    # -- ending calls for the process (drain.py) ----------------------------------------------------------

    async def reap_expired(self) -> int:
        """Cancel parked calls whose client never came back; the upstream is told. Returns how many."""
        return await self._drain.reap_expired()

    async def cancel_parked(self, call_id: str) -> LiveCall:
        """An operator cancels a parked call (proxy/process/admin.py); NotCancellable when it cannot be."""
        return await self._drain.cancel_parked(call_id)

    async def drain(self, grace: float) -> None:
        """Shutting down: live calls get `grace` seconds, then are left for a takeover or cancelled."""
        await self._drain.drain(grace)

    async def close(self) -> None:
        await self._drain.close()

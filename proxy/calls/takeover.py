"""Taking over a call whose replica is gone (`CallService.resume` with a handle another replica sealed).

If the upstream can resume the call's stream, the new owner attaches to its legacy session, resumes the
stream from the handle's last event id, delivers the client's input and drives on. Otherwise the call is
reported lost — and never re-run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from proxy.calls.driver import CallDriver, EngineState, log
from proxy.calls.gathering import tool_of
from proxy.calls.outcomes import (
    CallRequest,
    Failed,
    InvalidRequestState,
    NotificationSink,
    Outcome,
    OwnerGone,
    invalid_responses,
    lost,
    outcome_unknown,
    too_many_calls,
)
from proxy.calls.registry import LimitExceeded, LiveCall
from proxy.calls.scope import scoped_sink
from proxy.calls.wording import failed_during_call
from proxy.handle import Claims
from proxy.translate.exchange import Exchange
from proxy.upstream.base import UpstreamError
from proxy.upstream.inbox import LeanQueue
from proxy.upstream.pool import PoolExhausted


class Takeover:
    """Takes over calls another replica held (for `CallService.resume`); drives them with `driver`."""

    def __init__(self, state: EngineState, driver: CallDriver) -> None:
        self._state = state
        self._driver = driver

    async def take_over(
        self,
        req: CallRequest,
        claims: Claims,
        responses: Mapping[str, Any],
        notify: NotificationSink | None,
        *,
        yield_after: float | None = None,
        owner_gone: OwnerGone | None = None,
    ) -> Outcome:
        """The replica that held the call is gone. If the upstream can resume the call's stream, attach to
        its legacy session, resume the stream from the handle's last event id, deliver the input, and drive
        on as the new owner (an input the old owner delivered already is answered twice: the upstream
        ignores a response to a request it has its answer to). Otherwise the call is lost — and never
        re-run; if the old owner took this very input before it went away, its outcome is unknown."""
        pool = self._state.pools[req.upstream]
        if claims.last_event is None or claims.request is None or not claims.session or not pool.can_adopt:
            self._state.observer.taken_over(req.upstream, ok=False)
            if owner_gone == "unknown":
                return Failed(outcome_unknown("the upstream cannot resume the call's stream"))
            return Failed(lost("its replica is gone and the upstream cannot resume the call's stream"))
        if claims.hashed:  # the upstream's ids are not in the handle, only their digests (handle/claims.py)
            self._state.observer.taken_over(req.upstream, ok=False)
            why = "the upstream's request ids are too long to carry in the handle"
            if owner_gone == "unknown":
                return Failed(outcome_unknown(why))
            return Failed(lost(f"its replica is gone and {why}"))
        try:
            exchange = Exchange.resumed(req.key.capabilities, claims.round, claims.pending)
        except ValueError:
            raise InvalidRequestState("bad_pending_keys") from None
        problem = invalid_responses(exchange, responses)
        if problem is not None:
            return Failed(problem)
        try:
            self._state.registry.admit(req.principal, req.address)
            session = await pool.adopt(req.key, claims.session)
        except (LimitExceeded, PoolExhausted) as exc:
            return Failed(too_many_calls(exc))
        except UpstreamError as exc:
            self._state.observer.taken_over(req.upstream, ok=False)
            return Failed(lost(f"taking it over failed: {failed_during_call(str(exc))}"))
        call = LiveCall(
            id=claims.call,
            upstream=req.upstream,
            method=req.method,
            principal=req.principal,
            target_source=claims.target,
            key=req.key,
            session=session,
            exchange=exchange,
            inbox=LeanQueue(),  # not Inbox(): calling a subscripted generic costs ~1 µs more
            upstream_id=claims.request,
            first_span=claims.trace,
            address=req.address,
            tool=tool_of(req.method, req.params),
        )
        try:
            self._state.registry.add(call)
        except LimitExceeded as exc:  # admitted, then others took the last places while it was adopting
            pool.forget(req.key, session)  # left as it was upstream: a later retry may still take it over
            await asyncio.shield(session.detach())
            return Failed(too_many_calls(exc))
        log.info(
            "call.taken_over",
            call=call.id,
            upstream=call.upstream,
            round=claims.round,
            previous_owner=claims.owner,
        )
        try:
            await session.resume_call(call.inbox, claims.request, claims.last_event)
            for reply in exchange.accept(responses):
                await session.send(reply.message())
        except UpstreamError as exc:
            await self._driver.abandon(call, "could not take the call over")
            self._state.observer.taken_over(req.upstream, ok=False)
            return Failed(lost(f"taking it over failed: {failed_during_call(str(exc))}"))
        except BaseException:
            await asyncio.shield(self._driver.abandon(call, "the client went away"))
            raise
        self._state.observer.taken_over(req.upstream, ok=True)
        sink = scoped_sink(notify, req.params, req.log_level, call.id)
        return await self._driver.drive(call, sink, yield_after=yield_after)

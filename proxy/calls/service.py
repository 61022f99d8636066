"""Runs `tools/call`, `prompts/get` and `resources/read` on a legacy upstream as MRTR rounds.

`start` sends the call upstream on a session of its own and drives it until it completes or the upstream
asks for input; then the live call is parked and the client gets `input_required` with a sealed handle.
`resume` unseals the handle, checks it against the retry, answers the parked legacy requests and drives on.
A call is never re-sent upstream: it resumes, or it fails with a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from proxy.calls.registry import CallBusy, CallRegistry, LimitExceeded, LiveCall
from proxy.handle import Claims, HandleCodec, HandleError, target_digest
from proxy.pool import PoolExhausted, PoolKey, SessionPool
from proxy.translate.exchange import Exchange
from proxy.translate.validate import invalid_input_response
from proxy.upstream.base import TransportLost, UpstreamError
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject

log = structlog.get_logger(__name__)

NotificationSink = Callable[[jsonrpc.Notification], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Completed:
    response: jsonrpc.Response  # the upstream's own answer (result or JSON-RPC error)


@dataclass(frozen=True, slots=True)
class NeedsInput:
    input_requests: Mapping[str, Mapping[str, Any]]
    request_state: str
    round: int
    call: str = ""  # the id of the parked call


@dataclass(frozen=True, slots=True)
class Failed:
    error: ErrorObject
    undelivered: bool = False  # the upstream certainly never got the call: starting it again is safe


@dataclass(frozen=True, slots=True)
class Forward:
    """The call is parked on another replica: send the retry there, unchanged."""

    owner: str


@dataclass(frozen=True, slots=True)
class Running:
    """Still running when `yield_after` ran out (and not asking for input): the call stays live and
    registered, its upstream messages wait in its inbox, and nobody drives it until `CallService.drive`."""

    call: LiveCall


Outcome = Completed | NeedsInput | Failed | Forward | Running


class CallObserver(Protocol):
    """What the service reports beyond each request's own outcome (for metrics). Must be cheap."""

    def resumed(self, upstream: str, parked_for: float) -> None: ...
    def reaped(self, upstream: str, parked_for: float) -> None: ...
    def taken_over(self, upstream: str, *, ok: bool) -> None: ...


class NoObserver:
    def resumed(self, upstream: str, parked_for: float) -> None:
        pass

    def reaped(self, upstream: str, parked_for: float) -> None:
        pass

    def taken_over(self, upstream: str, *, ok: bool) -> None:
        pass


class InvalidRequestState(Exception):
    """The retry's requestState must be refused. `reason` is for the log only, never the wire."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CallSettings:
    gather_window: float
    parked_ttl: float
    call_timeout: float
    owner: str


@dataclass(slots=True)
class CallLink:
    """Joins the rounds of one call, which are separate client requests, in the logs and traces. The front
    may set `span` (this request's trace span, opaque here); the service fills in the rest as soon as it
    knows which call the request is for, whatever the outcome."""

    span: str | None = None
    call: str | None = None  # the call's id (stable across rounds and replicas)
    round: int | None = None  # this request's place in the call: 1 starts it, N + 1 answers round N
    first_span: str | None = None  # `span` of the call's first round (sealed in its handles)

    def joined(self, call: str, round: int, first_span: str | None) -> None:
        self.call, self.round, self.first_span = call, round, first_span


@dataclass(frozen=True, slots=True)
class CallRequest:
    """One MRTR-capable client request, as the front parsed it."""

    upstream: str
    method: str
    params: Mapping[str, Any]  # as the client sent them, less inputResponses/requestState/modern _meta
    key: PoolKey
    principal: str
    link: CallLink = field(default_factory=CallLink, compare=False)  # filled in by the service


class CallService:
    def __init__(
        self,
        pools: Mapping[str, SessionPool],
        codec: HandleCodec,
        registry: CallRegistry,
        settings: CallSettings,
        clock: Callable[[], float] = time.time,
        *,
        observer: CallObserver | None = None,
    ) -> None:
        self._pools = pools
        self._codec = codec
        self._registry = registry
        self._settings = settings
        self._clock = clock
        self._observer = observer or NoObserver()

    @property
    def registry(self) -> CallRegistry:
        return self._registry

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
            outcome = await self._start_once(req, notify, yield_after)
        return outcome

    async def _start_once(
        self, req: CallRequest, notify: NotificationSink | None, yield_after: float | None = None
    ) -> Outcome:
        pool = self._pools[req.upstream]
        try:
            self._registry.admit(req.principal)
            session = await pool.acquire(req.key)
        except (LimitExceeded, PoolExhausted) as exc:
            return Failed(ErrorObject(jsonrpc.LIMIT_EXCEEDED, f"Too many calls: {exc}"))
        except UpstreamError as exc:
            return Failed(
                ErrorObject(jsonrpc.UPSTREAM_FAILED, f"Upstream {req.upstream!r} unavailable: {exc}")
            )
        call = LiveCall(
            id=secrets.token_urlsafe(12),
            upstream=req.upstream,
            method=req.method,
            principal=req.principal,
            target=target_digest(req.method, req.params),
            key=req.key,
            session=session,
            exchange=Exchange(req.key.capabilities),
            inbox=asyncio.Queue(),
            first_span=req.link.span,
        )
        try:
            self._registry.add(call)
        except LimitExceeded as exc:
            pool.release(req.key, session, reusable=True)
            return Failed(ErrorObject(jsonrpc.LIMIT_EXCEEDED, f"Too many calls: {exc}"))
        req.link.joined(call.id, 1, call.first_span)
        call.upstream_id = await session.call(req.method, req.params, call.inbox)
        return await self._drive(call, notify, yield_after=yield_after)

    async def resume(
        self,
        req: CallRequest,
        request_state: str,
        responses: Mapping[str, Any],
        notify: NotificationSink | None = None,
        *,
        local_only: bool = False,
        yield_after: float | None = None,
    ) -> Outcome:
        """Continue the parked call `request_state` names. Raises InvalidRequestState for a bad handle.

        A call parked on another replica gives `Forward(owner)`, unless `local_only` (the retry was forwarded
        here, or its owner is unreachable): then a call unknown here is taken over, or reported lost.
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
            if self._registry.ended(claims.call):
                raise InvalidRequestState("call_ended")
            if claims.owner != self._settings.owner and not local_only:
                return Forward(claims.owner)
            return await self._take_over(req, claims, responses, notify, yield_after)
        self._check_current(call, claims)
        problem = _invalid_responses(call.exchange, responses)
        if problem is not None:
            return Failed(problem)
        parked_for = self._registry.parked_for(call)
        try:
            self._registry.take(call)
        except CallBusy:
            raise InvalidRequestState("round_in_progress") from None
        self._observer.resumed(call.upstream, parked_for)
        try:
            failed = await self._deliver(call, responses)
        except BaseException:  # the client went away mid-delivery: the call is no longer parked, end it
            await asyncio.shield(self._abandon(call, "the client went away"))
            raise
        if failed is not None:
            return failed
        return await self._drive(call, notify, yield_after=yield_after)

    async def _take_over(
        self,
        req: CallRequest,
        claims: Claims,
        responses: Mapping[str, Any],
        notify: NotificationSink | None,
        yield_after: float | None = None,
    ) -> Outcome:
        """The replica that held the call is gone. If the upstream can resume the call's stream, attach to
        its legacy session, resume the stream from the handle's last event id, deliver the input, and drive
        on as the new owner. Otherwise the call is lost — and never re-run."""
        pool = self._pools[req.upstream]
        if claims.last_event is None or claims.request is None or not claims.session or not pool.can_adopt:
            self._observer.taken_over(req.upstream, ok=False)
            return Failed(_lost("its replica is gone and the upstream cannot resume the call's stream"))
        try:
            exchange = Exchange.resumed(req.key.capabilities, claims.round, claims.pending)
        except ValueError:
            raise InvalidRequestState("bad_pending_keys") from None
        problem = _invalid_responses(exchange, responses)
        if problem is not None:
            return Failed(problem)
        try:
            self._registry.admit(req.principal)
            session = await pool.adopt(req.key, claims.session)
        except (LimitExceeded, PoolExhausted) as exc:
            return Failed(ErrorObject(jsonrpc.LIMIT_EXCEEDED, f"Too many calls: {exc}"))
        except UpstreamError as exc:
            self._observer.taken_over(req.upstream, ok=False)
            return Failed(_lost(f"taking it over failed: {exc}"))
        call = LiveCall(
            id=claims.call,
            upstream=req.upstream,
            method=req.method,
            principal=req.principal,
            target=claims.target,
            key=req.key,
            session=session,
            exchange=exchange,
            inbox=asyncio.Queue(),
            upstream_id=claims.request,
            first_span=claims.trace,
        )
        self._registry.add(call)
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
            await self._abandon(call, "could not take the call over")
            self._observer.taken_over(req.upstream, ok=False)
            return Failed(_lost(f"taking it over failed: {exc}"))
        except BaseException:
            await asyncio.shield(self._abandon(call, "the client went away"))
            raise
        self._observer.taken_over(req.upstream, ok=True)
        return await self._drive(call, notify, yield_after=yield_after)

    # -- driving a call detached from the request that started it (tasks, proxy/tasks) -------------------

    async def drive(
        self, call: LiveCall, notify: NotificationSink | None = None, *, park_ttl: float | None = None
    ) -> Outcome:
        """Drive on a call left `Running`, or a parked one whose every pending request `answer` delivered,
        until it completes, fails, or asks for input (then parked for `park_ttl` seconds, default
        `calls.parked_ttl_s`). Never `Running` or `Forward`."""
        if call.parked:
            self._registry.take(call)
        return await self._drive(call, notify, park_ttl=park_ttl)

    async def answer(self, call: LiveCall, responses: Mapping[str, Any]) -> Failed | None:
        """Deliver the client's answers to some or all of a parked call's pending requests; the call stays
        parked (`drive` it once nothing is pending). Keys not pending are ignored. Failed: a malformed answer
        (nothing was delivered, the call is untouched), or an upstream that could not take it (the call was
        abandoned). Delivery is shielded: once it starts, the client going away does not cut it short."""
        problem = _invalid_responses(call.exchange, responses)
        if problem is not None:
            return Failed(problem)
        return await asyncio.shield(self._deliver(call, responses))

    async def _deliver(self, call: LiveCall, responses: Mapping[str, Any]) -> Failed | None:
        try:
            for reply in call.exchange.accept(responses):
                await call.session.send(reply.message())
        except UpstreamError as exc:
            await self._abandon(call, "could not deliver the client's input")
            return Failed(_upstream_failed(f"could not deliver the input: {exc}"))
        return None

    async def cancel(self, call: LiveCall, reason: str) -> None:
        """End a call for its client: pending requests answered, the upstream told, the session dropped."""
        await self._abandon(call, reason)

    async def reap_expired(self) -> int:
        """Cancel parked calls whose client never came back; the upstream is told."""
        expired = self._registry.expired()
        for call in expired:
            log.info("call.reaped", call=call.id, upstream=call.upstream, round=call.exchange.round)
            self._observer.reaped(call.upstream, self._registry.parked_for(call))
            await self._abandon(call, "the client did not answer in time")
        return len(expired)

    async def drain(self, grace: float) -> None:
        """Shutting down: give live calls `grace` seconds to finish (their retries are still served), then
        leave the parked ones another replica can take over (resumable upstream stream) and cancel the rest
        upstream. The client always gets an answer: a completed call, a takeover, or "lost, not re-run"."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while len(self._registry) and loop.time() < deadline:  # noqa: ASYNC110 - calls end in many places
            await asyncio.sleep(0.1)
        for call in self._registry:
            pool = self._pools[call.upstream]
            # A task's call cannot be taken over (its task lives here only): it is cancelled like the rest.
            if (
                call.parked
                and call.task is None
                and call.session.last_event_id is not None
                and pool.can_adopt
            ):
                self._registry.remove(call)
                call.session.end_call()
                pool.forget(call.key, call.session)
                await call.session.detach()
                log.info("call.left_for_takeover", call=call.id, upstream=call.upstream)
            else:
                await self._abandon(call, "the proxy is shutting down")

    async def close(self) -> None:
        for call in self._registry:
            await self._abandon(call, "the proxy is shutting down")

    # -- internals ----------------------------------------------------------------------------------------

    def _check_current(self, call: LiveCall, claims: Claims) -> None:
        pending_ids = {k: p.legacy_id for k, p in call.exchange.pending.items()}
        if claims.round != call.exchange.round or dict(claims.pending) != pending_ids:
            raise InvalidRequestState("stale_round")
        if claims.session != (call.session.session_id or "") or claims.principal != call.principal:
            raise InvalidRequestState("call_mismatch")

    async def _drive(
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
        # it, at most `gather_window`, and no longer than a tenth of it after the latest one (a lone
        # elicitation is answered after a few ms; three sent at once still make one round).
        gather = self._settings.gather_window
        window_deadline: float | None = None
        window_end = 0.0
        try:
            while True:
                if call.exchange.has_pending and window_deadline is None:
                    window_end = loop.time() + gather
                    window_deadline = min(window_end, loop.time() + gather / 10)
                # Which deadline is armed decides what its expiry means (not loop.time(): uvloop's timers may
                # fire a little before the deadline they were set for).
                deadline, on_expiry = round_deadline, "timeout"
                if window_deadline is not None and window_deadline <= deadline:
                    deadline, on_expiry = window_deadline, "park"
                elif yield_at is not None and window_deadline is None and yield_at <= deadline:
                    deadline, on_expiry = yield_at, "yield"  # input being gathered: no yielding
                try:
                    async with asyncio.timeout_at(deadline):
                        item = await call.inbox.get()
                except TimeoutError:
                    if on_expiry == "park":
                        return self._park(call, park_ttl)
                    if on_expiry == "yield":
                        return Running(call)
                    await self._abandon(call, "the upstream did not answer in time")
                    return Failed(
                        ErrorObject(
                            jsonrpc.UPSTREAM_TIMEOUT,
                            f"Upstream did not answer within {self._settings.call_timeout:g}s; "
                            "the call was cancelled upstream",
                        )
                    )
                match item:
                    case jsonrpc.Result() | jsonrpc.Error():
                        self._finish(call, reusable=True)
                        return Completed(item)
                    case jsonrpc.Request():
                        reply = call.exchange.on_server_request(item)
                        if reply is not None:
                            await call.session.send(reply.message())
                        elif window_deadline is not None:  # one more arrived: the window stays open
                            window_deadline = min(window_end, loop.time() + gather / 10)
                    case jsonrpc.Notification():
                        if notify is not None:
                            await notify(item)
                    case TransportLost(reason=reason, delivered=delivered):
                        self._finish(call, reusable=False)
                        return Failed(_upstream_failed(reason), undelivered=not delivered)
        except UpstreamError as exc:
            await self._abandon(call, str(exc))
            return Failed(_upstream_failed(str(exc)))
        except BaseException:
            await asyncio.shield(self._abandon(call, "the client went away"))
            raise

    def _park(self, call: LiveCall, ttl: float | None = None) -> NeedsInput:
        ttl = self._settings.parked_ttl if ttl is None else ttl
        rnd = call.exchange.open_round()
        now = int(self._clock())
        claims = Claims(
            upstream=call.upstream,
            session=call.session.session_id or "",
            call=call.id,
            round=rnd.round,
            pending=rnd.pending_ids,
            owner=self._settings.owner,
            principal=call.principal,
            target=call.target,
            issued_at=now,
            expires_at=now + int(ttl),
            last_event=call.session.last_event_id,
            request=call.upstream_id,
            trace=call.first_span,
        )
        self._registry.park(call, ttl)
        return NeedsInput(rnd.input_requests, self._codec.seal(claims), rnd.round, call.id)

    def _finish(self, call: LiveCall, *, reusable: bool) -> None:
        call.session.end_call()
        self._registry.remove(call, handle_ttl=self._settings.parked_ttl)
        self._pools[call.upstream].release(call.key, call.session, reusable=reusable)

    async def _abandon(self, call: LiveCall, reason: str) -> None:
        """Give up on a call: answer its pending requests, tell the upstream, drop the session."""
        if self._registry.get(call.id) is None:
            return
        self._registry.remove(call, handle_ttl=self._settings.parked_ttl)
        with contextlib.suppress(UpstreamError, TimeoutError):
            async with asyncio.timeout(5):
                for reply in call.exchange.cancel_all(f"Cancelled by mrtr-proxy: {reason}"):
                    await call.session.send(reply.message())
                await call.session.send(
                    jsonrpc.Notification(mcp.CANCELLED, {"requestId": call.upstream_id, "reason": reason})
                )
        call.session.end_call()
        self._pools[call.upstream].release(call.key, call.session, reusable=False)


def _upstream_failed(reason: str) -> ErrorObject:
    return ErrorObject(
        jsonrpc.UPSTREAM_FAILED, f"Upstream failed during the call ({reason}); it was not re-run"
    )


def _lost(why: str = "it expired, or the proxy that held it restarted") -> ErrorObject:
    return ErrorObject(
        jsonrpc.CALL_LOST,
        f"The parked call is gone ({why}); it was not re-run. "
        "Send the request again without requestState to start over.",
    )


def _invalid_responses(exchange: Exchange, responses: Mapping[str, Any]) -> ErrorObject | None:
    for key, pending in exchange.pending.items():
        if key in responses and (problem := invalid_input_response(pending.method, responses[key])):
            return ErrorObject(jsonrpc.INVALID_PARAMS, f"inputResponses[{key!r}] {problem}")
    return None

"""The mirror's calls (front/legacy/mirror/front.py): one legacy client's `tools/call`, `prompts/get` or
`resources/read` driven against a 2026-07-28 upstream, round after round, on the client's POST stream.

Each round is one stateless POST upstream (upstream/modern.py); its progress and log notifications go to
the client's stream as they come (the client's own `progressToken` travels upstream, so they carry it
already). When the upstream answers `input_required`, its `inputRequests` become inline requests on the
same stream (translate/mirror.py decides which, and what the proxy answers itself); their ids are sealed
ask ids (handle/mirror_ids.py) naming this replica, so an answer that lands on another replica is forwarded
here. When every inline request is answered, the call is retried upstream with `inputResponses` and the
server's `requestState`; the upstream's final result ends the client's stream. That state is held while
the client answers, so one over MAX_STATE_CHARS (what the native relay seals at most) ends the call with
-31001 instead, before anything is asked of the client.

What lives here lives only while the client's POST does: the call's waiting answers. A round whose inline
requests are not all answered within `answer_timeout` (calls.parked_ttl_s) ends the call with a clear error
and no further retry; so does a client that goes away (nothing could deliver the result: there is nothing
to resume) and a client's `notifications/cancelled` for the call (the upstream's stream in flight is closed:
the 2026-07-28 cancellation).
"""

from __future__ import annotations

import asyncio
import contextvars
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from proxy.calls.registry import LimitExceeded
from proxy.calls.wording import cannot_go_on, shut_down, state_too_large, too_many_calls, unanswered
from proxy.front.legacy.bridge.streams import BridgeReply
from proxy.front.legacy.mirror.hangup import hangup
from proxy.handle import HandleCodec
from proxy.handle.mirror_ids import MirrorAsk, MirrorSession, seal_ask
from proxy.handle.relay_state import MAX_STATE_CHARS
from proxy.migration.tally import ASKED_KEY
from proxy.translate.mirror import Ask, input_response, legacy_result, plan_round
from proxy.upstream.modern import Notify
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger("proxy.front.mirror")

MAX_ROUNDS = 64  # an upstream that keeps asking is stopped at some point
Post = Callable[[jsonrpc.Request, Notify], Awaitable[jsonrpc.Response]]
End = Callable[[str, str], Awaitable[None]]  # (the last round's requestState, why): the call will not go on


@dataclass(frozen=True, slots=True)
class MirrorSettings:
    answer_timeout: float = 600.0  # calls.parked_ttl_s: a round's wait for the client's answers
    keepalive: float = 15.0  # front.keepalive_s: SSE comment interval on quiet streams (0: none)
    owner: str = ""  # this replica's peer address (replica address), named in ask ids
    session_ttl: float = 86400.0  # front.mirror_session_ttl_s: a mirror session id's absolute lifetime


class Admission(Protocol):
    """Where a mirrored call counts against the proxy's call limits (calls/registry.py CallRegistry)."""

    def hold(self, principal: str, address: str = "") -> None: ...  # raises LimitExceeded

    def let_go(self, principal: str, address: str = "") -> None: ...


@dataclass(slots=True)
class Place:
    """A mirrored call's one place in the call limits, held by whichever part runs the call now: the mirror
    while it posts straight to the upstream, or — for the legacy way — the proxy's own call over a legacy
    session, which the call service admits and holds itself (then the mirror gives its place back, so the
    client's one call never holds two)."""

    admission: Admission | None
    principal: str
    address: str
    held: bool = False

    def take(self) -> None:  # raises LimitExceeded
        if not self.held and self.admission is not None:
            self.admission.hold(self.principal, self.address)
            self.held = True

    def give(self) -> None:
        if self.held and self.admission is not None:
            self.admission.let_go(self.principal, self.address)
        self.held = False


# The running mirrored call's place (set by MirrorCalls.run): a two-era tool's legacy attempt refused, its
# native run takes the place back (mirror/paths.py).
_PLACE: contextvars.ContextVar[Place | None] = contextvars.ContextVar("mirror_place", default=None)


def take_place(rid: jsonrpc.RequestId) -> jsonrpc.Error | None:
    """The running mirrored call takes its place back; the -31003 answer if the limit is reached."""
    place = _PLACE.get()
    return None if place is None else _taken(place, rid)


def _taken(place: Place, rid: jsonrpc.RequestId) -> jsonrpc.Error | None:
    try:
        place.take()
    except LimitExceeded as exc:
        log.info("mirror.refused", reason=exc.reason)
        return jsonrpc.Error(rid, too_many_calls(exc))
    return None


class Ended(Exception):
    """The call ends with this message to the client (None: with no response, it was cancelled)."""

    def __init__(self, answer: jsonrpc.Response | None) -> None:
        super().__init__("ended")
        self.answer = answer


@dataclass(eq=False, slots=True)
class MirrorCall:
    token: str
    session: str
    client_id: jsonrpc.RequestId
    waiting: dict[str, asyncio.Future[jsonrpc.Response]] = field(default_factory=dict)
    # Done when the client cancels the call or the replica shuts down: every wait of the call ends at once.
    stopped: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    shut_down: bool = False  # the replica is shutting down: the call ends with -31011
    state: str | None = None  # the last round's requestState, while the call waits for its client
    gone: asyncio.Future[None] | None = None  # done when the client's connection is lost (mirror/hangup.py)

    def stop(self) -> None:
        if not self.stopped.done():
            self.stopped.set_result(None)


class MirrorCalls:
    """The calls of this replica's mirrored sessions, while their POSTs last."""

    def __init__(
        self, codec: HandleCodec, settings: MirrorSettings, admission: Admission | None = None
    ) -> None:
        self._codec = codec
        self._settings = settings
        self._admission = admission  # None: mirrored calls are not counted
        self._calls: dict[str, MirrorCall] = {}
        self._by_client: dict[tuple[str, jsonrpc.RequestId], MirrorCall] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def deliver(self, ask: MirrorAsk, answer: jsonrpc.Response) -> bool:
        """The client's answer to inline request `ask`, for its call here. False: no call waits for it."""
        call = self._calls.get(ask.call)
        if call is None or call.session != ask.session:
            return False
        waiter = call.waiting.get(ask.key)
        if waiter is None or waiter.done():
            return False
        waiter.set_result(answer)
        return True

    def shut_down(self) -> int:
        """End every call (the replica stops): each client is told; nothing is retried upstream."""
        for call in self._calls.values():
            call.shut_down = True
            call.stop()
        return len(self._calls)

    def cancel(self, session: str, client_id: object) -> bool:
        """The client's `notifications/cancelled` for its call `client_id`. False: no such call here."""
        if isinstance(client_id, bool) or not isinstance(client_id, str | int):
            return False
        call = self._by_client.get((session, client_id))
        if call is None:
            return False
        call.stop()
        return True

    async def run(
        self,
        reply: BridgeReply,
        session: MirrorSession,
        msg: jsonrpc.Request,
        params: dict[str, Any],
        post: Post,
        *,
        end: End | None = None,
        address: str = "",
        counted: bool = False,
    ) -> jsonrpc.Response | None:
        """The call's final answer to the client (None: cancelled, no answer is due). `end`: told when
        the call stops between rounds (a cancel, a timeout, a client gone), so what the upstream side
        keeps of it goes at once (the proxy's own parked call, for a round the modern front answered).
        The call counts against calls.max_parked and the principal's and `address`'s shares while it
        runs, as a parked call does: beyond them it is refused before anything goes upstream, with the
        same -31003. `counted`: `post` goes the legacy way (the proxy's own call over a legacy session, which
        holds its own place): the limit is checked here, then the place is given to that call (`Place`)."""
        place = Place(self._admission, session.principal, address)
        if (refused := _taken(place, msg.id)) is not None:
            return refused
        if counted:
            place.give()
        entered = _PLACE.set(place)
        call = MirrorCall(secrets.token_urlsafe(12), session.token, msg.id)
        self._calls[call.token] = call
        self._by_client[(session.token, msg.id)] = call
        why = "the client ended the call"
        try:
            with hangup(reply.request) as call.gone:
                return await self._rounds(
                    reply, session=session, call=call, msg=msg, params=params, post=post
                )
        except Ended as ended:
            if ended.answer is not None:
                why = "the call cannot go on: " + (
                    ended.answer.error.message if isinstance(ended.answer, jsonrpc.Error) else "ended"
                )
            return ended.answer
        finally:
            place.give()
            _PLACE.reset(entered)
            del self._calls[call.token]
            if self._by_client.get((session.token, msg.id)) is call:
                del self._by_client[(session.token, msg.id)]
            for waiter in call.waiting.values():
                waiter.cancel()
            if end is not None and call.state is not None:
                try:
                    await asyncio.shield(end(call.state, why))
                except Exception as exc:  # the call is over for the client either way; its upstream's
                    # side (the proxy's own parked call) then goes when its TTL ends: say so
                    log.warning("mirror.end_failed", call=call.token, error=_reason(exc))

    async def _rounds(
        self,
        reply: BridgeReply,
        *,
        session: MirrorSession,
        call: MirrorCall,
        msg: jsonrpc.Request,
        params: dict[str, Any],
        post: Post,
    ) -> jsonrpc.Response:
        base = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        request = jsonrpc.Request(msg.id, msg.method, base)
        for round_no in range(1, MAX_ROUNDS + 1):
            answer = await self._upstream(reply, call, request, post)
            if isinstance(answer, jsonrpc.Error):
                return answer
            result = answer.result
            if result.get("resultType") != mcp.RESULT_INPUT_REQUIRED:
                call.state = None
                return jsonrpc.Result(msg.id, legacy_result(result))
            if round_no == 1:  # the migration report: the upstream asked (front/endpoint.py counts it)
                reply.request[ASKED_KEY] = True
            state = result.get("requestState")
            if isinstance(state, str) and len(state) > MAX_STATE_CHARS:  # held while the client answers:
                raise Ended(_state_too_large(msg.id, len(state)))  # bounded as the relay bounds what it seals
            call.state = state if isinstance(state, str) else None
            plan = plan_round(result.get("inputRequests"), session.capabilities, f"mrtr-{call.token}-")
            if plan.stop is not None:
                raise Ended(_cannot_go_on(msg.id, plan.stop))
            responses: dict[str, Any] = dict(plan.answered or {})
            if plan.asks:
                if not reply.sse:
                    why = "the upstream needs input, and your client does not accept an event stream for it"
                    raise Ended(_cannot_go_on(msg.id, why))
                responses.update(await self._ask(reply, call, plan.asks))
            retry: dict[str, Any] = {**base, "inputResponses": responses}
            if call.state is not None:
                retry["requestState"] = call.state
            request = jsonrpc.Request(msg.id, msg.method, retry)
            log.info("mirror.round", call=call.token, round=round_no, asked=len(plan.asks))
        return _cannot_go_on(msg.id, f"the upstream still asked for input after {MAX_ROUNDS} rounds")

    async def _upstream(
        self, reply: BridgeReply, call: MirrorCall, request: jsonrpc.Request, post: Post
    ) -> jsonrpc.Response:
        """One round upstream, its notifications on the client's stream; a cancel closes it."""

        async def note(item: jsonrpc.Notification) -> None:
            if reply.sse:
                await reply.send(item)

        work = asyncio.ensure_future(post(request, note))
        try:
            await self._wait(reply, call, {work})
        finally:
            if not work.done():
                work.cancel()
                try:
                    await work
                except asyncio.CancelledError:
                    pass  # what work.cancel() asked for (an outer cancel goes on from this `finally`)
                except Exception as exc:  # the round failed as it was being closed: nobody reads it now
                    log.warning("mirror.round_not_closed", call=call.token, error=_reason(exc))
        return work.result()

    async def _ask(self, reply: BridgeReply, call: MirrorCall, asks: tuple[Ask, ...]) -> dict[str, Any]:
        """Ask the client inline; its answers as `inputResponses` values, once every one has come."""
        settings, loop = self._settings, asyncio.get_running_loop()
        expires = int(time.time() + settings.answer_timeout) + 1
        call.waiting = {a.key: loop.create_future() for a in asks}
        for ask in asks:
            rid = seal_ask(self._codec, MirrorAsk(settings.owner, call.token, ask.key, call.session, expires))
            await reply.send(jsonrpc.Request(rid, ask.method, dict(ask.params)))
        deadline = loop.time() + settings.answer_timeout
        pending = set(call.waiting.values())
        await self._wait(reply, call, pending, deadline=deadline)
        if not all(w.done() for w in pending):
            unanswered_methods = sorted(a.method for a in asks if not call.waiting[a.key].done())
            raise Ended(
                jsonrpc.Error(call.client_id, unanswered(unanswered_methods, settings.answer_timeout))
            )
        out: dict[str, Any] = {}
        for ask in asks:
            value = input_response(ask.method, call.waiting[ask.key].result())
            if isinstance(value, str):
                raise Ended(_cannot_go_on(call.client_id, value))
            out[ask.key] = value
        return out

    async def _wait(
        self,
        reply: BridgeReply,
        call: MirrorCall,
        pending: set[asyncio.Future[Any]],
        deadline: float | None = None,
    ) -> None:
        """Until every future in `pending` is done, the deadline passes, or the call is stopped: the
        client cancels it (Ended(None)), the replica shuts down (Ended with -31011), or the client hangs up
        (ConnectionResetError: nothing could deliver the result, so the call ends here and nothing is
        retried). Each of these is a future it waits on, so each is noticed at once; the only timer is the
        keep-alive on the client's stream (front.keepalive_s)."""
        loop = asyncio.get_running_loop()
        interval = self._settings.keepalive if reply.sse else 0.0
        alive_at = loop.time() + interval if interval > 0 else None  # the next keep-alive is due then
        stops = {call.stopped} if call.gone is None else {call.stopped, call.gone}
        while not all(f.done() for f in pending):
            if call.stopped.done() and call.shut_down:
                why = "the call waited for its client or its upstream; it was not retried upstream"
                raise Ended(jsonrpc.Error(call.client_id, shut_down(why)))
            if call.stopped.done():
                log.info("mirror.cancelled", call=call.token)
                raise Ended(None)
            if reply.gone or (call.gone is not None and call.gone.done()):
                log.info("mirror.client_gone", call=call.token)
                raise ConnectionResetError("the client went away")
            now = loop.time()
            if deadline is not None and now >= deadline:
                return
            wakes = [t for t in (deadline, alive_at) if t is not None]
            left = max(0.0, min(wakes) - now) if wakes else None
            await asyncio.wait({*pending, *stops}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            if alive_at is not None and loop.time() >= alive_at:
                await reply.keepalive()  # quiet for front.keepalive_s (a client gone: its write fails)
                alive_at = loop.time() + interval


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _state_too_large(rid: jsonrpc.RequestId, size: int) -> jsonrpc.Error:
    return jsonrpc.Error(rid, state_too_large(size, MAX_STATE_CHARS))


def _cannot_go_on(rid: jsonrpc.RequestId, why: str) -> jsonrpc.Error:
    return jsonrpc.Error(rid, cannot_go_on(why))

"""A receiving call's reply on a Streamable HTTP session, read by its response's callbacks: no task.

The call's POST is written at once on a pooled keep-alive connection (`LeanClient.send`), and every change of
its response (the head, body bytes, the end, an error) reaches `CallReply` from the connection's
`data_received`. An SSE reply's events are decoded and dispatched as they arrive, as a task reading the
stream would: a server request reaches the call's inbox at once, a parked call's stream is read for as long as
it stays open. The response to the call is held until the body has ended, so the connection is back in the
pool before the call's handler wakes (its client's next call reuses it): a server that writes the body's end
after the response (uvicorn's closing chunk) is waited for up to FINISH_WITHIN, by a timer, after which the
answer goes to the call and the rest of the body is finished in the background (keepalive.py). Between the
upstream's answer and the handler there is no task to create, step and end, and no done-callback: ~4 % of a
pass-through call's instructions (bench/RESULTS.md).

Whatever needs waiting goes on in a task, from where the callbacks left it (`ReplyOwner.read_on`, the
coroutine every other reply of the session is read with): a head other than a 200 (its refusal is worded from
the body), a JSON body not all in with its head, and a session owing so many answers that it reads nothing
more until they are sent. Without an idle connection the whole delivery is such a task
(`SessionCore._start_call`), which connects first.

A failure reaches the inbox as the task's would (`Router.delivery_failed`); `close` (the session ends) is
"session closed", as a cancelled task's.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Protocol

import aiohttp

from proxy.upstream.base import Inbox, TransportLost, UpstreamError
from proxy.upstream.bounded import MessageTooLarge
from proxy.upstream.http_errors import ENDED_UNANSWERED, invalid_message
from proxy.upstream.keepalive import FINISH_WITHIN
from proxy.upstream.lean_http import encoding_refused
from proxy.upstream.lean_response import LeanResponse
from proxy.upstream.propagation import forget_propagated
from proxy.upstream.router import Router
from proxy.wire import jsonrpc
from proxy.wire.sse import SSEDecoder, SSEError

SSE = "text/event-stream"


class ReplyOwner(Protocol):
    """What a call reply needs of its session (streamable_http.py)."""

    @property
    def reply_limit(self) -> int:
        """The largest message (max_message_bytes)."""
        ...

    @property
    def backlogged(self) -> bool:
        """The session owes the upstream so many answers that nothing more is read until they are sent."""
        ...

    def reply_events(
        self, decoder: SSEDecoder, chunk: bytes, rid: jsonrpc.RequestId
    ) -> jsonrpc.Response | None:
        """Dispatch the chunk's events; the response to `rid` once seen (not dispatched; nothing after it)."""
        ...

    def dispatch(self, msg: jsonrpc.Message) -> None: ...

    def heard(self) -> None:
        """The server began answering the call (a 200 head): news that the session is gone now fails it."""
        ...

    def connection_failed(self, exc: aiohttp.ClientError) -> UpstreamError:
        """How a failure of the connection is worded (and what it does to the session)."""
        ...

    def read_on(self, reply: CallReply, decoder: SSEDecoder | None) -> None:
        """Read the rest of the reply in a task: from its head (`decoder` None), or on from `decoder`."""
        ...

    def finish_rest(self, response: LeanResponse) -> None:
        """Read the rest of a body in the background, then give its connection back (keepalive.py)."""
        ...

    def reply_ended(self, reply: CallReply) -> None:
        """The reply no longer needs the session: it ended, failed, or went on in a task."""
        ...


class CallReply:
    """The reply to the receiving call `rid`'s POST, `response` (see the module docstring)."""

    __slots__ = ("_answer", "_context", "_decoder", "_owner", "_timer", "inbox", "response", "rid")

    def __init__(
        self, owner: ReplyOwner, rid: jsonrpc.RequestId, response: LeanResponse, inbox: Inbox
    ) -> None:
        self._owner = owner
        self.rid, self.response, self.inbox = rid, response, inbox
        self._decoder: SSEDecoder | None = None  # once the head said SSE
        self._answer: jsonrpc.Response | None = None  # the response, held until the body ended
        self._timer: asyncio.TimerHandle | None = None  # how long that is waited for (FINISH_WITHIN)
        # The request's context, as a task would copy it (its log lines carry the request id), without the
        # headers it propagated: a parked call's reply is read for minutes (propagation.py).
        self._context = contextvars.copy_context()
        self._context.run(forget_propagated)

    def start(self) -> None:
        self.response.watch(self._watch)
        self._watch()  # (nothing is in yet, unless the connection already failed)

    def close(self) -> None:
        """The session ended: the connection is dropped, the call told "session closed" (after its answer,
        if that was in)."""
        answer = self._end()
        self.response.close()
        if answer is not None:
            self._owner.dispatch(answer)
        self.inbox.put_nowait(TransportLost("session closed"))

    # -- internals ----------------------------------------------------------------------------------------

    def _watch(self) -> None:
        self._context.run(self._changed)

    def _changed(self) -> None:
        response = self.response
        if response.head_pending:
            return
        if self._answer is not None:
            self._settle(response)
            return
        try:
            if self._decoder is None:
                self._head(response)
            else:
                self._events(response, self._decoder)
        except jsonrpc.InvalidMessage as exc:
            self._fail(invalid_message(exc))
        except aiohttp.ClientError as exc:
            self._fail(self._owner.connection_failed(exc))
        except Exception as exc:  # UpstreamError, or a bug: the call fails now, not at its timeout
            self._fail(exc)

    def _head(self, response: LeanResponse) -> None:
        if response.status == 0:  # no head came: the connection failed
            raise response.error or UpstreamError("upstream closed the connection before answering")
        if (refusal := encoding_refused(response)) is not None:
            raise refusal
        if response.status != 200:
            self._read_on(None)  # worded from its body (http_errors.refused), or the session is gone
            return
        self._owner.heard()
        if (response.headers.get("content-type") or "").startswith(SSE):
            self._decoder = SSEDecoder(max_event_bytes=self._owner.reply_limit)
            self._events(response, self._decoder)
        elif response.ended:
            self._json(response)
        else:
            self._read_on(None)

    def _json(self, response: LeanResponse) -> None:
        limit = self._owner.reply_limit
        length = response.content_length
        body = response.take()
        if (length is not None and length > limit) or len(body) > limit:
            raise MessageTooLarge(limit)
        message = jsonrpc.decode(body)
        self._end()
        response.release()
        self._owner.dispatch(message)

    def _events(self, response: LeanResponse, decoder: SSEDecoder) -> None:
        if self._owner.backlogged:
            self._read_on(decoder)  # it waits for the session's answers to go out before reading on
            return
        chunk = response.take()
        if chunk:
            try:
                answer = self._owner.reply_events(decoder, chunk, self.rid)
            except SSEError:
                raise MessageTooLarge(self._owner.reply_limit) from None
            if answer is not None:
                self._answer = answer
                if response.ended:
                    self._settle(response)
                else:  # the end is usually in the next read: the answer waits for it a moment
                    self._timer = response.loop.call_later(FINISH_WITHIN, self._late, context=self._context)
                return
        if response.ended:
            raise UpstreamError(ENDED_UNANSWERED)
        if response.error is not None:
            raise response.error

    def _settle(self, response: LeanResponse) -> None:
        """After the response: what more the body holds is dropped; once it ended (or broke) the connection
        is given back (or closed) and the answer goes to the call."""
        response.take()
        if response.ended or response.error is not None:
            answer = self._end()
            response.release()
            if answer is not None:
                self._owner.dispatch(answer)

    def _late(self) -> None:
        """The body did not end within FINISH_WITHIN of the response: finished in the background."""
        self._timer = None
        answer = self._end()
        self._owner.finish_rest(self.response)
        if answer is not None:
            self._owner.dispatch(answer)

    def _read_on(self, decoder: SSEDecoder | None) -> None:
        self._end()
        self._owner.read_on(self, decoder)

    def _end(self) -> jsonrpc.Response | None:
        """Stop watching the response; the answer held, if any (it is the caller's to dispatch)."""
        self.response.watch(None)
        self._owner.reply_ended(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        answer, self._answer = self._answer, None
        return answer

    def _fail(self, error: BaseException) -> None:
        self._end()
        self.response.close()
        Router.delivery_failed(self.inbox, error)


__all__ = ["CallReply", "ReplyOwner"]

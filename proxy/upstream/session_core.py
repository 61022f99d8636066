"""The skeleton every legacy transport's session shares; each transport adds only its own I/O.

`SessionCore` implements the transport-independent half of `UpstreamSession` (base.py): the small
properties, the request ids, the receiving call and the plain requests (routed by `Router`, router.py, whose
waiters are forgotten in a `finally` and all failed when the transport dies), the routing of what arrives,
the answers a session gives by itself, the session's background tasks and their end. A transport subclasses
it and provides:

- `_deliver(req)`: put one request on the wire (and, where its reply comes back on the same exchange, read
  that reply into `_dispatch`). Raises UpstreamError (NotDelivered when it certainly never arrived). The
  receiving call's is run in a task of its own (`_start_call`), unless the transport reads that reply
  another way (streamable_posts.py: by its response's callbacks, call_reply.py).
- `send(message)`: answer a server request, or send a notification.
- `open()` and `close()`; `resume_call` and `detach` where the transport can do better than refusing.
- `last_event_id` where its streams carry event ids.

When its transport dies, a transport calls `_lose(reason)`: the first loss is the session's death (every
waiter fails, the receiving call gets `TransportLost`); it returns False for any later one.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
from collections.abc import Coroutine, Mapping
from typing import Any

from proxy.upstream.answers import AnswerQueue
from proxy.upstream.base import Inbox, ServerInfo, UpstreamError
from proxy.upstream.router import SESSION_WIDE_NOTIFICATIONS, NoCallAnswer, Router, SessionListener
from proxy.wire import jsonrpc

# The context the session's done-callbacks run in. Without one, asyncio copies the caller's context into each
# callback, and a callback lives as long as its task: a parked call's delivery (minutes), a GET stream (the
# session's life). Those copies kept the request that started the task alive (its structlog context and
# propagated headers) after the task itself had let go of them. Neither callback sets a context variable; the
# one log line among them (a bug's, `Router.call_delivered`) goes without the request's ids.
CALLBACK_CONTEXT = contextvars.Context()


class SessionCore:
    """The shared half of an `UpstreamSession`; see the module docstring for what a transport adds."""

    def __init__(self, no_call: NoCallAnswer, *, first_id: int = 1) -> None:
        self._router = Router(no_call)
        self._ids = itertools.count(first_id)
        self._session_id: str | None = None
        self._info: ServerInfo | None = None
        self._alive = False
        self._lost: str | None = None  # why the session can no longer carry messages, once it cannot
        self._tasks: set[asyncio.Task[None]] = set()
        # Answers the session gives by itself (no call to ask, or a request refused): a few sent at a time;
        # while many are owed, the transport reads nothing more (`_until_answered`). Made at the first
        # answer: most sessions, a parked call's included, never answer anything by themselves.
        self._answers: AnswerQueue | None = None

    # -- properties ---------------------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def info(self) -> ServerInfo:
        if self._info is None:
            raise UpstreamError("session not initialized")
        return self._info

    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def last_event_id(self) -> str | None:
        return None  # no event ids to resume from, unless the transport says otherwise

    # -- what the transport provides ----------------------------------------------------------------------

    async def _deliver(self, req: jsonrpc.Request) -> None:
        raise NotImplementedError

    async def send(self, message: jsonrpc.Response | jsonrpc.Notification) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    # -- UpstreamSession ----------------------------------------------------------------------------------

    async def call(self, method: str, params: Mapping[str, Any], inbox: Inbox) -> jsonrpc.RequestId:
        if self._router.receiver_id is not None:
            raise RuntimeError("a receiving call is already running on this session")
        rid = next(self._ids)
        self._begin_call(rid, inbox)
        self._start_call(jsonrpc.Request(rid, method, params), inbox)
        return rid

    def _start_call(self, req: jsonrpc.Request, inbox: Inbox) -> None:
        """Deliver the receiving call's request, and read its reply, in a task of its own (its failure
        reaches `inbox`); a transport may read the reply without one (streamable_posts.py)."""
        self._delivering(self._deliver(req), inbox)

    def _delivering(self, delivery: Coroutine[Any, Any, None], inbox: Inbox) -> None:
        """Run (the rest of) the receiving call's delivery in a task; its failure reaches `inbox`."""
        # One done-callback, not `_spawn`'s and `Router.call_delivered`'s: each is a loop callback of its own.
        task = asyncio.get_running_loop().create_task(delivery)
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._call_delivered, inbox), context=CALLBACK_CONTEXT)

    def _call_delivered(self, inbox: Inbox, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        Router.call_delivered(inbox, task)

    def end_call(self) -> None:
        self._router.end_call()

    def watch(self, listener: SessionListener | None) -> None:
        self._router.watch(listener)

    def hear(self, heard: SessionListener) -> None:
        self._router.heard = heard

    async def request(self, method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        return await self._exchange(method, params, timeout)

    async def detach(self) -> None:
        """A session that dies with its connection: there is nothing another replica could resume."""
        await self.close()

    # -- for the transports -------------------------------------------------------------------------------

    def _begin_call(self, rid: jsonrpc.RequestId, inbox: Inbox) -> None:
        self._router.begin_call(rid, inbox)

    async def _exchange(self, method: str, params: Mapping[str, Any], timeout: float) -> jsonrpc.Response:
        return await self._router.exchange(
            jsonrpc.Request(next(self._ids), method, params), self._deliver, timeout
        )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard, context=CALLBACK_CONTEXT)
        return task

    async def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _dispatch(self, msg: jsonrpc.Message, *, standalone: bool = False) -> None:
        """Route one upstream message (see `Router.dispatch`). Notifications marked `standalone` are
        session-wide (list changes, resource updates), never part of a call's reply."""
        reply = self._router.dispatch(msg, standalone=standalone)
        if reply is not None:
            if self._answers is None:
                self._answers = AnswerQueue(self.send, self._spawn, lambda: self._session_id)
            self._answers.put(reply)

    def _dispatch_one_stream(self, msg: jsonrpc.Message) -> None:
        """`_dispatch` for a transport with one stream for everything: session-wide notifications are known
        by their method."""
        session_wide = isinstance(msg, jsonrpc.Notification) and msg.method in SESSION_WIDE_NOTIFICATIONS
        self._dispatch(msg, standalone=session_wide)

    @property
    def _backlogged(self) -> bool:
        """Does the session owe the upstream so many answers that its transport should stop reading?"""
        return self._answers is not None and self._answers.backlogged

    async def _until_answered(self) -> None:
        """A transport's reader calls this before reading more: it waits while the session is backlogged."""
        if self._answers is not None and self._answers.backlogged:
            await self._answers.room()

    def _lose(self, reason: str) -> bool:
        """The transport can no longer carry the session's messages: the first time, every waiter fails and
        the receiving call gets TransportLost (True); later, nothing happens (False)."""
        if self._lost is not None:
            return False
        self._lost, self._alive = reason, False
        self._router.fail_all(reason)
        return True


__all__ = ["SessionCore"]

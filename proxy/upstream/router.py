"""What every legacy transport does the same way: route a session's incoming messages, negotiate `initialize`.

`Router` holds one session's routing state: the one receiving call (its inbox and request id) and the waiters
of plain requests. It does no I/O of its own: `dispatch` hands back the answer to send when a server request
arrives with no call in flight, and the transport sends it; `exchange` takes the transport's `Deliver`
function, and `call_delivered` says how the task delivering a receiving call ended. `negotiate` runs the
`initialize` exchange over whatever request function the transport provides.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import structlog

from proxy.upstream.base import (
    HttpRefused,
    Inbox,
    NotDelivered,
    ServerInfo,
    SessionListener,
    TransportLost,
    UpstreamAuthChallenge,
    UpstreamError,
)
from proxy.wire import jsonrpc
from proxy.wire.jsonrpc import ErrorObject

log = structlog.get_logger(__name__)

CLIENT_INFO: Final = {"name": "mrtr-proxy", "version": "0.1.0"}

# Answers a session gives by itself to a server request that arrives with no receiving call (SEP-2260).
# None: the handler took the request elsewhere (a bridged legacy client's GET stream, legacy/bridge/front.py)
# and its answer will reach the upstream through `send`.
NoCallAnswer = Callable[[jsonrpc.Request], jsonrpc.Response | None]
# Sends one request and returns its response (or raises UpstreamError): how `negotiate` reaches the upstream.
Exchange = Callable[[str, Mapping[str, Any], float], Awaitable[jsonrpc.Response]]
# Puts one request on the wire (and, where the reply comes back on the same exchange, reads it into
# `dispatch`). Raises UpstreamError.
Deliver = Callable[[jsonrpc.Request], Awaitable[None]]

# Notifications about the whole session, never part of one call's reply. Transports with a standalone stream
# know them by the stream they arrive on; single-stream transports (stdio) by their method.
SESSION_WIDE_NOTIFICATIONS: Final = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)


# What one session may hold for its call, unread: messages in the call's inbox (a parked call reads none until
# its client's retry). A server request past it is refused at once (an error back upstream). Notifications
# (progress, logging) may fill only half of it, the rest dropped, so a burst of them never costs the call a
# request. The call's own response, and the news of its transport's end, are always taken.
MAX_QUEUED: Final = 256


def refusal(req: jsonrpc.Request, why: str) -> jsonrpc.Error:
    """The answer to a server request the proxy will not hold: -31003 (a limit), naming it."""
    return jsonrpc.Error(req.id, ErrorObject(jsonrpc.LIMIT_EXCEEDED, f"Too many requests: {why}"))


class NoAnswer(UpstreamError):
    """A plain request got no answer within its timeout."""


class Router:
    """Routes one session's messages: responses by id, server requests to the receiving call, and the call's
    own notifications (progress, logging) to it too."""

    def __init__(self, no_call: NoCallAnswer) -> None:
        self._no_call = no_call
        self._waiters: dict[jsonrpc.RequestId, asyncio.Future[jsonrpc.Response]] = {}
        self._receiver: Inbox | None = None
        self._receiver_id: jsonrpc.RequestId | None = None
        self._listener: SessionListener | None = None
        self.heard: SessionListener | None = None  # told every session-wide notification (SessionCore.hear)
        self._flooded = False  # the session's inbox was full once (logged once per session)

    @property
    def receiver_id(self) -> jsonrpc.RequestId | None:
        """The request id of the receiving call, if one is running."""
        return self._receiver_id

    def begin_call(self, rid: jsonrpc.RequestId, inbox: Inbox) -> None:
        """`rid` is now the receiving call: its messages go to `inbox` until `end_call`."""
        if self._receiver is not None:
            raise RuntimeError("a receiving call is already running on this session")
        self._receiver, self._receiver_id = inbox, rid

    def end_call(self) -> None:
        self._receiver = self._receiver_id = None

    def watch(self, listener: SessionListener | None) -> None:
        """Session-wide notifications go to `listener` (a `subscriptions/listen` stream); None drops them."""
        self._listener = listener

    def expect(self, rid: jsonrpc.RequestId) -> asyncio.Future[jsonrpc.Response]:
        """A future for the response to plain request `rid`; `forget(rid)` once done with it."""
        waiter: asyncio.Future[jsonrpc.Response] = asyncio.get_running_loop().create_future()
        self._waiters[rid] = waiter
        return waiter

    def forget(self, rid: jsonrpc.RequestId) -> None:
        waiter = self._waiters.pop(rid, None)
        if waiter is not None and waiter.done() and not waiter.cancelled():
            # Failed by `fail_all` while its request was still being delivered: the caller learnt of the
            # failure from the delivery. Retrieved here, so asyncio never reports it as never retrieved.
            waiter.exception()

    async def exchange(self, req: jsonrpc.Request, deliver: Deliver, timeout: float) -> jsonrpc.Response:
        """Deliver the plain request `req` and wait for its response, all within `timeout`. Raises
        UpstreamError (also when the wait times out, or `fail_all` fails the waiter)."""
        waiter = self.expect(req.id)
        try:
            async with asyncio.timeout(timeout):
                await deliver(req)
                return await waiter
        except TimeoutError:
            raise NoAnswer(f"upstream did not answer {req.method} within {timeout:g}s") from None
        finally:
            self.forget(req.id)

    @staticmethod
    def call_delivered(inbox: Inbox, task: asyncio.Task[None]) -> None:
        """The task delivering the receiving call's request ended: a failure reaches `inbox` as TransportLost.
        A done-callback (with `functools.partial`) rather than a coroutine around the delivery, so that a
        parked call's task holds one frame fewer, and only the delivery's frame the request (until sent)."""
        if task.cancelled():
            inbox.put_nowait(TransportLost("session closed"))
            return
        Router.delivery_failed(inbox, task.exception())

    @staticmethod
    def delivery_failed(inbox: Inbox, exc: BaseException | None) -> None:
        """How the delivery of the receiving call's request ended (None: well), told to its `inbox`: a
        failure as TransportLost (a bug reading the reply too: the call must fail now, not at timeout)."""
        if isinstance(exc, UpstreamAuthChallenge):
            inbox.put_nowait(TransportLost(str(exc), challenge=exc))
        elif isinstance(exc, NotDelivered):
            inbox.put_nowait(TransportLost(str(exc), delivered=False))
        elif (
            isinstance(exc, HttpRefused) and 400 <= exc.status < 500
        ):  # refused before it ran; not sent again
            inbox.put_nowait(TransportLost(str(exc), refused=True))
        elif isinstance(exc, UpstreamError):
            inbox.put_nowait(TransportLost(str(exc)))
        elif exc is not None:  # a bug reading the reply: the call must fail now, not at call_timeout_s
            log.error("upstream.deliver_failed", exc_info=exc)
            inbox.put_nowait(TransportLost(f"reading the upstream's reply failed: {type(exc).__name__}"))

    def dispatch(self, msg: jsonrpc.Message, *, standalone: bool = False) -> jsonrpc.Response | None:
        """Route one upstream message. Notifications marked `standalone` are session-wide (list changes,
        resource updates), never part of a call's reply. Returns the answer to send upstream when a server
        request arrives with no receiving call (the transport sends it), else None."""
        if isinstance(msg, jsonrpc.Result | jsonrpc.Error):
            if msg.id is not None and msg.id == self._receiver_id and self._receiver is not None:
                self._receiver.put_nowait(msg)
                return None
            waiter = self._waiters.get(msg.id) if msg.id is not None else None
            if waiter is not None and not waiter.done():
                waiter.set_result(msg)
            return None
        if isinstance(msg, jsonrpc.Notification):
            if standalone:
                if self.heard is not None:
                    self.heard(msg)
                if self._listener is not None:
                    self._listener(msg)
            elif self._receiver is not None and not self._full(self._receiver, msg, MAX_QUEUED // 2):
                self._receiver.put_nowait(msg)
            return None
        if self._receiver is not None:
            if self._full(self._receiver, msg, MAX_QUEUED):
                return refusal(msg, f"the call already has {MAX_QUEUED} messages waiting in the proxy")
            self._receiver.put_nowait(msg)
            return None
        return self._no_call(msg)

    def _full(self, inbox: Inbox, msg: jsonrpc.Request | jsonrpc.Notification, limit: int) -> bool:
        """Does the call's inbox hold `limit` messages? The first time a session finds it so, it is logged."""
        if inbox.qsize() < limit:
            return False
        if not self._flooded:
            self._flooded = True
            log.warning("upstream.flood_refused", limit=limit, method=msg.method, call=self._receiver_id)
        return True

    def refused_unrun(self, rid: jsonrpc.RequestId, reason: str) -> None:
        """The server refused request `rid` before running it (it forgot the session). When `rid` is the
        receiving call's, its inbox hears that first, before `fail_all` says the session is lost: the call
        is then sent again on a new session rather than failed as one that may have run."""
        if rid == self._receiver_id and self._receiver is not None:
            self._receiver.put_nowait(TransportLost(reason, delivered=False))

    def fail_all(self, reason: str, *, spare_call: bool = False) -> None:
        """Every waiter fails with UpstreamError(reason); the receiving call gets TransportLost(reason),
        unless `spare_call`: the transport knows the call's own request is still out, and its own outcome
        will say what happened (streamable_posts.py `_die`)."""
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(UpstreamError(reason))
        if self._receiver is not None and not spare_call:
            self._receiver.put_nowait(TransportLost(reason))


async def negotiate(
    exchange: Exchange,
    versions: tuple[str, ...],
    capabilities: Mapping[str, Any],
    timeout: float,
    *,
    first_timeout: float | None = None,
) -> ServerInfo:
    """`initialize`, offering each of `versions` (newest first) until the upstream answers with one of them.
    The first offer waits at most `first_timeout` (stdio: timeouts.connect_s, the child's first answer),
    the others `timeout`; an offer left unanswered, a connection refused, or an HTTP 404 or 405 ends the
    negotiation (a silent or absent server, or a URL that is no MCP endpoint, does not fare better with the
    next offer).

    Raises UpstreamError listing what each offer got (HttpRefused when an HTTP status ended it)."""
    problems = []
    for i, version in enumerate(versions):
        params = {"protocolVersion": version, "capabilities": dict(capabilities), "clientInfo": CLIENT_INFO}
        wait = min(timeout, first_timeout) if i == 0 and first_timeout is not None else timeout
        try:
            reply = await exchange("initialize", params, wait)
        except UpstreamAuthChallenge:
            raise  # the credentials, not the version: another offer would only be refused again
        except (NoAnswer, NotDelivered) as exc:  # silent, or not there at all: no other offer fares better
            problems.append(f"{version}: {exc}")
            break
        except HttpRefused as exc:  # 404/405: the URL is wrong, whatever the version; others may be about it
            problems.append(f"{version}: {exc}")
            if exc.not_an_endpoint:
                raise HttpRefused(exc.status, "initialize failed: " + "; ".join(problems)) from None
            continue
        except UpstreamError as exc:
            problems.append(f"{version}: {exc}")
            continue
        if isinstance(reply, jsonrpc.Error):
            problems.append(f"{version}: {reply.error.message}")
            continue
        negotiated = reply.result.get("protocolVersion")
        if negotiated not in versions:
            problems.append(f"{version}: upstream answered with unsupported version {negotiated!r}")
            continue
        return _shared(
            ServerInfo(
                protocol_version=str(negotiated),
                capabilities=_mapping(reply.result.get("capabilities")),
                server_info=_mapping(reply.result.get("serverInfo")),
                instructions=_str_or_none(reply.result.get("instructions")),
            )
        )
    raise UpstreamError("initialize failed: " + "; ".join(problems))


# Equal initialize results, one object: every session of a pool (a parked call's too) holds the same one
# instead of its own ~0.6 KB copy. Weak: an entry goes with the last session that holds it.
_INFOS: weakref.WeakValueDictionary[str, ServerInfo] = weakref.WeakValueDictionary()


def _shared(info: ServerInfo) -> ServerInfo:
    try:
        key = json.dumps(
            [info.protocol_version, info.capabilities, info.server_info, info.instructions], sort_keys=True
        )
    except (TypeError, ValueError):  # not plain JSON after all: keep this session's own
        return info
    return _INFOS.setdefault(key, info)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


__all__ = [
    "CLIENT_INFO",
    "MAX_QUEUED",
    "SESSION_WIDE_NOTIFICATIONS",
    "Deliver",
    "Exchange",
    "NoAnswer",
    "NoCallAnswer",
    "Router",
    "SessionListener",
    "negotiate",
    "refusal",
]

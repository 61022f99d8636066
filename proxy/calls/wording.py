"""What a client is told when a request cannot be served as asked: the one place for the proxy's wording.

Every job (the call service and the tasks, the native relay, the mirror, the legacy bridge and
pass-through, the aggregate) answers a failure of one kind with one function here: its JSON-RPC code and
its words are fixed, so a client (and docs/errors.md, and tests/calls/test_wording.py, which pins each)
reads the same thing whichever way its request went. Each says what happened to the request and whether
sending it again is safe: "unavailable" and "did not run" only when the upstream certainly never ran it.

A client gets a short, stable message: the upstream's configured name and what happened to the request,
never the internal host:port, an exception's class or text, or one line per protocol version tried. The
details go to the log as `upstream.unavailable` / `upstream.call_failed`, under the request's id (the
`X-Request-Id` the client got back), so the operator can find them from what a user reports.
"""

from __future__ import annotations

import re
from typing import Final, Literal

import structlog

from proxy.observe.line import Outcome, RequestLine
from proxy.upstream.base import HttpRefused, NotDelivered
from proxy.wire import jsonrpc
from proxy.wire.jsonrpc import ErrorObject

log = structlog.get_logger("proxy.upstream_errors")

SEE_LOG: Final = "details in the proxy log under this request's X-Request-Id"
# Reasons the proxy itself words (a child's exit, a stream that ended, the session lost): said as they are,
# up to their first ": " (what follows is a library's text). Any other reason is said as CONNECTION_FAILED.
_OWN_WORDING: Final = (
    "upstream process ",
    "the upstream's SSE stream ended",
    "session closed",
    "upstream no longer knows the session",
    "upstream ended the stream",
    "upstream did not answer",
    "upstream did not accept",
    "upstream sent an invalid JSON-RPC message",
    "upstream sent a message larger than",
    "upstream answered with Content-Encoding",  # an answer the lean client refused (lean_http.ENCODED)
    "a stdio upstream runs inside the proxy",
    "a 2024-11-05 HTTP+SSE session cannot be taken over",
)
# What the proxy was doing when it failed: said, then the reason after it as above.
_CONTEXTS: Final = ("could not deliver the input: ",)
_HTTP_STATUS: Final = re.compile(r"upstream answered HTTP \d{3}")
CONNECTION_FAILED: Final = "the connection to it failed"


def public_reason(reason: str) -> str:
    """`reason` as a client may read it (see the module docstring)."""
    for context in _CONTEXTS:
        if reason.startswith(context):
            return context + public_reason(reason.removeprefix(context))
    if (status := _HTTP_STATUS.match(reason)) is not None:
        return status.group(0)  # the status, not the upstream's body
    if reason.startswith(_OWN_WORDING):
        return reason.split(": ", 1)[0]
    return CONNECTION_FAILED


def unavailable_message(upstream: str, detail: BaseException | str) -> str:
    """The message for a request that could not be served because `upstream` could not be reached or could
    not open a session; `detail` goes to the log only."""
    log.warning("upstream.unavailable", upstream=upstream, error=str(detail) or type(detail).__name__)
    return f"Upstream {upstream!r} unavailable ({SEE_LOG})"


def unavailable(upstream: str, detail: BaseException | str) -> ErrorObject:
    """-31001 for a request that never got going upstream (see `unavailable_message`)."""
    return ErrorObject(jsonrpc.UPSTREAM_FAILED, unavailable_message(upstream, detail))


def relayed_failure(upstream: str, exc: BaseException) -> ErrorObject:
    """-31001 for a request sent to a 2026-07-28 upstream (the native relay, the mirror) that failed there.
    `unavailable` only when it certainly never ran: not delivered (no connection, no child) or refused by
    its HTTP status. Anything after the request went out (the connection lost mid-answer, a child that died,
    an answer refused) says what a legacy upstream's call says (`upstream_failed`): it may have run, and the
    proxy did not send it again — a client told "unavailable" could re-run a tool that already ran."""
    if isinstance(exc, NotDelivered | HttpRefused):
        return unavailable(upstream, exc)
    return upstream_failed(str(exc))


def not_run(reason: str) -> ErrorObject:
    """-31001 for a call the upstream refused before it reached the tool (a session it no longer knows, a
    4xx status): unlike `upstream_failed`, the client may safely send it again."""
    return ErrorObject(
        jsonrpc.UPSTREAM_FAILED,
        f"Upstream did not run the call ({failed_during_call(reason)}); it is safe to send it again",
    )


def upstream_failed(reason: str) -> ErrorObject:
    """-31001 for a call that failed upstream once begun (a legacy session's, a relayed request's); library
    text stays in the log (`failed_during_call`)."""
    return ErrorObject(
        jsonrpc.UPSTREAM_FAILED,
        f"Upstream failed during the call ({failed_during_call(reason)}); it was not re-run",
    )


def timed_out(seconds: float, upstream: str | None = None, *, cancelled: bool = False) -> ErrorObject:
    """-31004 for a request its upstream did not answer within `seconds` (calls.call_timeout_s); `cancelled`:
    the proxy told the upstream to stop (a call it ran); `upstream` named where the client may not know it."""
    who = "Upstream" if upstream is None else f"Upstream {upstream!r}"
    tail = "; the call was cancelled upstream" if cancelled else ""
    return ErrorObject(jsonrpc.UPSTREAM_TIMEOUT, f"{who} did not answer within {seconds:g}s{tail}")


def went_silent(seconds: float) -> ErrorObject:
    """-31004 for a legacy session's call that sent nothing for `seconds` (the bridge: progress counts)."""
    return ErrorObject(
        jsonrpc.UPSTREAM_TIMEOUT, f"Upstream silent for {seconds:g}s; the call was cancelled upstream"
    )


def session_busy() -> ErrorObject:
    """-31004 for a call on a bridged legacy session whose previous call kept it past calls.call_timeout_s."""
    return ErrorObject(
        jsonrpc.UPSTREAM_TIMEOUT, "the session's previous call is still running; send it again later"
    )


def credentials_refused(upstream: str, status: int) -> ErrorObject:
    """-31001 for an upstream's 401/403 that can no longer be the client's HTTP answer (its stream began):
    the words of that answer (front/oauth.py), in the stream."""
    return ErrorObject(
        jsonrpc.UPSTREAM_FAILED, f"Upstream {upstream!r} refused the credentials (HTTP {status})"
    )


def no_longer_modern(upstream: str) -> ErrorObject:
    """-31001 for a mirrored request whose upstream turned out not to speak 2026-07-28 once it had begun."""
    return ErrorObject(jsonrpc.UPSTREAM_FAILED, f"Upstream {upstream!r} no longer speaks 2026-07-28")


def cannot_bind(upstream: str, what: str, exc: BaseException) -> ErrorObject:
    """-31001 for a `what` (requestState, task id) the upstream gave that the proxy cannot seal for the
    client (too large: it binds every one to the principal)."""
    return ErrorObject(
        jsonrpc.UPSTREAM_FAILED, f"Upstream {upstream!r} gave a {what} the proxy cannot bind to you ({exc})"
    )


def state_too_large(size: int, limit: int) -> ErrorObject:
    """-31001 for a mirrored call whose upstream asked for input with a requestState too large to hold."""
    return ErrorObject(
        jsonrpc.UPSTREAM_FAILED,
        f"Upstream failed during the call (it asked for input with a requestState of {size} characters; "
        f"the proxy holds at most {limit}); the call was ended and not retried upstream",
    )


def no_route_member(route: str) -> ErrorObject:
    """-31001 for an aggregated route none of whose upstreams answered (each one's reason is logged)."""
    return ErrorObject(
        jsonrpc.UPSTREAM_FAILED, f"No upstream of route {route!r} is reachable (details in the proxy log)"
    )


def cannot_go_on(why: str) -> ErrorObject:
    """-32600 for a mirrored call stopped between rounds by what the client or upstream sent (`why`)."""
    return ErrorObject(jsonrpc.INVALID_REQUEST, f"The call cannot go on: {why}")


def unanswered(methods: list[str], seconds: float) -> ErrorObject:
    """-32600 for a mirrored call whose client left its inline requests unanswered (calls.parked_ttl_s)."""
    return ErrorObject(
        jsonrpc.INVALID_REQUEST,
        f"no answer to {', '.join(methods)} within {seconds:g}s; the call was ended and not retried upstream",
    )


INVALID_STATE_MESSAGE: Final = "Invalid requestState"  # one message for every handle rejection: the reason
# (tampered, expired, another principal's, a round already answered) is in the log only


def invalid_state() -> ErrorObject:
    """-32602 for any requestState the proxy refuses."""
    return ErrorObject(jsonrpc.INVALID_PARAMS, INVALID_STATE_MESSAGE)


def method_not_found(method: str) -> ErrorObject:
    """-32601 for a method nobody here serves (the modern front answers it with HTTP 404: front/reply.py)."""
    return ErrorObject(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")


def too_many_calls(reason: object) -> ErrorObject:
    """-31003 for a limit reached (a share, the pool, the parked share): `reason` names the setting."""
    return ErrorObject(jsonrpc.LIMIT_EXCEEDED, f"Too many calls: {reason}")


def too_many_sessions(reason: object) -> ErrorObject:
    """-31003 for a listen that found its upstream's pool full (a listen holds a session, it is no call)."""
    return ErrorObject(jsonrpc.LIMIT_EXCEEDED, f"Too many sessions: {reason}")


def too_many_requests(per_s: float, wait: float) -> ErrorObject:
    """-31003 for a principal over front.rate_limit_per_s (HTTP 429): when its bucket has a token again."""
    return ErrorObject(
        jsonrpc.LIMIT_EXCEEDED,
        f"Too many requests: at most {per_s:g}/s for this client (front.rate_limit_per_s); "
        f"retry in {wait:.1f}s",
    )


def too_many_connections(limit: int) -> ErrorObject:
    """-31003 for a connection over front.max_connections (HTTP 503, then closed)."""
    return ErrorObject(jsonrpc.LIMIT_EXCEEDED, f"Too many connections: {limit} open (front.max_connections)")


def too_many_inputs(limit: int) -> ErrorObject:
    """-31003 for a call whose upstream asked more than one round can carry (`limit` input requests)."""
    return ErrorObject(
        jsonrpc.LIMIT_EXCEEDED,
        f"Too many input requests: the upstream asked more than {limit} at once, more than one round "
        "carries; the call was cancelled upstream and not re-run",
    )


def outcome_unknown(why: str) -> ErrorObject:
    """-31010 for a retry the call's owner took and then went away: whether its input was applied is not
    known, so the client must check before sending it again (never "start over")."""
    return ErrorObject(
        jsonrpc.OUTCOME_UNKNOWN,
        f"The replica holding the call stopped after it took this request, and {why}: the upstream may "
        "already have applied the input, and whether the call finished is unknown. It was not re-run; "
        "check its effect before sending the request again.",
    )


def shut_down(what: str) -> ErrorObject:
    """-31011 for a round still running when this replica's drain grace ended."""
    return ErrorObject(
        jsonrpc.REPLICA_SHUT_DOWN,
        f"This proxy replica shut down while the call was running; {what}. It was not re-run: the "
        "upstream may have done part of it.",
    )


def shutting_down(again: str) -> ErrorObject:
    """-31005 for a new call (or session, or stream) refused by a replica that is draining: nothing was
    started, so `again` (send it again, initialize again, open it again) is safe; another replica takes it."""
    return ErrorObject(jsonrpc.SHUTTING_DOWN, f"This proxy replica is shutting down; {again}")


def replica_stopped() -> ErrorObject:
    """-31005 for a forwarded retry reaching a replica that has stopped: nothing was done with it."""
    return ErrorObject(jsonrpc.SHUTTING_DOWN, "This proxy replica has stopped; the retry was not processed")


def lost(why: str = "it expired, or the proxy that held it restarted") -> ErrorObject:
    """-31002 for a retry of a parked call that is gone: it was not re-run, starting over is safe."""
    return ErrorObject(
        jsonrpc.CALL_LOST,
        f"The parked call is gone ({why}); it was not re-run. "
        "Send the request again without requestState to start over.",
    )


CANCELLED_MESSAGE: Final = (
    "The call was cancelled by an operator of this proxy; it was cancelled upstream and will not resume. "
    "Start it over if it is still wanted."
)


def cancelled_by_operator() -> ErrorObject:
    """-31013 for a retry of a parked call an operator cancelled (the admin listener)."""
    return ErrorObject(jsonrpc.CANCELLED_BY_OPERATOR, CANCELLED_MESSAGE)


TaskEnd = Literal["unanswered", "expired", "shut_down", "call_gone"]
_TASK_ENDS: Final[dict[TaskEnd, tuple[int, str]]] = {
    "unanswered": (jsonrpc.CALL_LOST, "Nobody answered the task's input requests in time"),
    "expired": (jsonrpc.CALL_LOST, "The task's TTL elapsed; it was cancelled"),
    "shut_down": (jsonrpc.SHUTTING_DOWN, "The proxy replica running the task shut down"),
    "call_gone": (jsonrpc.CALL_LOST, "The task's call is gone"),
}


def task_ended(why: TaskEnd) -> ErrorObject:
    """A task's error when the proxy ended it (tasks/manager.py): its call was cancelled upstream."""
    code, message = _TASK_ENDS[why]
    return ErrorObject(code, message)


def internal_error(exc: BaseException) -> ErrorObject:
    """-32603 for a bug of the proxy's (its class only: the rest is in the log with the traceback)."""
    return ErrorObject(jsonrpc.INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")


def unavailable_answer(
    rid: jsonrpc.RequestId, upstream: str, detail: BaseException | str, line: RequestLine
) -> jsonrpc.Error:
    """The answer to plain request `rid` when `upstream` is unavailable; its log line's outcome says so."""
    line.set_outcome(Outcome.UPSTREAM_FAILED)
    return jsonrpc.Error(rid, unavailable(upstream, detail))


def failed_during_call(reason: str) -> str:
    """What went wrong while a call ran upstream, as the client reads it; the whole reason goes to the log."""
    said = public_reason(reason)
    if said != reason:
        log.warning("upstream.call_failed", error=reason)
    return said

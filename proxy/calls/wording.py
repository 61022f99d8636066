"""What a client is told when its upstream fails, and what only the log gets.

A client gets a short, stable message: the upstream's configured name and what happened to the request,
never the internal host:port, an exception's class or text, or one line per protocol version tried. The
details go to the log as `upstream.unavailable` / `upstream.call_failed`, under the request's id (the
`X-Request-Id` the client got back), so the operator can find them from what a user reports.
"""

from __future__ import annotations

import re
from typing import Final

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

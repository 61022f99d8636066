"""What a client is told when its upstream fails (calls/wording.py): the proxy's own words, never a
library's text, an internal host:port, or an exception's class."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from proxy.calls import wording
from proxy.calls.wording import (
    CONNECTION_FAILED,
    SEE_LOG,
    public_reason,
    relayed_failure,
    unavailable,
    upstream_failed,
)
from proxy.upstream.base import HttpRefused, NotDelivered, UpstreamError
from proxy.upstream.bounded import MessageTooLarge
from proxy.wire.jsonrpc import ErrorObject


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("upstream process was killed by SIGKILL", "upstream process was killed by SIGKILL"),
        ("upstream process exited with code 3", "upstream process exited with code 3"),
        (
            "the upstream's SSE stream ended; a 2024-11-05 session cannot be resumed",
            "the upstream's SSE stream ended; a 2024-11-05 session cannot be resumed",
        ),
        ("upstream answered HTTP 500: <html>internal 10.0.0.7:8000</html>", "upstream answered HTTP 500"),
        (
            "upstream sent an invalid JSON-RPC message: Expecting value: line 1",
            "upstream sent an invalid JSON-RPC message",
        ),
        (
            "could not connect to upstream: ClientConnectorError: Cannot connect to host 10.0.0.7:8000",
            CONNECTION_FAILED,
        ),
        ("could not reach upstream: ServerDisconnectedError: Server disconnected", CONNECTION_FAILED),
        ("reading the upstream failed: KeyError: 'x'", CONNECTION_FAILED),
        (  # the lean client's refusal of a compressed answer (lean_http.ENCODED): said as it is
            "upstream answered with Content-Encoding 'gzip', which the proxy did not ask for (it sends "
            "Accept-Encoding identity); refused, nothing of it decoded",
            "upstream answered with Content-Encoding 'gzip', which the proxy did not ask for (it sends "
            "Accept-Encoding identity); refused, nothing of it decoded",
        ),
        (
            "could not deliver the input: upstream process was killed by SIGKILL",
            "could not deliver the input: upstream process was killed by SIGKILL",
        ),
        (
            "could not deliver the input: could not reach upstream: ClientOSError: 10.0.0.7:8000",
            f"could not deliver the input: {CONNECTION_FAILED}",
        ),
    ],
)
def test_public_reason(reason: str, said: str) -> None:
    assert public_reason(reason) == said


def test_the_detail_goes_to_the_log_only() -> None:
    detail = (
        "initialize failed: 2025-11-25: could not connect to upstream: ClientConnectorError: 10.0.0.7:8000"
    )
    with capture_logs() as logs:
        error = unavailable("search", OSError(detail))
        failed = upstream_failed("could not reach upstream: ClientOSError: [Errno 104] 10.0.0.7:8000")
    assert error.code == failed.code == -31001
    assert error.message == f"Upstream 'search' unavailable ({SEE_LOG})"
    assert failed.message == f"Upstream failed during the call ({CONNECTION_FAILED}); it was not re-run"
    assert [(e["event"], "10.0.0.7:8000" in e["error"]) for e in logs] == [
        ("upstream.unavailable", True),
        ("upstream.call_failed", True),
    ]


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (
            NotDelivered("could not connect to upstream: ConnectFailed: refused"),
            f"Upstream 'up' unavailable ({SEE_LOG})",
        ),
        (HttpRefused(503, "upstream answered HTTP 503"), f"Upstream 'up' unavailable ({SEE_LOG})"),
        (
            UpstreamError("could not reach upstream: ServerDisconnected: gone"),
            "Upstream failed during the call (the connection to it failed); it was not re-run",
        ),
        (
            UpstreamError("upstream ended the stream before answering"),
            "Upstream failed during the call (upstream ended the stream before answering); it was not re-run",
        ),
        (
            MessageTooLarge(1024),
            "Upstream failed during the call (upstream sent a message larger than 1024 bytes "
            "(upstreams[].max_message_bytes)); it was not re-run",
        ),
    ],
)
def test_a_relayed_request_is_unavailable_only_if_it_never_ran(exc: UpstreamError, message: str) -> None:
    """The native relay and the mirror: a request that may have run upstream is never called unavailable
    (a client told so could send it again and run a tool twice)."""
    with capture_logs():
        assert relayed_failure("up", exc) == ErrorObject(-31001, message)


class _Boom(Exception):
    pass


# Every failure the proxy words itself, as the client reads it: code and text. A change here is a change
# clients see (and docs/errors.md lists): make it on purpose.
TABLE: list[tuple[str, ErrorObject, int, str]] = [
    (
        "unreachable",
        wording.unavailable("up", "10.0.0.7:8000 refused"),
        -31001,
        f"Upstream 'up' unavailable ({SEE_LOG})",
    ),
    (
        "did not run",
        wording.not_run("upstream no longer knows the session"),
        -31001,
        "Upstream did not run the call (upstream no longer knows the session); it is safe to send it again",
    ),
    (
        "failed during the call",
        wording.upstream_failed("upstream process exited with code 3"),
        -31001,
        "Upstream failed during the call (upstream process exited with code 3); it was not re-run",
    ),
    (
        "credentials refused in a begun stream",
        wording.credentials_refused("up", 401),
        -31001,
        "Upstream 'up' refused the credentials (HTTP 401)",
    ),
    ("no longer modern", wording.no_longer_modern("up"), -31001, "Upstream 'up' no longer speaks 2026-07-28"),
    (
        "cannot bind",
        wording.cannot_bind("up", "requestState", _Boom("9000 > 8192 characters")),
        -31001,
        "Upstream 'up' gave a requestState the proxy cannot bind to you (9000 > 8192 characters)",
    ),
    (
        "state too large",
        wording.state_too_large(9000, 8192),
        -31001,
        "Upstream failed during the call (it asked for input with a requestState of 9000 characters; "
        "the proxy holds at most 8192); the call was ended and not retried upstream",
    ),
    (
        "no route member",
        wording.no_route_member("all"),
        -31001,
        "No upstream of route 'all' is reachable (details in the proxy log)",
    ),
    (
        "lost",
        wording.lost(),
        -31002,
        "The parked call is gone (it expired, or the proxy that held it restarted); it was not re-run. "
        "Send the request again without requestState to start over.",
    ),
    (
        "too many calls",
        wording.too_many_calls("the proxy holds 2 parked or running calls (calls.max_parked)"),
        -31003,
        "Too many calls: the proxy holds 2 parked or running calls (calls.max_parked)",
    ),
    (
        "too many sessions",
        wording.too_many_sessions("upstream 'up' has 2 sessions open (pool.max_sessions)"),
        -31003,
        "Too many sessions: upstream 'up' has 2 sessions open (pool.max_sessions)",
    ),
    (
        "too many requests",
        wording.too_many_requests(2, 0.4),
        -31003,
        "Too many requests: at most 2/s for this client (front.rate_limit_per_s); retry in 0.4s",
    ),
    (
        "too many connections",
        wording.too_many_connections(1024),
        -31003,
        "Too many connections: 1024 open (front.max_connections)",
    ),
    (
        "too many inputs",
        wording.too_many_inputs(64),
        -31003,
        "Too many input requests: the upstream asked more than 64 at once, more than one round carries; the "
        "call was cancelled upstream and not re-run",
    ),
    (
        "timed out, a call cancelled upstream",
        wording.timed_out(30, cancelled=True),
        -31004,
        "Upstream did not answer within 30s; the call was cancelled upstream",
    ),
    (
        "timed out, relayed",
        wording.timed_out(2.5, "default"),
        -31004,
        "Upstream 'default' did not answer within 2.5s",
    ),
    ("silent", wording.went_silent(30), -31004, "Upstream silent for 30s; the call was cancelled upstream"),
    (
        "session busy",
        wording.session_busy(),
        -31004,
        "the session's previous call is still running; send it again later",
    ),
    (
        "shutting down",
        wording.shutting_down("send the request again (another replica will take it)"),
        -31005,
        "This proxy replica is shutting down; send the request again (another replica will take it)",
    ),
    (
        "replica stopped",
        wording.replica_stopped(),
        -31005,
        "This proxy replica has stopped; the retry was not processed",
    ),
    (
        "outcome unknown",
        wording.outcome_unknown("its answer was cut off"),
        -31010,
        "The replica holding the call stopped after it took this request, and its answer was cut off: the "
        "upstream may already have applied the input, and whether the call finished is unknown. It was not "
        "re-run; check its effect before sending the request again.",
    ),
    (
        "shut down",
        wording.shut_down("it was cancelled upstream"),
        -31011,
        "This proxy replica shut down while the call was running; it was cancelled upstream. It was not "
        "re-run: the upstream may have done part of it.",
    ),
    (
        "cancelled by an operator",
        wording.cancelled_by_operator(),
        -31013,
        "The call was cancelled by an operator of this proxy; it was cancelled upstream and will not resume. "
        "Start it over if it is still wanted.",
    ),
    ("invalid requestState", wording.invalid_state(), -32602, "Invalid requestState"),
    (
        "unknown method",
        wording.method_not_found("tools/frobnicate"),
        -32601,
        "Method not found: tools/frobnicate",
    ),
    (
        "cannot go on",
        wording.cannot_go_on("the upstream asked for input the proxy cannot relay"),
        -32600,
        "The call cannot go on: the upstream asked for input the proxy cannot relay",
    ),
    (
        "unanswered",
        wording.unanswered(["elicitation/create"], 600),
        -32600,
        "no answer to elicitation/create within 600s; the call was ended and not retried upstream",
    ),
    (
        "task unanswered",
        wording.task_ended("unanswered"),
        -31002,
        "Nobody answered the task's input requests in time",
    ),
    ("task expired", wording.task_ended("expired"), -31002, "The task's TTL elapsed; it was cancelled"),
    (
        "task shut down",
        wording.task_ended("shut_down"),
        -31005,
        "The proxy replica running the task shut down",
    ),
    ("task call gone", wording.task_ended("call_gone"), -31002, "The task's call is gone"),
    ("internal error", wording.internal_error(KeyError("x")), -32603, "Internal error: KeyError"),
]


@pytest.mark.parametrize(("kind", "error", "code", "message"), TABLE, ids=[row[0] for row in TABLE])
def test_each_failure_has_one_code_and_one_wording(
    kind: str, error: ErrorObject, code: int, message: str
) -> None:
    assert (error.code, error.message) == (code, message)

"""What a client is told when its upstream fails (calls/wording.py): the proxy's own words, never a
library's text, an internal host:port, or an exception's class."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

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

"""The hint an https upstream's hang-up gets (proxy/upstream/connect.py `_tls_hint`): a server that wants a
client certificate closes the connection after the TLS 1.3 handshake, which aiohttp reports as a disconnect
or, when the proxy's request was already on its way, as a reset. The real handshakes are in
tests/e2e/test_upstream_tls.py; this pins which errors get the hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import TlsConfig, UpstreamConfig
from proxy.upstream.base import UpstreamError
from proxy.upstream.connect import _tls_hint

HTTPS = UpstreamConfig(name="up", url="https://127.0.0.1:8443/mcp")


@pytest.mark.parametrize(
    "error",
    [
        "could not reach upstream: ServerDisconnectedError: Server disconnected",
        "could not reach upstream: ClientOSError: [Errno 104] Connection reset by peer",
        "could not reach upstream: ClientOSError: [SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] "
        "certificate required",
    ],
)
def test_a_hang_up_of_an_https_upstream_names_the_client_certificate(error: str) -> None:
    hinted = str(_tls_hint(HTTPS, UpstreamError(error)))
    assert hinted.startswith(error)
    assert "the proxy presents no client certificate" in hinted
    assert "upstreams[].tls.cert_file" in hinted
    tls = TlsConfig(cert_file=Path("/c.pem"), key_file=None)
    with_cert = UpstreamConfig(name="up", url=HTTPS.url, tls=tls)
    assert "the proxy presents /c.pem" in str(_tls_hint(with_cert, UpstreamError(error)))


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://127.0.0.1:8080/mcp", "could not reach upstream: ClientOSError: Connection reset by peer"),
        (HTTPS.url, "could not reach upstream: ClientConnectorError: Connection refused"),
        (HTTPS.url, "upstream answered HTTP 500"),
    ],
)
def test_other_failures_are_left_as_they_are(url: str, error: str) -> None:
    exc = UpstreamError(error)
    assert _tls_hint(UpstreamConfig(name="up", url=url), exc) is exc

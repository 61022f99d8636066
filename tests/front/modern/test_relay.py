"""Which upstreams get their requestState bound to the principal (front/modern/relay.py, binds_state)."""

from __future__ import annotations

import pytest

from proxy.config import AuthConfig, UpstreamConfig, UpstreamCredential
from proxy.front.modern.relay import binds_state


def validate(source: str) -> AuthConfig:
    return AuthConfig(mode="validate", upstream_credential=UpstreamCredential(source=source))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("upstream", "principal_source", "binds"),
    [
        (UpstreamConfig(name="a", url="http://x/"), "authorization", False),  # the client's token goes up
        (UpstreamConfig(name="a", url="http://x/"), "jwt_claim", False),
        (UpstreamConfig(name="a", url="http://x/"), "header", True),  # principal from a header not sent up
        (UpstreamConfig(name="a", url="http://x/", forward_headers=()), "authorization", True),
        (UpstreamConfig(name="a", url="http://x/", auth=validate("client_token")), "authorization", False),
        (UpstreamConfig(name="a", url="http://x/", auth=validate("file")), "authorization", True),
        (UpstreamConfig(name="a", url="http://x/", auth=validate("env")), "authorization", True),
        (UpstreamConfig(name="a", url="http://x/", auth=validate("none")), "authorization", True),
    ],
)
def test_binds_state(upstream: UpstreamConfig, principal_source: str, binds: bool) -> None:
    assert binds_state(upstream, principal_source) is binds  # type: ignore[arg-type]

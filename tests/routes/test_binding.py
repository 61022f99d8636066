"""Which (route, member) pairs bind a 2026-07-28 upstream's requestState and task ids to the principal
(proxy/routes/binding.py): decided by what goes upstream on that route, never by the upstream alone."""

from __future__ import annotations

import pytest

from proxy.config import (
    AuthConfig,
    Config,
    PrincipalConfig,
    RouteConfig,
    RouteMember,
    UpstreamConfig,
    UpstreamCredential,
)
from proxy.routes.binding import OWN, BindingTable, binding, bindings


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
        # stdio: one child serves every user and no credential reaches it, whatever forward_headers says
        (UpstreamConfig(name="a", command="srv", transport="stdio"), "authorization", True),
    ],
)
def test_an_upstreams_own_route(upstream: UpstreamConfig, principal_source: str, binds: bool) -> None:
    assert binding(upstream, principal_source, upstream.auth)[0] is binds  # type: ignore[arg-type]


def test_a_route_decides_by_what_it_sends_not_by_the_members_own_auth() -> None:
    """Issue 41: a member that validates with client_token (its own route: not bound) behind a route that
    sends a service credential, or behind a pass-through route that forwards nothing of the client's, is
    bound there; a member bound on its own route behind a route that sends the client's token is not."""
    own_token = UpstreamConfig(name="mine", url="http://x/", auth=validate("client_token"))
    silent = UpstreamConfig(name="silent", url="http://y/", forward_headers=(), auth=validate("client_token"))
    service = UpstreamConfig(name="svc", url="http://z/", auth=validate("file"))
    members = (RouteMember("mine"), RouteMember("silent"), RouteMember("svc"))
    config = Config(
        upstreams=(own_token, silent, service),
        routes=(
            RouteConfig("svc-route", members, auth=validate("file")),
            RouteConfig("token-route", members, auth=validate("client_token")),
            RouteConfig("open-route", members),  # pass-through: each member's forward_headers
        ),
    )
    table = BindingTable(config)
    expected = {
        (OWN, "mine"): False,
        (OWN, "silent"): False,  # validate mode on its own route: the gate sends the client's token
        (OWN, "svc"): True,
        ("svc-route", "mine"): True,
        ("svc-route", "silent"): True,
        ("svc-route", "svc"): True,
        ("token-route", "mine"): False,
        ("token-route", "silent"): False,
        ("token-route", "svc"): False,
        ("open-route", "mine"): False,
        ("open-route", "silent"): True,  # nothing of the client's goes to it on a pass-through route
        ("open-route", "svc"): False,
    }
    assert {(b.route, b.upstream): b.bound for b in bindings(config)} == expected
    for (route, upstream), bound in expected.items():
        assert table.binds(route or None, upstream) is bound
    assert table.binds("no-such-route", "mine") is True  # a pair nothing configures: the strictest reading


def test_the_principal_source_counts_on_a_pass_through_route() -> None:
    up = UpstreamConfig(name="a", url="http://x/")
    config = Config(upstreams=(up,), routes=(RouteConfig("r", (RouteMember("a"),)),))
    assert BindingTable(config).binds("r", "a") is False
    by_header = Config(
        upstreams=(up,),
        routes=(RouteConfig("r", (RouteMember("a"),)),),
        principal=PrincipalConfig(source="header", header="x-user"),
    )
    assert BindingTable(by_header).binds("r", "a") is True

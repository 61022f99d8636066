"""Aggregated routes in the configuration: the model, the defaults, and each mistake named by its path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from proxy.config import Config, ConfigError, RouteMember, ToolPolicy, load_config

UPS = """
upstreams:
  - {name: a, url: "http://127.0.0.1:8000/mcp"}
  - {name: b, command: server-b}
  - {name: c, url: "http://127.0.0.1:8001/mcp"}
"""


def load(tmp_path: Path, routes: str, ups: str = UPS) -> Config:
    path = tmp_path / "proxy.yaml"
    path.write_text(textwrap.dedent(ups) + textwrap.dedent(routes))
    return load_config(path, env={})


def problems(tmp_path: Path, routes: str, ups: str = UPS) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, routes, ups)
    return info.value.problems


def test_a_route_lists_upstreams_by_name_or_with_settings(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        """
        routes:
          - name: fleet
            upstreams:
              - a
              - {upstream: b, prefix: files, tools: {deny: ["rm*"]}}
            tools: {allow: ["a__*", "files__*"]}
          - {name: solo, upstreams: [c], prefix_mode: always, separator: "."}
        """,
    )
    fleet, solo = cfg.routes
    assert fleet.upstreams == (
        RouteMember("a"),
        RouteMember("b", "files", ToolPolicy(deny=("rm*",))),
    )
    assert (fleet.prefix_mode, fleet.separator, fleet.list_timeout_s, fleet.default) == (
        "conditional",
        "__",
        10,
        False,
    )
    assert fleet.tools.allow == ("a__*", "files__*")
    assert (solo.prefix_mode, solo.separator) == ("always", ".")
    assert cfg.route("solo") is solo


def test_no_routes_by_default(tmp_path: Path) -> None:
    assert load(tmp_path, "").routes == ()


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        ("[{name: fleet, upstreams: [a, zz]}]", "routes.0.upstreams.1: no upstream named 'zz'"),
        ("[{name: fleet, upstreams: [a, a]}]", "routes.0.upstreams.1: upstream 'a' is already in this route"),
        ("[{name: a, upstreams: [b]}]", "routes.0.name: 'a' is also an upstream's name"),
        (
            "[{name: f, upstreams: [a]}, {name: f, upstreams: [b]}]",
            "routes.1.name: duplicate route name 'f' (also routes.0.name)",
        ),
        (
            "[{name: f, upstreams: [a, {upstream: b, prefix: a}]}]",
            "routes.0.upstreams.1.prefix: 'a' is also the prefix of routes.0.upstreams.0",
        ),
        (
            "[{name: f, default: true, upstreams: [a]}, {name: g, default: true, upstreams: [b]}]",
            "routes.1.default: only one route is served at /mcp (also routes.0)",
        ),
        ("[{name: f, upstreams: [a], separator: '/'}]", "routes.0.separator: '/' does not match"),
        ("[{name: f, upstreams: [{upstream: a, prefix: 'x y'}]}]", "routes.0.upstreams.0"),
        ("[{name: f, upstreams: []}]", "routes.0.upstreams: [] should be non-empty"),
        ("[{name: f, upstreams: [a], prefix_mode: sometimes}]", "routes.0.prefix_mode: 'sometimes'"),
        (
            "[{name: f, upstreams: [a], tools: {require_scopes: {'x*': [s]}}}]",
            "routes.0.tools: require_scopes and require_claims are only used with auth.mode validate",
        ),
    ],
)
def test_route_mistakes_are_named(tmp_path: Path, routes: str, expected: str) -> None:
    found = problems(tmp_path, f"routes: {routes}\n")
    assert any(line.startswith(expected) for line in found), found


def test_same_prefix_is_fine_when_names_are_never_prefixed(tmp_path: Path) -> None:
    routes = "routes: [{name: f, prefix_mode: never, upstreams: [a, {upstream: b, prefix: a}]}]\n"
    cfg = load(tmp_path, routes)
    assert cfg.routes[0].prefix_mode == "never"


def test_an_upstream_that_validates_tokens_needs_a_route_that_does(tmp_path: Path) -> None:
    ups = UPS.replace(
        '{name: c, url: "http://127.0.0.1:8001/mcp"}',
        '{name: c, url: "http://127.0.0.1:8001/mcp", auth: {mode: validate, jwks_url: "https://idp/jwks", '
        'authorization_servers: ["https://idp"], public_url: "https://p/servers/c/mcp"}}',
    )
    found = problems(tmp_path, "routes: [{name: f, upstreams: [a, c]}]\n", ups)
    assert any("routes.0.upstreams.1: upstream 'c' validates tokens" in line for line in found), found
    ok = load(
        tmp_path,
        """
        listen: {public_url: "https://proxy.example"}
        routes:
          - name: f
            upstreams: [a, c]
            tools: {require_scopes: {"c__admin_*": [admin]}}
            auth: {mode: validate, jwks_url: "https://idp/jwks", authorization_servers: ["https://idp"]}
        """,
        ups,
    )
    route = ok.routes[0]
    assert route.auth.mode == "validate"
    assert dict(route.tools.require_scopes) == {"c__admin_*": ("admin",)}


def test_a_route_in_validate_mode_needs_what_an_upstream_would(tmp_path: Path) -> None:
    found = problems(tmp_path, "routes: [{name: f, upstreams: [a], auth: {mode: validate}}]\n")
    assert any(line.startswith("routes.0.auth.authorization_servers:") for line in found), found
    assert any(line.startswith("routes.0.auth: validate mode needs exactly one of jwks") for line in found)


def test_overrides_reach_routes(tmp_path: Path) -> None:
    path = tmp_path / "proxy.yaml"
    path.write_text(textwrap.dedent(UPS) + "routes: [{name: f, upstreams: [a, b]}]\n")
    cfg = load_config(path, {"routes.0.list_timeout_s": "2.5", "routes.0.auth.mode": "passthrough"}, env={})
    assert cfg.routes[0].list_timeout_s == 2.5


def test_an_upstream_served_only_through_routes(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "routes: [{name: f, upstreams: [a, b]}]\n",
        UPS.replace("{name: b, command: server-b}", "{name: b, command: server-b, standalone: false}"),
    )
    assert [u.standalone for u in cfg.upstreams] == [True, False, True]
    found = problems(
        tmp_path,
        "routes: [{name: f, upstreams: [a]}]\n",
        UPS.replace(
            '{name: c, url: "http://127.0.0.1:8001/mcp"}',
            '{name: c, url: "http://127.0.0.1:8001/mcp", standalone: false, hosts: [c.example]}',
        ),
    )
    assert "upstreams.2.standalone: false, but no route lists it (it would be served nowhere)" in found
    assert "upstreams.2.hosts: only used when the upstream is standalone" in found


def test_a_host_routes_to_one_upstream_or_route(tmp_path: Path) -> None:
    ups = UPS.replace("{name: b, command: server-b}", "{name: b, command: server-b, hosts: [b.example]}")
    cfg = load(tmp_path, "routes: [{name: f, upstreams: [a, b], hosts: [fleet.example]}]\n", ups)
    assert cfg.routes[0].hosts == ("fleet.example",)
    found = problems(tmp_path, "routes: [{name: f, upstreams: [a, b], hosts: [B.example]}]\n", ups)
    assert "routes.0.hosts: 'B.example' already routes to upstreams.1" in found

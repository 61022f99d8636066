"""Configuration loading: schema errors as dotted paths, semantic checks, overrides, defaults, examples."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from proxy.config import (
    PROTOCOL_VERSIONS,
    CallsConfig,
    Config,
    ConfigError,
    FrontConfig,
    KeysConfig,
    ListenConfig,
    LoggingConfig,
    PoolConfig,
    ReplicaConfig,
    RouteConfig,
    StaticRoot,
    TasksConfig,
    TimeoutsConfig,
    ToolPolicy,
    TracingConfig,
    UpstreamConfig,
    load_config,
    load_schema,
)

ROOT = Path(__file__).resolve().parents[2]
UP = "upstreams: [{name: a, url: 'http://127.0.0.1:8000/mcp'}]\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proxy.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def load_text(tmp_path: Path, text: str, **kwargs: Any) -> Config:
    kwargs.setdefault("env", {})
    return load_config(write(tmp_path, text), **kwargs)


def problems_of(tmp_path: Path, text: str, **kwargs: Any) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text, **kwargs)
    assert str(info.value) == "\n".join(info.value.problems)
    return info.value.problems


def assert_problem(problems: tuple[str, ...], path: str, fragment: str) -> None:
    hits = [p for p in problems if p.startswith(f"{path}: ") and fragment in p]
    assert hits, f"no '{path}: ...{fragment}...' in:\n" + "\n".join(problems)


BROKEN = [
    # id, file text, dotted path, reason fragment
    ("unknown-top-level", "bogus: 1\n" + UP, "(top level)", "unknown key 'bogus'"),
    ("unknown-nested", "listen: {bogus: 1}\n" + UP, "listen", "unknown key 'bogus'"),
    (
        "unknown-in-upstream",
        "upstreams: [{name: a, url: 'http://x/', bogus: 1}]",
        "upstreams.0",
        "unknown key 'bogus'",
    ),
    (
        "unknown-in-pool",
        "upstreams: [{name: a, url: 'http://x/', pool: {size: 1}}]",
        "upstreams.0.pool",
        "'size'",
    ),
    ("inline-key", "keys: {key: abc}\n" + UP, "keys", "unknown key 'key'"),
    ("inline-secret", "keys: {secret: abc}\n" + UP, "keys", "unknown key 'secret'"),
    ("inline-value", "keys: {value: abc}\n" + UP, "keys", "unknown key 'value'"),
    ("keys-as-string", "keys: c2VjcmV0\n" + UP, "keys", "is not of type 'object'"),
    ("key-env-not-a-name", "keys: {env: ['c2VjcmV0+/==']}\n" + UP, "keys.env.0", "does not match"),
    ("port-0", "listen: {port: 0}\n" + UP, "listen.port", "0 is less than the minimum of 1"),
    (
        "port-70000",
        "listen: {port: 70000}\n" + UP,
        "listen.port",
        "70000 is greater than the maximum of 65535",
    ),
    ("port-abc", "listen: {port: abc}\n" + UP, "listen.port", "'abc' is not of type 'integer'"),
    ("port-bool", "listen: {port: true}\n" + UP, "listen.port", "True is not of type 'integer'"),
    ("url-scheme", "upstreams: [{name: a, url: 'ftp://x'}]", "upstreams.0.url", "'ftp://x' does not match"),
    ("url-no-host", "upstreams: [{name: a, url: 'http:///mcp'}]", "upstreams.0.url", "does not match"),
    ("bad-name", "upstreams: [{name: A_b, url: 'http://x/'}]", "upstreams.0.name", "'A_b' does not match"),
    ("no-name", "upstreams: [{url: 'http://x/'}]", "upstreams.0.name", "required"),
    (
        "duplicate-names",
        "upstreams: [{name: a, url: 'http://x/'}, {name: b, url: 'http://y/'}, {name: a, command: s}]",
        "upstreams.2.name",
        "duplicate upstream name 'a' (also upstreams.0.name)",
    ),
    ("url-and-command", "upstreams: [{name: a, url: 'http://x/', command: s}]", "upstreams.0", "not both"),
    ("neither-url-nor-command", "upstreams: [{name: a}]", "upstreams.0", "needs url"),
    (
        "stdio-no-command",
        "upstreams: [{name: a, transport: stdio}]",
        "upstreams.0.command",
        "transport 'stdio'",
    ),
    (
        "stdio-with-url",
        "upstreams: [{name: a, transport: stdio, url: 'http://x/'}]",
        "upstreams.0.command",
        "required for transport 'stdio'",
    ),
    ("sse-with-command", "upstreams: [{name: a, transport: sse, command: s}]", "upstreams.0.url", "'sse'"),
    ("args-on-http", "upstreams: [{name: a, url: 'http://x/', args: [x]}]", "upstreams.0.args", "stdio"),
    (
        "headers-on-stdio",
        "upstreams: [{name: a, command: s, headers: {X-A: b}}]",
        "upstreams.0.headers",
        "sse",
    ),
    ("gather-negative", "calls: {gather_window_ms: -1}\n" + UP, "calls.gather_window_ms", "-1 is less than"),
    (
        "ttl-zero",
        "calls: {parked_ttl_s: 0}\n" + UP,
        "calls.parked_ttl_s",
        "less than or equal to the minimum",
    ),
    (
        "per-principal-over-max",
        "calls: {max_parked: 10, max_parked_per_principal: 20}\n" + UP,
        "calls.max_parked_per_principal",
        "more than calls.max_parked (10)",
    ),
    ("log-level", "logging: {level: verbose}\n" + UP, "logging.level", "'verbose' is not one of"),
    ("log-format", "logging: {format: xml}\n" + UP, "logging.format", "'xml' is not one of"),
    ("transport", "upstreams: [{name: a, url: 'http://x/', transport: ws}]", "upstreams.0.transport", "'ws'"),
    (
        "protocol-version",
        "upstreams: [{name: a, url: 'http://x/', protocol_versions: [2025-11-25, 2027-01-01]}]",
        "upstreams.0.protocol_versions.1",
        "'2027-01-01' is not one of",
    ),
    ("era", "upstreams: [{name: a, url: 'http://x/', era: future}]", "upstreams.0.era", "'future'"),
    (
        "era-modern-sse",
        "upstreams: [{name: a, url: 'http://x/sse', transport: sse, era: modern}]",
        "upstreams.0",
        "is legacy by definition",
    ),
    (
        "only-2026-sse",
        "upstreams: [{name: a, url: 'http://x/sse', transport: sse, protocol_versions: [2026-07-28]}]",
        "upstreams.0",
        "protocol_versions: [2026-07-28] needs transport streamable-http or stdio",
    ),
    (
        "era-legacy-lists-2026",
        "upstreams: [{name: a, url: 'http://x/', era: legacy, protocol_versions: [2026-07-28, 2025-11-25]}]",
        "upstreams.0.protocol_versions",
        "2026-07-28 is listed but era is legacy",
    ),
    (
        "no-protocol-versions",
        "upstreams: [{name: a, url: 'http://x/', protocol_versions: []}]",
        "upstreams.0.protocol_versions",
        "non-empty",
    ),
    ("listen-not-mapping", "listen: 8080\n" + UP, "listen", "8080 is not of type 'object'"),
    ("upstreams-not-list", "upstreams: {name: a, url: 'http://x/'}", "upstreams", "is not of type 'array'"),
    (
        "int-as-string",
        "front: {max_body_bytes: lots}\n" + UP,
        "front.max_body_bytes",
        "not of type 'integer'",
    ),
    (
        "header-value-int",
        "upstreams: [{name: a, url: 'http://x/', headers: {X-A: 1}}]",
        "upstreams.0.headers.X-A",
        "1",
    ),
    (
        "header-name",
        "upstreams: [{name: a, url: 'http://x/', headers: {'a b': c}}]",
        "upstreams.0.headers",
        "key",
    ),
    (
        "static-authorization",
        "upstreams: [{name: a, url: 'http://x/', headers: {Authorization: Bearer x}}]",
        "upstreams.0.headers",
        "secrets never go in the config",
    ),
    (
        "forward-uppercase",
        "upstreams: [{name: a, url: 'http://x/', forward_headers: [Authorization]}]",
        "upstreams.0.forward_headers.0",
        "does not match",
    ),
    (
        "forward-managed",
        "upstreams: [{name: a, url: 'http://x/', forward_headers: [mcp-session-id]}]",
        "upstreams.0.forward_headers.0",
        "set by the proxy",
    ),
    (
        "forward-not-a-name",  # (once a crash: a list is unhashable)
        "upstreams: [{name: a, url: 'http://x/', forward_headers: [[]]}]",
        "upstreams.0.forward_headers.0",
        "not of type 'string'",
    ),
    (
        "root-not-file-uri",
        "upstreams: [{name: a, url: 'http://x/', static_roots: [{uri: 'http://x'}]}]",
        "upstreams.0.static_roots.0.uri",
        "does not match",
    ),
    (
        "env-value-int",
        "upstreams: [{name: a, command: s, env: {DEBUG: 1}}]",
        "upstreams.0.env.DEBUG",
        "not of type 'string'",
    ),
    (
        "origin-with-path",
        "front: {allowed_origins: ['https://a/b']}\n" + UP,
        "front.allowed_origins.0",
        "match",
    ),
    ("replica-address", "replica: {address: 'nope'}\n" + UP, "replica.address", "does not match"),
    ("empty-upstreams", "upstreams: []", "upstreams", "at least one upstream is required"),
    ("missing-upstreams", "listen: {port: 8080}", "upstreams", "at least one upstream is required"),
    ("empty-file", "", "upstreams", "at least one upstream is required"),
    ("top-level-list", "- a\n- b\n", "(top level)", "expected a mapping of settings (key: value), got list"),
    ("top-level-scalar", "just a string\n", "(top level)", "got str"),
]


@pytest.mark.parametrize(("text", "path", "fragment"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_file(tmp_path: Path, text: str, path: str, fragment: str) -> None:
    assert_problem(problems_of(tmp_path, text), path, fragment)


@pytest.mark.parametrize("field", ["key", "secret", "value", "private_key"])
def test_inlined_key_material_hints_at_files_and_env(tmp_path: Path, field: str) -> None:
    (problem,) = problems_of(tmp_path, f"keys: {{{field}: c2VjcmV0}}\n" + UP)
    assert problem.startswith(f"keys: unknown key '{field}' (")
    assert "keys.files" in problem
    assert "keys.dirs" in problem
    assert "keys.env" in problem


def test_secret_looking_key_elsewhere_gets_the_hint(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, "signing_key: abc\n" + UP)
    assert problem.startswith("(top level): unknown key 'signing_key' (")
    assert "keys.env" in problem


def test_unknown_key_without_secret_look_has_no_hint(tmp_path: Path) -> None:
    assert problems_of(tmp_path, "listen: {bogus: 1}\n" + UP) == ("listen: unknown key 'bogus'",)


def test_yaml_syntax_error_gives_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "listen:\n  host: a\n  port: [1, 2\nupstreams: []\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}:4:10: invalid YAML: ")
    assert info.value.source == path


def test_yaml_tab_indentation_error(tmp_path: Path) -> None:
    path = write(tmp_path, "listen:\n\thost: a\n")
    with pytest.raises(ConfigError, match=rf"^{path}:2:1: invalid YAML: "):
        load_config(path, env={})


def test_duplicate_yaml_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, UP + "listen: {port: 1}\nlisten: {port: 2}\n")
    with pytest.raises(ConfigError, match=rf"^{path}:3:1: invalid YAML: duplicate key 'listen'$"):
        load_config(path, env={})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml", env={})


def test_several_errors_are_all_listed_in_path_order(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        """\
        bogus: 1
        listen: {port: 0, extra: x}
        calls: {gather_window_ms: -1}
        logging: {level: loud}
        upstreams:
          - {name: a, url: 'ftp://x'}
          - {name: a, url: 'http://x/', command: srv}
          - {name: b, transport: stdio}
        """,
    )
    expected_paths = [
        "(top level)",
        "calls.gather_window_ms",
        "listen",
        "listen.port",
        "logging.level",
        "upstreams.0.url",
        "upstreams.1",
        "upstreams.1.name",
        "upstreams.2.command",
    ]
    assert [p.split(": ", 1)[0] for p in problems] == expected_paths


def test_list_indices_sort_numerically(tmp_path: Path) -> None:
    ups = ", ".join(f"{{name: u{i}, url: 'http://x/'}}" for i in range(11))
    text = f"upstreams: [{ups.replace('u2,', 'U2,').replace('u10,', 'U10,')}]"
    problems = problems_of(tmp_path, text)
    assert [p.split(": ", 1)[0] for p in problems] == ["upstreams.2.name", "upstreams.10.name"]


# --- defaults and the model -------------------------------------------------------------------


def test_defaults_are_filled_with_no_file() -> None:
    cfg = load_config(None, {"upstream": "http://127.0.0.1:8000/mcp"}, env={})
    assert cfg.listen == ListenConfig("127.0.0.1", 8080)
    assert cfg.replica == ReplicaConfig(None)
    assert cfg.replica_address == "127.0.0.1:8080"
    assert cfg.keys == KeysConfig((), (), ())
    assert cfg.logging == LoggingConfig("info", "auto")
    assert cfg.front == FrontConfig((), 1048576, 64, 262144)
    assert cfg.calls == CallsConfig(50, 600, 10000, 100, 300)
    (up,) = cfg.upstreams
    assert up == UpstreamConfig(name="default", url="http://127.0.0.1:8000/mcp")
    assert up.transport == "streamable-http"
    assert up.forward_headers == ("authorization",)
    assert (
        up.protocol_versions == PROTOCOL_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    )
    assert up.pool == PoolConfig(1024, 0, 300)
    assert up.timeouts == TimeoutsConfig(10, 30)
    assert dict(up.headers) == {} and dict(up.env) == {}
    assert cfg.upstream("default") is up is cfg.default_upstream


def test_no_upstream_at_all() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, env={})
    assert info.value.problems == ("upstreams: at least one upstream is required",)


def test_collections_are_tuples_and_read_only_mappings(tmp_path: Path) -> None:
    cfg = load_text(
        tmp_path,
        """\
        keys: {files: [/k/a.key], dirs: [/k/d], env: [K1, K2]}
        front: {allowed_origins: ['https://app.example.com']}
        upstreams:
          - name: a
            url: 'https://x.example/mcp'
            headers: {X-Tenant: blue}
            forward_headers: [authorization, x-request-id]
            static_roots: [{uri: 'file:///srv'}, {uri: 'file:///data', name: data}]
          - {name: b, command: srv, args: [-v], env: {A: b}, cwd: /tmp}
        """,
    )
    assert cfg.keys == KeysConfig((Path("/k/a.key"),), (Path("/k/d"),), ("K1", "K2"))
    assert cfg.front.allowed_origins == ("https://app.example.com",)
    a, b = cfg.upstreams
    assert a.headers == {"X-Tenant": "blue"}
    assert a.forward_headers == ("authorization", "x-request-id")
    assert a.static_roots == (StaticRoot("file:///srv"), StaticRoot("file:///data", "data"))
    assert (b.transport, b.command, b.args, b.env, b.cwd) == (
        "stdio",
        "srv",
        ("-v",),
        {"A": "b"},
        Path("/tmp"),
    )
    with pytest.raises(TypeError):
        a.headers["X-Other"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        b.env["A"] = "c"  # type: ignore[index]


def test_frozen(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, UP)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.listen = ListenConfig()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.calls.gather_window_ms = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.upstreams[0].url = "http://y/"  # type: ignore[misc]


def test_upstream_lookup(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "upstreams: [{name: a, url: 'http://x/'}, {name: b, command: s}]")
    assert cfg.upstream("b").command == "s"
    assert cfg.default_upstream.name == "a"
    with pytest.raises(KeyError):
        cfg.upstream("c")


def test_relative_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    text = "keys: {files: [k/a.key, /abs.key], dirs: [d]}\nupstreams: [{name: s, command: srv, cwd: work}]"
    cfg = load_text(tmp_path, text)
    assert cfg.keys.files == (tmp_path / "k/a.key", Path("/abs.key"))
    assert cfg.keys.dirs == (tmp_path / "d",)
    assert cfg.upstreams[0].cwd == tmp_path / "work"


def test_unquoted_dates_stay_strings_and_versions_are_offered_newest_first(tmp_path: Path) -> None:
    cfg = load_text(
        tmp_path, "upstreams: [{name: a, url: 'http://x/', protocol_versions: [2024-11-05, 2025-06-18]}]"
    )
    assert cfg.upstreams[0].protocol_versions == ("2025-06-18", "2024-11-05")


def test_era_defaults_to_auto_and_2026_in_protocol_versions_says_modern(tmp_path: Path) -> None:
    cfg = load_text(
        tmp_path, "upstreams: [{name: a, url: 'http://x/'}, {name: b, url: 'http://y/', era: legacy}]"
    )
    assert [u.era for u in cfg.upstreams] == ["auto", "legacy"]
    only = load_text(tmp_path, "upstreams: [{name: a, url: 'http://x/', protocol_versions: [2026-07-28]}]")
    assert only.upstreams[0].era == "modern"
    assert only.upstreams[0].protocol_versions == PROTOCOL_VERSIONS  # legacy ones: never offered, default
    both = load_text(
        tmp_path, "upstreams: [{name: a, url: 'http://x/', protocol_versions: [2026-07-28, 2025-06-18]}]"
    )
    assert (both.upstreams[0].era, both.upstreams[0].protocol_versions) == ("auto", ("2025-06-18",))


def test_a_stdio_upstream_may_be_modern(tmp_path: Path) -> None:
    cfg = load_text(
        tmp_path,
        "upstreams: [{name: a, command: srv, era: modern},"
        " {name: b, command: srv, protocol_versions: [2026-07-28]}, {name: c, command: srv}]",
    )
    assert [(u.transport, u.era) for u in cfg.upstreams] == [
        ("stdio", "modern"),
        ("stdio", "modern"),
        ("stdio", "auto"),
    ]


def test_transport_defaults_from_url_or_command(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "upstreams: [{name: a, url: 'http://x/'}, {name: b, command: s}]")
    assert [u.transport for u in cfg.upstreams] == ["streamable-http", "stdio"]
    cfg = load_text(tmp_path, "upstreams: [{name: a, url: 'http://x/sse', transport: sse}]")
    assert cfg.upstreams[0].transport == "sse"


def test_replica_address(tmp_path: Path) -> None:
    assert (
        load_text(tmp_path, "replica: {address: 'r1.internal:9000'}\n" + UP).replica_address
        == "r1.internal:9000"
    )
    assert load_text(tmp_path, "listen: {host: '::1', port: 81}\n" + UP).replica_address == "[::1]:81"


@pytest.mark.parametrize(
    ("address", "host"), [("0.0.0.0:8080", "0.0.0.0"), ("[::]:8080", "::"), ("0.0.0.0", "0.0.0.0")]
)
def test_a_wildcard_replica_address_is_refused(tmp_path: Path, address: str, host: str) -> None:
    """It was accepted silently: handles then named 0.0.0.0 as a parked call's owner, and a peer forwarding
    a retry there reaches whichever replica makes the connection (itself)."""
    problems = problems_of(tmp_path, f"replica: {{address: '{address}'}}\n" + UP)
    assert_problem(problems, "replica.address", f"is no address another replica can reach ({host} means")
    assert_problem(problems, "replica.address", "set this replica's own IP or DNS name")
    env = {"MRTR_PROXY_REPLICA_ADDRESS": address}  # the chart's variable: the same check
    assert_problem(problems_of(tmp_path, UP, env=env), "replica.address", "is no address")


# --- overrides and environment -----------------------------------------------------------------


def test_serve_with_no_file() -> None:
    cfg = load_config(None, {"upstream": "http://127.0.0.1:8000/mcp", "listen": "127.0.0.1:8080"}, env={})
    assert cfg.listen == ListenConfig("127.0.0.1", 8080)
    assert cfg.upstreams == (UpstreamConfig(name="default", url="http://127.0.0.1:8000/mcp"),)


@pytest.mark.parametrize(
    ("value", "host", "port"),
    [("0.0.0.0:9000", "0.0.0.0", 9000), ("[::1]:8080", "::1", 8080), ("localhost:1", "localhost", 1)],
)
def test_listen_override(tmp_path: Path, value: str, host: str, port: int) -> None:
    cfg = load_text(tmp_path, "listen: {host: example.org, port: 5}\n" + UP, overrides={"listen": value})
    assert cfg.listen == ListenConfig(host, port)


@pytest.mark.parametrize(
    ("value", "path", "fragment"),
    [
        ("8080", "listen", "expected host:port or [ipv6]:port, got '8080' (from --listen)"),
        ("::1:8080", "listen", "expected host:port"),
        ("host:", "listen.port", "'' is not of type 'integer'"),
        ("host:http", "listen.port", "'http' is not of type 'integer'"),
        ("host:0", "listen.port", "0 is less than the minimum of 1"),
        ("host:99999", "listen.port", "greater than the maximum"),
        (":8080", "listen.host", "does not match"),
    ],
)
def test_bad_listen_override(value: str, path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"upstream": "http://x/", "listen": value}, env={})
    assert_problem(info.value.problems, path, fragment)


def test_upstream_override_replaces_the_list(tmp_path: Path) -> None:
    text = "upstreams: [{name: a, url: 'http://x/'}, {name: b, command: s}]"
    cfg = load_text(tmp_path, text, overrides={"upstream": "https://other.example/mcp"})
    assert [(u.name, u.url, u.transport) for u in cfg.upstreams] == [
        ("default", "https://other.example/mcp", "streamable-http")
    ]


def test_bad_upstream_override() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"upstream": "ftp://x"}, env={})
    assert_problem(info.value.problems, "upstreams.0.url", "'ftp://x' does not match")


def test_alias_and_dotted_overrides(tmp_path: Path) -> None:
    cfg = load_text(
        tmp_path,
        "logging: {level: warning}\n" + UP,
        overrides={
            "log_level": "debug",
            "log_format": "json",
            "replica_address": "10.0.0.5:8080",
            "calls.gather_window_ms": "120",
            "calls.parked_ttl_s": "1.5",
            "front.allowed_origins": "[https://a.example, https://b.example]",
            "upstreams.0.pool.max_sessions": 7,
            "upstreams.0.headers.X-Tenant": "42",
            "listen": None,  # an option the CLI did not get
        },
    )
    assert cfg.logging == LoggingConfig("debug", "json")
    assert cfg.replica_address == "10.0.0.5:8080"
    assert cfg.calls.gather_window_ms == 120
    assert cfg.calls.parked_ttl_s == 1.5
    assert cfg.front.allowed_origins == ("https://a.example", "https://b.example")
    assert cfg.upstreams[0].pool.max_sessions == 7
    assert cfg.upstreams[0].headers == {"X-Tenant": "42"}  # a string field stays a string
    assert cfg.listen == ListenConfig()


@pytest.mark.parametrize(
    ("overrides", "path", "fragment"),
    [
        ({"log_level": "loud"}, "logging.level", "'loud' is not one of"),
        ({"calls.gather_window_ms": "-5"}, "calls.gather_window_ms", "-5 is less than"),
        ({"calls.gather_window_ms": "soon"}, "calls.gather_window_ms", "'soon' is not of type 'integer'"),
        ({"calls.bogus": "1"}, "calls", "unknown key 'bogus'"),
        ({"verbose": True}, "verbose", "unknown override"),
        ({"upstreams.5.url": "http://x/"}, "upstreams", "cannot set upstreams.5.url"),
        ({"replica_address": "no port"}, "replica.address", "does not match"),
    ],
)
def test_bad_overrides(tmp_path: Path, overrides: dict[str, Any], path: str, fragment: str) -> None:
    assert_problem(problems_of(tmp_path, UP, overrides=overrides), path, fragment)


def test_environment_sits_between_file_and_overrides(tmp_path: Path) -> None:
    env = {
        "MRTR_PROXY_LISTEN": "0.0.0.0:9000",
        "MRTR_PROXY_LOG_LEVEL": "error",
        "MRTR_PROXY_UPSTREAM": "http://env.example/mcp",
        "UNRELATED": "x",
    }
    cfg = load_text(tmp_path, "logging: {level: warning}\n" + UP, env=env, overrides={"log_level": "debug"})
    assert cfg.listen == ListenConfig("0.0.0.0", 9000)
    assert cfg.logging.level == "debug"
    assert cfg.upstreams[0].url == "http://env.example/mcp"


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"upstream": "http://x/"}, env={"MRTR_PROXY_LISTEN": "nonsense"})
    assert_problem(info.value.problems, "listen", "(from MRTR_PROXY_LISTEN)")


def test_a_bad_value_from_a_variable_is_not_reported_as_in_the_file(tmp_path: Path) -> None:
    """Issue 20: each problem names its source; a variable's bad value is not "in" the YAML file."""
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, UP, env={"MRTR_PROXY_LOG_LEVEL": "loud"})
    assert info.value.source is None  # so the CLI does not say "invalid configuration in proxy.yaml"
    assert info.value.problems == (
        "logging.level: 'loud' is not one of ['debug', 'info', 'warning', 'error']"
        " (from MRTR_PROXY_LOG_LEVEL)",
    )
    with pytest.raises(ConfigError) as mixed:
        load_text(tmp_path, "logging: {format: xml}\n" + UP, env={"MRTR_PROXY_LOG_LEVEL": "loud"})
    assert mixed.value.source is None
    assert_problem(mixed.value.problems, "logging.format", f"(in {tmp_path / 'proxy.yaml'})")
    assert_problem(mixed.value.problems, "logging.level", "(from MRTR_PROXY_LOG_LEVEL)")
    with pytest.raises(ConfigError) as flag:
        load_text(tmp_path, UP, overrides={"log_format": "xml", "keys.files": "nope"})
    assert_problem(flag.value.problems, "logging.format", "(from --log-format)")
    assert_problem(flag.value.problems, "keys.files", "(from --key-file)")
    with pytest.raises(ConfigError) as own:
        load_text(tmp_path, "logging: {format: xml}\n" + UP, env={"MRTR_PROXY_LOG_LEVEL": "info"})
    assert own.value.source == tmp_path / "proxy.yaml"  # only the file's problems: the file is named once
    assert own.value.problems == ("logging.format: 'xml' is not one of ['auto', 'json', 'console']",)


def test_tasks_section(tmp_path: Path) -> None:
    cfg = load_text(tmp_path, "calls: {tasks: {policy: always, tools: [a, b], ttl_ms: 5000}}\n" + UP)
    assert cfg.calls.tasks == TasksConfig(policy="always", tools=("a", "b"), ttl_ms=5000)
    assert load_text(tmp_path, UP).calls.tasks == TasksConfig()
    problems = problems_of(tmp_path, "calls: {tasks: {policy: sometimes, after_ms: -1, bogus: 1}}\n" + UP)
    assert_problem(problems, "calls.tasks", "unknown key 'bogus'")
    assert_problem(problems, "calls.tasks.policy", "'sometimes' is not one of")
    assert_problem(problems, "calls.tasks.after_ms", "less than the minimum")
    overridden = load_text(tmp_path, UP, overrides={"calls.tasks.policy": "never"})
    assert overridden.calls.tasks.policy == "never"


# --- the schema and the shipped examples -------------------------------------------------------


@pytest.mark.parametrize("name", ["example.yaml", "sidecar.yaml"])
def test_example_files_validate(name: str) -> None:
    cfg = load_config(ROOT / "config" / name, env={})
    assert cfg.upstreams
    Draft202012Validator(load_schema()).validate(yaml.safe_load((ROOT / "config" / name).read_text()))


def test_gateway_example_is_a_mixed_fleet() -> None:
    """Legacy upstreams (HTTP and stdio) beside a two-era one with its legacy_tools and a modern-only one."""
    cfg = load_config(ROOT / "config" / "example.yaml", env={})
    assert [(u.name, u.transport, u.era) for u in cfg.upstreams] == [
        ("search", "streamable-http", "auto"),
        ("files", "stdio", "auto"),
        ("forms", "streamable-http", "auto"),
        ("agents", "streamable-http", "modern"),
    ]
    assert cfg.upstreams[2].legacy_tools == ("ask_name",)


def test_gateway_example_shows_every_key() -> None:
    raw = yaml.safe_load((ROOT / "config" / "example.yaml").read_text())
    schema = load_schema()

    shown: set[str] = set()  # a definition used in several places (auth, tools) is shown in full once

    def walk(node: Mapping[str, Any], value: Any, path: str) -> None:
        if "$ref" in node and "type" not in node:
            if node["$ref"] in shown and node["$ref"] != "#/$defs/upstream":
                return
            shown.add(node["$ref"])
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        if node.get("type") == "object" and "properties" in node:
            assert isinstance(value, dict), path
            for key, sub in node["properties"].items():
                assert key in value, f"config/example.yaml does not show {path}{key}"
                walk(sub, value[key], f"{path}{key}.")
        elif node.get("type") == "array" and isinstance(node.get("items"), dict) and value:
            walk(node["items"], value[0], f"{path}0.")

    walk(schema, raw, "")


def test_schema_is_valid_and_closed() -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "properties" in node:
                assert node.get("additionalProperties") is False, path
                for key, sub in node["properties"].items():
                    assert sub.get("description"), f"{path}.{key} has no description"
                    if "default" in sub and not isinstance(sub["default"], dict):
                        assert "Default" in sub["description"], f"{path}.{key}: default not documented"
            for key, sub in node.items():
                walk(sub, f"{path}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{path}.{i}")

    walk(schema, "#")


@pytest.mark.parametrize(
    ("cls", "schema_path"),
    [
        (ListenConfig, ["listen"]),
        (ReplicaConfig, ["replica"]),
        (KeysConfig, ["keys"]),
        (LoggingConfig, ["logging"]),
        (FrontConfig, ["front"]),
        (CallsConfig, ["calls"]),
        (TasksConfig, ["calls", "tasks"]),
        (TracingConfig, ["tracing"]),
        (UpstreamConfig, ["$defs", "upstream"]),
        (PoolConfig, ["$defs", "upstream", "properties", "pool"]),
        (TimeoutsConfig, ["$defs", "upstream", "properties", "timeouts"]),
        (StaticRoot, ["$defs", "upstream", "properties", "static_roots", "items"]),
        (RouteConfig, ["routes", "items"]),
        (ToolPolicy, ["$defs", "tools"]),
    ],
)
def test_dataclass_fields_and_defaults_match_the_schema(cls: Any, schema_path: list[str]) -> None:
    node: Any = load_schema()
    for part in schema_path:
        node = node[part] if part in ("$defs", "properties", "items") else node.get("properties", node)[part]
    props = node["properties"]
    assert [f.name for f in dataclasses.fields(cls)] == list(props)
    for f in dataclasses.fields(cls):
        if "default" not in props[f.name]:
            continue
        default: Any = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        expected = props[f.name]["default"]
        if dataclasses.is_dataclass(default):  # a section: {} in the schema, its own defaults here
            assert expected == {}, f.name
        elif isinstance(expected, dict):
            assert dict(default) == expected, f.name
        else:
            assert default == (tuple(expected) if isinstance(expected, list) else expected), f.name


# --- robustness: any YAML gives a Config or a ConfigError, nothing else --------------------------

KNOWN_KEYS = sorted(
    {"listen", "host", "port", "keys", "files", "env", "calls", "gather_window_ms", "upstreams", "name"}
    | {"url", "command", "transport", "headers", "forward_headers", "static_roots", "uri", "pool", "x"}
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 70000)
    | st.sampled_from(["stdio", "sse", "http://x/", "a", ""]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KNOWN_KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(doc=st.dictionaries(st.sampled_from(KNOWN_KEYS), VALUES, max_size=5))
def test_arbitrary_documents_never_crash(
    tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any]
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    try:
        load_config(path, env={})
    except ConfigError as exc:
        assert exc.problems
        assert all(": " in p for p in exc.problems)


def test_stdio_pools_default_to_a_machine_sized_bound(tmp_path: Path) -> None:
    """Issue 29 item 9: a stdio session is a child process (~55 MiB for FastMCP 1.30): 32 per upstream
    and 4 per principal by default, where an HTTP upstream keeps 1024 and no per-principal cap."""
    path = tmp_path / "proxy.yaml"
    path.write_text(
        "upstreams:\n"
        "  - {name: kids, command: python3}\n"
        "  - {name: raised, command: python3, pool: {max_sessions: 64}}\n"
        "  - {name: web, url: 'http://127.0.0.1:1/mcp'}\n"
    )
    kids, raised, web = load_config(path, env={}).upstreams
    assert (kids.pool.max_sessions, kids.pool.max_sessions_per_principal) == (32, 4)
    assert (raised.pool.max_sessions, raised.pool.max_sessions_per_principal) == (64, 4)
    assert (web.pool.max_sessions, web.pool.max_sessions_per_principal) == (1024, 0)

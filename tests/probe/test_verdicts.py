"""Findings → verdicts and the YAML upstream block (pure)."""

from __future__ import annotations

from pathlib import Path

import yaml

from proxy.config import load_config
from proxy.probe.findings import Authorization, CallProbe, Check, Findings, Resumability, Session
from proxy.probe.verdicts import cannot_front, config_yaml, upstream_block, upstream_name, verdicts
from proxy.wire import mcp

ALL = dict.fromkeys(mcp.LEGACY_VERSIONS, True)
URL = "http://127.0.0.1:8000/mcp"


def streamable(**kw: object) -> Findings:
    base: dict[str, object] = {
        "target": URL,
        "transport": "streamable-http",
        "url": URL,
        "versions": ALL,
        "negotiated": "2025-11-25",
        "server_info": {"name": "My Server!", "version": "1"},
        "capabilities": {"tools": {"listChanged": True}},
        "transports": {"streamable_http": Check("yes", "text/event-stream")},
        "session": Session(session_id_issued=True, get_stream=Check("yes")),
        "resumability": Resumability("yes", "replayed"),
    }
    return Findings(**{**base, **kw})  # type: ignore[arg-type]


def by_feature(f: Findings) -> dict[str, tuple[str, str]]:
    return {v.feature: (v.status, v.reason) for v in verdicts(f)}


def test_a_resumable_streamable_server_works_everywhere() -> None:
    got = by_feature(streamable())
    assert got["fronting"] == ("works", "legacy MCP over streamable-http, speaks 2025-11-25")
    assert got["owner failover of a parked call"][0] == "works"
    assert got["legacy clients through the proxy"][0] == "works"
    assert got["subscriptions/listen"] == ("works", "relays tools")
    assert not cannot_front(streamable())


def test_not_resumable_means_call_lost() -> None:
    status, reason = by_feature(streamable(resumability=Resumability("no", "no ids")))[
        "owner failover of a parked call"
    ]
    assert status == "will not work" and reason.startswith("no ids: ") and "call lost, not replayed" in reason


def test_unverified_resumability_is_a_limit() -> None:
    f = streamable(resumability=Resumability("unknown", "no priming event"))
    status, reason = by_feature(f)["owner failover of a parked call"]
    assert status == "works with limits" and reason.startswith("not verified (no priming event)")


def test_sse_and_stdio_cannot_fail_over_and_are_sticky_for_legacy_clients() -> None:
    for transport in ("sse", "stdio"):
        got = by_feature(streamable(transport=transport))
        assert got["owner failover of a parked call"][0] == "will not work"
        assert got["legacy clients through the proxy"][0] == "works with limits"
        assert "stickily" in got["legacy clients through the proxy"][1]


def test_only_2024_11_05_has_no_elicitation() -> None:
    old = dict.fromkeys(mcp.LEGACY_VERSIONS, False) | {"2024-11-05": True}
    status, reason = by_feature(streamable(versions=old))["mid-call input (MRTR)"]
    assert status == "works with limits" and "elicitation does not exist" in reason


def test_json_only_posts_and_no_get_stream_cannot_ask_mid_call() -> None:
    f = streamable(
        transports={"streamable_http": Check("yes", "application/json")},
        session=Session(session_id_issued=True, get_stream=Check("no", "HTTP 405")),
    )
    got = by_feature(f)
    assert got["mid-call input (MRTR)"][0] == "will not work"
    assert got["subscriptions/listen"][0] == "works with limits"


def test_roots_outside_calls_asks_for_static_roots() -> None:
    f = streamable(
        session=Session(
            session_id_issued=True, get_stream=Check("yes"), requests_outside_calls=("roots/list",)
        )
    )
    status, reason = by_feature(f)["server requests outside calls"]
    assert status == "works with limits" and "static_roots" in reason


def test_nothing_answered_cannot_be_fronted() -> None:
    f = Findings(target=URL, transport=None, url=URL, error="cannot connect to x: connection refused")
    assert [(v.feature, v.status, v.reason) for v in verdicts(f)] == [
        ("fronting", "will not work", "cannot connect to x: connection refused")
    ]
    assert cannot_front(f) and upstream_block(f) is None and config_yaml(f) is None


def test_a_version_the_proxy_does_not_speak_upstream_cannot_be_fronted() -> None:
    f = streamable(versions=dict.fromkeys(mcp.LEGACY_VERSIONS, False), negotiated="2026-07-28")
    assert cannot_front(f)
    assert by_feature(f)["fronting"][1].startswith("it answers initialize with protocol version 2026-07-28")


def test_failed_version_checks_alone_do_not_stop_fronting() -> None:
    f = streamable(versions=dict.fromkeys(mcp.LEGACY_VERSIONS))  # every extra attempt failed
    assert not cannot_front(f)
    assert "protocol_versions" not in (upstream_block(f) or {})


def test_json_posts_with_a_get_stream_lose_inline_requests() -> None:
    f = streamable(transports={"streamable_http": Check("yes", "application/json")})
    status, reason = by_feature(f)["mid-call input (MRTR)"]
    assert status == "works with limits" and "only server requests sent on the GET stream" in reason


def test_oauth_without_a_token_is_frontable_with_limits() -> None:
    auth = Authorization(401, "Bearer", authorization_servers=("https://as.example/",), scopes=("a", "b"))
    f = Findings(target=URL, transport="streamable-http", url=URL, authorization=auth)
    (only,) = verdicts(f)
    assert only.status == "works with limits"
    assert "https://as.example/ with scopes a b" in only.reason and "--header" in only.reason
    assert not cannot_front(f)


def test_call_verdicts() -> None:
    asked = by_feature(streamable(call=CallProbe("t", ("elicitation/create",), "result", "decline")))
    assert asked["tools/call t"] == (
        "works",
        "asked elicitation/create: becomes input_required round(s); ended with a result",
    )
    timed = by_feature(streamable(call=CallProbe("t", (), "timeout", "no answer within 20s")))
    assert timed["tools/call t"] == ("works with limits", "timeout: no answer within 20s")


def test_upstream_names_are_valid_config_names() -> None:
    assert upstream_name(streamable()) == "my-server"
    assert upstream_name(streamable(server_info={"name": "@@@"})) == "upstream"
    assert upstream_name(streamable(server_info={"name": "x" * 99})) == "x" * 63


def test_the_yaml_block_lists_only_accepted_versions_and_loads(tmp_path: Path) -> None:
    versions = ALL | {"2024-11-05": False}
    text = config_yaml(streamable(versions=versions))
    assert text is not None
    assert yaml.safe_load(text) == {
        "upstreams": [
            {
                "name": "my-server",
                "url": URL,
                "transport": "streamable-http",
                "protocol_versions": ["2025-11-25", "2025-06-18", "2025-03-26"],
            }
        ]
    }
    path = tmp_path / "c.yaml"
    path.write_text(text)
    config = load_config(path)
    assert config.upstreams[0].protocol_versions == ("2025-11-25", "2025-06-18", "2025-03-26")


def test_the_stdio_block_carries_command_args_env_and_cwd() -> None:
    f = streamable(transport="stdio", url=None, command=("python", "-m", "srv"), cwd="/srv", env={"A": "1"})
    assert upstream_block(f) == {
        "name": "my-server",
        "command": "python",
        "args": ["-m", "srv"],
        "env": {"A": "1"},
        "cwd": "/srv",
    }

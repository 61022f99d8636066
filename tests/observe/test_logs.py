"""structlog setup: the redaction processor, and what actually reaches the stream."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from multidict import CIMultiDict

from proxy.observe.logs import REDACTED, configure, redact

R = REDACTED


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(
            {"event": "x", "authorization": "Bearer s"}, {"event": "x", "authorization": R}, id="top-level"
        ),
        pytest.param(
            {"Authorization": "Bearer s", "TOKEN": "t", "Set-Cookie": "c"},
            {"Authorization": R, "TOKEN": R, "Set-Cookie": R},
            id="top-level-any-case",
        ),
        pytest.param({"params": {"name": "deploy"}}, {"params": R}, id="whole-sensitive-object"),
        pytest.param(
            {"requestState": "h", "request_state": "h", "inputResponses": {}, "input_responses": []},
            {"requestState": R, "request_state": R, "inputResponses": R, "input_responses": R},
            id="mrtr-fields",
        ),
        pytest.param(
            {"headers": {"Authorization": "Bearer s", "Accept": "json"}},
            {"headers": {"Authorization": R, "Accept": "json"}},
            id="nested-dict",
        ),
        pytest.param(
            {"a": {"b": {"c": {"password": "p", "ok": 1}}}},
            {"a": {"b": {"c": {"password": R, "ok": 1}}}},
            id="deeply-nested",
        ),
        pytest.param(
            {"items": [{"secret": "s", "n": 1}, "plain", [{"content": "c"}]]},
            {"items": [{"secret": R, "n": 1}, "plain", [{"content": R}]]},
            id="list-of-dicts",
        ),
        pytest.param({"pair": ({"key": "k"}, 2)}, {"pair": [{"key": R}, 2]}, id="tuple-becomes-list"),
        pytest.param(
            {"m": {1: "one", "claims": {"sub": "x"}}},
            {"m": {1: "one", "claims": R}},
            id="non-string-nested-key",
        ),
        pytest.param(
            {"event": "call.reaped", "call": "c1", "round": 2, "ok": None},
            {"event": "call.reaped", "call": "c1", "round": 2, "ok": None},
            id="nothing-sensitive",
        ),
        pytest.param(
            {"result": "text", "arguments": {"a": 1}, "plaintext": b"x", "keys": ["k1"]},
            {"result": R, "arguments": R, "plaintext": R, "keys": R},
            id="other-sensitive-names",
        ),
    ],
)
def test_redact(event: dict[str, Any], expected: dict[str, Any]) -> None:
    assert redact(None, "info", dict(event)) == expected


def test_redact_mapping_types() -> None:
    headers = CIMultiDict({"Authorization": "Bearer s3cret", "Mcp-Method": "tools/call"})
    out = redact(None, "info", {"headers": headers})
    assert out == {"headers": {"Authorization": R, "Mcp-Method": "tools/call"}}


def test_redact_leaves_the_input_values_alone() -> None:
    nested = {"token": "t"}
    event = {"data": nested}
    redact(None, "info", event)
    assert nested == {"token": "t"}


@pytest.mark.parametrize("name", ["handle", "access_token", "api_key", "x-api-key", "client_secret"])
def test_redact_common_secret_names(name: str) -> None:
    assert redact(None, "info", {name: "s3cret"}) == {name: R}


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_configure_json_redacts_secrets() -> None:
    stream = io.StringIO()
    configure(fmt="json", stream=stream)
    log = structlog.get_logger("test")
    log.info(
        "request",
        authorization="Bearer s3cret",
        params={"name": "deploy", "content": "elicited-pin-1234"},
        headers={"Proxy-Authorization": "Basic dXNlcjpwdw=="},
        outcome="complete",
    )
    log.warning("second", items=[{"password": "hunter2"}])
    text = stream.getvalue()
    for secret in ("s3cret", "elicited-pin-1234", "dXNlcjpwdw==", "hunter2"):
        assert secret not in text
    first, second = _lines(stream)
    assert first["event"] == "request"
    assert first["authorization"] == R
    assert first["params"] == R
    assert first["headers"] == {"Proxy-Authorization": R}
    assert first["outcome"] == "complete"
    assert first["level"] == "info"
    assert first["timestamp"].endswith("Z")
    assert second["level"] == "warning"
    assert second["items"] == [{"password": R}]


def test_configure_json_redacts_nested_content_only() -> None:
    stream = io.StringIO()
    configure(fmt="json", stream=stream)
    structlog.get_logger().info("e", call={"id": "c1", "detail": {"content": {"pin": "1234"}}})
    (line,) = _lines(stream)
    assert line["call"] == {"id": "c1", "detail": {"content": R}}


def test_configure_redacts_bound_context() -> None:
    stream = io.StringIO()
    configure(fmt="json", stream=stream)
    structlog.contextvars.bind_contextvars(token="ctx-s3cret")
    structlog.get_logger().bind(cookie="bound-s3cret").info("e")
    assert "s3cret" not in stream.getvalue()
    (line,) = _lines(stream)
    assert line["token"] == line["cookie"] == R


def test_configure_level_filters() -> None:
    stream = io.StringIO()
    configure(level="warning", fmt="json", stream=stream)
    log = structlog.get_logger()
    log.info("hidden")
    log.debug("hidden")
    log.error("shown")
    assert [line["event"] for line in _lines(stream)] == ["shown"]


def test_configure_auto_is_json_off_a_terminal() -> None:
    stream = io.StringIO()
    configure(fmt="auto", stream=stream)
    structlog.get_logger().info("e", secret="s3cret")
    (line,) = _lines(stream)
    assert line["secret"] == R


def test_configure_console_redacts_too() -> None:
    stream = io.StringIO()
    configure(level="debug", fmt="console", stream=stream)
    structlog.get_logger().debug("e", authorization="Bearer s3cret", upstream="github")
    text = stream.getvalue()
    assert "s3cret" not in text
    assert R in text
    assert "github" in text
    assert "\x1b[" not in text  # no colours off a terminal

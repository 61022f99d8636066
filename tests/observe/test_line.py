"""`observe.line.RequestLine`: the typed request line renders the JSON log line readers have always had."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.observe.line import ABSENT, Outcome, RequestLine
from proxy.wire import jsonrpc

# What the dict-built line of each kind of request held before the line was typed (written from the code
# that built it, in the order it wrote the keys); below, the same request through the typed line.
DICT_LINES: dict[str, dict[str, Any]] = {
    "modern tools/call, complete": {
        "request_id": "r1", "http_method": "POST", "path": "/mcp", "upstream": "default", "id": 7,
        "method": "tools/call", "tool": "echo", "outcome": "complete", "call": "c-1", "round": 1,
        "status": 200, "duration_ms": 1.37,
    },
    "modern tools/call, input_required on a route": {
        "request_id": "r2", "http_method": "POST", "path": "/servers/fleet/mcp", "upstream": "a",
        "route": "fleet", "id": "x", "method": "tools/call", "tool": "ask", "outcome": "input_required",
        "round": 2, "input_keys": 1, "call": "c-2", "status": 200, "duration_ms": 3.5,
    },
    "relayed natively, upstream error": {
        "request_id": "r3", "http_method": "POST", "path": "/mcp", "upstream": "m", "id": 1,
        "method": "tools/call", "tool": "t", "upstream_era": "modern", "outcome": "upstream_error:-32603",
        "status": 200, "duration_ms": 0.5,
    },
    "legacy client, relayed": {
        "request_id": "r4", "http_method": "POST", "path": "/mcp", "upstream": "default",
        "method": "initialize", "id": 0, "era": "legacy", "outcome": "relayed:200", "status": 200,
        "duration_ms": 2.0,
    },
    "bad body: no id": {
        "request_id": "r5", "http_method": "POST", "path": "/mcp", "upstream": "default", "id": None,
        "outcome": f"refused:{jsonrpc.PARSE_ERROR}", "status": 400, "duration_ms": 0.1,
    },
    "validate mode, no token": {
        "request_id": "r6", "http_method": "POST", "path": "/mcp", "upstream": "default",
        "outcome": "unauthorized:missing_token", "status": 401, "duration_ms": 0.2,
    },
    "a retry forwarded to its owner": {
        "request_id": "r7", "http_method": "POST", "path": "/mcp", "upstream": "default", "id": 9,
        "method": "tools/call", "tool": "ask", "owner": "10.0.0.2:8081", "outcome": "forwarded:200",
        "status": 200, "duration_ms": 4.0,
    },
    "a handle refused": {
        "request_id": "r8", "http_method": "POST", "path": "/mcp", "upstream": "default", "id": 2,
        "method": "tools/call", "tool": "ask", "outcome": "handle_rejected", "reason": "expired",
        "status": 200, "duration_ms": 0.3,
    },
    "a client that hung up": {
        "request_id": "r9", "http_method": "POST", "path": "/mcp", "upstream": "default", "id": 3,
        "method": "tools/call", "tool": "slow", "outcome": "client_gone", "unsent": "complete",
        "call": "c-9", "round": 1, "status": 499, "duration_ms": 9.0,
    },
    "a key this replica lacks (null key id)": {
        "request_id": "r10", "http_method": "POST", "path": "/mcp", "upstream": "default", "id": 4,
        "method": "tools/call", "key_id": None, "outcome": f"refused:{jsonrpc.INTERNAL_ERROR}",
        "status": 503, "duration_ms": 0.4,
    },
    "a preflight refused": {
        "request_id": "r11", "http_method": "OPTIONS", "path": "/mcp",
        "outcome": f"refused:{jsonrpc.INVALID_REQUEST}", "origin": "https://evil.example", "status": 403,
        "duration_ms": 0.1,
    },
}  # fmt: skip


def _typed(kind: str) -> RequestLine:
    """The same request through the typed line, set the way the front sets it."""
    match kind:
        case "modern tools/call, complete":
            line = RequestLine("r1", "POST", "/mcp")
            line.upstream, line.id, line.method, line.tool = "default", 7, "tools/call", "echo"
            line.set_outcome(Outcome.COMPLETE)
            line.call, line.round, line.status, line.duration_ms = "c-1", 1, 200, 1.37
        case "modern tools/call, input_required on a route":
            line = RequestLine("r2", "POST", "/servers/fleet/mcp")
            line.upstream, line.route, line.id, line.method, line.tool = (
                "fleet",
                "fleet",
                "x",
                "tools/call",
                "ask",
            )
            line.upstream = "a"  # the member the call went to
            line.set_outcome(Outcome.INPUT_REQUIRED)
            line.round, line.input_keys, line.call, line.status, line.duration_ms = 2, 1, "c-2", 200, 3.5
        case "relayed natively, upstream error":
            line = RequestLine("r3", "POST", "/mcp")
            line.upstream, line.id, line.method, line.tool = "m", 1, "tools/call", "t"
            line.upstream_era = "modern"
            line.set_outcome(Outcome.UPSTREAM_ERROR, -32603)
            line.status, line.duration_ms = 200, 0.5
        case "legacy client, relayed":
            line = RequestLine("r4", "POST", "/mcp")
            line.upstream, line.method, line.id, line.era = "default", "initialize", 0, "legacy"
            line.set_outcome(Outcome.RELAYED, 200)
            line.status, line.duration_ms = 200, 2.0
        case "bad body: no id":
            line = RequestLine("r5", "POST", "/mcp")
            line.upstream, line.id = "default", None
            line.set_outcome(Outcome.REFUSED, jsonrpc.PARSE_ERROR)
            line.status, line.duration_ms = 400, 0.1
        case "validate mode, no token":
            line = RequestLine("r6", "POST", "/mcp")
            line.upstream = "default"
            line.set_outcome(Outcome.UNAUTHORIZED, "missing_token")
            line.status, line.duration_ms = 401, 0.2
        case "a retry forwarded to its owner":
            line = RequestLine("r7", "POST", "/mcp")
            line.upstream, line.id, line.method, line.tool = "default", 9, "tools/call", "ask"
            line.owner = "10.0.0.2:8081"
            line.set_outcome(Outcome.FORWARDED, 200)
            line.status, line.duration_ms = 200, 4.0
        case "a handle refused":
            line = RequestLine("r8", "POST", "/mcp")
            line.upstream, line.id, line.method, line.tool = "default", 2, "tools/call", "ask"
            line.set_outcome(Outcome.HANDLE_REJECTED)
            line.reason, line.status, line.duration_ms = "expired", 200, 0.3
        case "a client that hung up":
            line = RequestLine("r9", "POST", "/mcp")
            line.upstream, line.id, line.method, line.tool = "default", 3, "tools/call", "slow"
            line.set_outcome(Outcome.COMPLETE)
            line.unsent = line.outcome_text
            line.set_outcome(Outcome.CLIENT_GONE)
            line.call, line.round, line.status, line.duration_ms = "c-9", 1, 499, 9.0
        case "a key this replica lacks (null key id)":
            line = RequestLine("r10", "POST", "/mcp")
            line.upstream, line.id, line.method, line.key_id = "default", 4, "tools/call", None
            line.set_outcome(Outcome.REFUSED, jsonrpc.INTERNAL_ERROR)
            line.status, line.duration_ms = 503, 0.4
        case "a preflight refused":
            line = RequestLine("r11", "OPTIONS", "/mcp")
            line.set_outcome(Outcome.REFUSED, jsonrpc.INVALID_REQUEST)
            line.origin, line.status, line.duration_ms = "https://evil.example", 403, 0.1
        case _:
            raise AssertionError(kind)
    return line


@pytest.mark.parametrize("kind", DICT_LINES)
def test_the_typed_line_renders_what_the_dict_line_held(kind: str) -> None:
    assert _typed(kind).render() == DICT_LINES[kind]


def test_the_common_lines_keep_their_key_order() -> None:
    """JSON readers see keys, not order; still, a modern call's line (the common one) and a refused
    request's keep the order they were written in before."""
    for kind in ("modern tools/call, complete", "relayed natively, upstream error", "a handle refused"):
        assert list(_typed(kind).render()) == list(DICT_LINES[kind])


def test_an_unset_line_renders_only_what_was_set() -> None:
    line = RequestLine("r", "GET", "/mcp")
    assert line.render() == {"request_id": "r", "http_method": "GET", "path": "/mcp"}
    assert line.id is ABSENT and line.json_id is None and line.outcome_text is None


@pytest.mark.parametrize(
    ("outcome", "detail", "text"),
    [
        (Outcome.COMPLETE, None, "complete"),
        (Outcome.FAILED, -31001, "failed:-31001"),
        (Outcome.UNAUTHORIZED, "not_a_jwt", "unauthorized:not_a_jwt"),
        (Outcome.RELAYED, 202, "relayed:202"),
    ],
)
def test_the_outcome_renders_as_its_text(outcome: Outcome, detail: int | str | None, text: str) -> None:
    line = RequestLine()
    line.set_outcome(outcome, detail)
    assert line.outcome_text == text and line.render() == {"outcome": text}
    line.set_outcome(Outcome.CLIENT_GONE)  # a later outcome replaces the detail too
    assert line.render() == {"outcome": "client_gone"}


def test_a_line_holds_only_what_was_set_in_the_order_it_was_set() -> None:
    """What render copies (the cost of a line is what a request set, not the thirty attributes it may set);
    a None written over a field drops it from the line, as the dict line's pop did."""
    line = RequestLine("r1", "POST", "/mcp")
    line.method, line.upstream, line.upstream_era = "tools/call", "a", "modern"
    line.upstream_era = None
    line.set_outcome(Outcome.COMPLETE)
    assert list(vars(line)) == [
        "request_id", "http_method", "path", "method", "upstream", "upstream_era", "outcome", "detail"
    ]  # fmt: skip
    assert list(line.render()) == ["request_id", "http_method", "path", "method", "upstream", "outcome"]


def test_json_id_is_the_id_to_answer_with() -> None:
    line = RequestLine()
    line.id = 0
    assert line.json_id == 0
    line.id = None
    assert line.json_id is None and line.render() == {"id": None}

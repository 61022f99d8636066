"""The pure parts of per-tool paths (proxy/upstream/tool_paths.py) and of the `both` verdict's initialize
check (proxy/upstream/era_initialize.py). The refusal texts are the real servers' (FastMCP 4.2.3, tmcp 1.20.0:
tests/e2e/test_two_era_paths.py sees them come back from the real peers)."""

from __future__ import annotations

from proxy.config import UpstreamConfig
from proxy.upstream.era_initialize import judge_initialize
from proxy.upstream.tool_paths import (
    HINT,
    MAX_LEARNED,
    ToolPaths,
    legacy_refusal,
    modern_refusal,
    with_hint,
)
from proxy.wire import jsonrpc


def tool_error(text: str) -> jsonrpc.Result:
    return jsonrpc.Result(1, {"content": [{"type": "text", "text": text}], "isError": True})


FASTMCP4_ELICIT = "elicitation via server-initiated requests is unavailable on 2026-07-28 connections."
FASTMCP4_SAMPLING = (
    "Error calling tool 'summarize': Cannot send 'sampling/createMessage': this transport context has no "
    "back-channel for server-initiated requests."
)
TMCP = (
    'MCP error -32603: tool "ask_name" asked the client for elicitation, but it is not marked as replayable. '
    "The client must retry the ORIGINAL request with its answer, which starts the handler again. "
    "Set `replayable: true` on the tool definition only when that work is safe to repeat. "
    "This is a tmcp safety check, not an MCP requirement."
)
FASTMCP4_NATIVE = (
    "Tool 'guard_name' returned an InputRequiredResult to request client input, but the multi-round-trip "
    "result type (SEP-2322) only exists at MCP 2026-07-28; this connection negotiated '2025-11-25'. Use "
    "ctx.elicit() for server-initiated input on handshake-era connections."
)


def never(_: object) -> bool:
    return False


def test_the_real_servers_refusals_at_2026_are_recognised() -> None:
    assert modern_refusal(tool_error(FASTMCP4_ELICIT), "ask_name") == FASTMCP4_ELICIT
    assert modern_refusal(tool_error(FASTMCP4_SAMPLING), "summarize") is not None
    assert modern_refusal(jsonrpc.error(1, jsonrpc.INTERNAL_ERROR, TMCP), "ask_name") is not None
    # Anything else is the tool's own answer: not learned from.
    assert modern_refusal(tool_error("file not found"), "ask_name") is None
    plain = jsonrpc.Result(1, {"content": [{"type": "text", "text": FASTMCP4_ELICIT}]})
    assert modern_refusal(plain, "ask_name") is None
    assert modern_refusal(jsonrpc.error(1, jsonrpc.INTERNAL_ERROR, "boom"), "ask_name") is None


def test_a_refusal_is_matched_whole_in_its_own_shape_and_never_from_the_callers_words() -> None:
    # A substring inside a tool's own error, another tool's name, another code, a second block: not a refusal.
    assert modern_refusal(tool_error(f"bad input: {FASTMCP4_ELICIT}"), "echo") is None
    assert modern_refusal(tool_error(FASTMCP4_SAMPLING), "other") is None
    assert modern_refusal(jsonrpc.error(1, jsonrpc.INTERNAL_ERROR, TMCP), "other") is None
    assert modern_refusal(jsonrpc.error(1, jsonrpc.INVALID_PARAMS, TMCP), "ask_name") is None
    assert modern_refusal(tool_error(FASTMCP4_ELICIT + " "), "ask_name") is None
    two = jsonrpc.Result(1, {"isError": True, "content": [{"type": "text", "text": FASTMCP4_ELICIT}] * 2})
    assert modern_refusal(two, "ask_name") is None
    # The whole refusal, echoed from the call's own arguments: the caller's words, not the server's refusal.
    assert modern_refusal(tool_error(FASTMCP4_ELICIT), "say", {"text": FASTMCP4_ELICIT}) is None
    assert modern_refusal(tool_error(FASTMCP4_ELICIT), "ask_name", {"text": "hi"}) == FASTMCP4_ELICIT


def test_a_native_tools_refusal_on_a_legacy_session_is_recognised() -> None:
    native = jsonrpc.error(1, jsonrpc.INVALID_PARAMS, FASTMCP4_NATIVE)
    assert legacy_refusal(native, "guard_name", never) is not None
    upstream_own = jsonrpc.Result(1, {"resultType": "input_required", "inputRequests": {}})
    assert legacy_refusal(upstream_own, "guard_name", never) == "input_required on a legacy session"
    # The proxy's own round (its parked call's handle as requestState) is the legacy way working.
    proxy_own = jsonrpc.Result(1, {"resultType": "input_required", "requestState": "h"})
    assert legacy_refusal(proxy_own, "guard_name", lambda state: state == "h") is None
    assert legacy_refusal(tool_error("no such file"), "guard_name", never) is None
    # A tool's own error result saying the same words (it echoes its caller) is no refusal: FastMCP gives
    # the real one as a JSON-RPC error, never as a tool result — and only for the tool called.
    assert legacy_refusal(tool_error(FASTMCP4_NATIVE), "guard_name", never) is None
    assert legacy_refusal(native, "echo", never) is None


def test_the_hint_is_added_to_an_error_and_to_a_tool_error() -> None:
    error = with_hint(jsonrpc.error(1, -32603, TMCP))
    assert isinstance(error, jsonrpc.Error) and error.error.message == f"{TMCP} ({HINT})"
    result = with_hint(tool_error(FASTMCP4_ELICIT))
    assert isinstance(result, jsonrpc.Result) and result.result["isError"] is True
    assert [c["text"] for c in result.result["content"]] == [FASTMCP4_ELICIT, HINT]


def paths(**extra: object) -> ToolPaths:
    return ToolPaths({"up": UpstreamConfig(name="up", url="http://x/mcp", **extra)})  # type: ignore[arg-type]


def test_learned_tools_are_bounded_and_forgotten_when_the_tool_list_changes() -> None:
    book = paths(legacy_tools=("pinned",))
    assert book.legacy("up", "pinned") and not book.legacy("up", "ask")
    assert book.learn_legacy("up", "ask", "refused") and not book.learn_legacy("up", "ask", "again")
    assert not book.learn_legacy("up", "pinned", "listed already")  # the configured form needs no learning
    assert book.learn_native("up", "guard", "refused on a legacy session")
    assert book.legacy("up", "ask") and book.native("up", "guard")
    assert book.learned() == {"up": {"legacy": ["ask"], "native": ["guard"]}}
    book.tool_list("up", ["ask", "guard"])
    book.tool_list("up", ["guard", "ask"])  # the same tools: nothing forgotten
    assert book.legacy("up", "ask")
    book.tool_list("up", ["ask", "guard", "new"])
    assert book.learned() == {} and not book.legacy("up", "ask") and book.legacy("up", "pinned")
    for i in range(MAX_LEARNED + 5):
        book.learn_legacy("up", f"t{i}", "refused")
    assert len(book.learned()["up"]["legacy"]) == MAX_LEARNED and not book.legacy("up", "t0")


def test_learning_can_be_turned_off_per_upstream() -> None:
    assert paths().learns("up") and not paths(learn_legacy_tools=False).learns("up")


def test_an_initialize_answer_is_judged_from_json_or_its_first_sse_event() -> None:
    body = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}'
    assert judge_initialize(body, "application/json").legacy
    sse = b"event: message\ndata: " + body + b"\n\n"
    assert judge_initialize(sse, "text/event-stream").version == "2025-11-25"
    refused = b'{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found"}}'
    answer = judge_initialize(refused, "application/json")
    assert not answer.legacy and answer.detail == "initialize: Method not found"
    assert not judge_initialize(b"<html>", "text/html").legacy

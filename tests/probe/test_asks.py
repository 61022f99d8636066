"""The probe's era (`legacy`, `modern`, `both`), the `--call` tool's class, and the verdicts and YAML they
lead to (pure). The refusal texts are the real servers' (FastMCP 4.2.3, tmcp 1.20.0); tests/e2e/
test_probe_modern.py sees them on the wire."""

from __future__ import annotations

from pathlib import Path

import yaml

from probe.test_verdicts import by_feature, streamable
from proxy.config import load_config
from proxy.probe.asks import classify, needs_legacy_tools, refuses_inline
from proxy.probe.findings import CallProbe, Check, Findings, ModernCall, ModernSide, Session, ToolClass
from proxy.probe.verdicts import config_yaml, upstream_block

FASTMCP4_ELICIT = "elicitation via server-initiated requests is unavailable on 2026-07-28 connections."
FASTMCP4_SAMPLE = "Cannot send 'sampling/createMessage': this transport context has no back-channel"
TMCP_ELICIT = "-32603: Request elicitation/create is not marked as replayable"


def modern_side(call: ModernCall | None = None, **kw: object) -> ModernSide:
    base: dict[str, object] = {
        "era": "modern",
        "versions": ("2026-07-28",),
        "tools_listed": Check("yes", "3 tools"),
        "listen": Check("yes", "acknowledged"),
        "tasks": Check("no", "tasks/get answered -32601"),
        "call": call,
    }
    return ModernSide(**{**base, **kw})  # type: ignore[arg-type]


def two_era(
    call: ModernCall | None = None,
    legacy_call: CallProbe | None = None,
    legacy: dict[str, object] | None = None,
    **kw: object,
) -> Findings:
    return streamable(modern=modern_side(call, **kw), call=legacy_call, **(legacy or {}))


def modern_only(call: ModernCall | None = None, **kw: object) -> Findings:
    return streamable(modern=modern_side(call, **kw), negotiated=None, versions={})


def test_the_era_is_both_when_discover_and_initialize_are_answered() -> None:
    assert two_era().era == "both"
    assert modern_only().era == "modern"
    assert streamable().era == "legacy"
    assert streamable(negotiated=None, transport=None).era is None
    assert by_feature(two_era())["fronting"][1].endswith("era: both (two eras)")
    assert by_feature(modern_only())["fronting"][1].endswith("era: modern")


def test_the_real_servers_refusals_to_ask_inline_are_recognised() -> None:
    assert all(refuses_inline(t) for t in (FASTMCP4_ELICIT, FASTMCP4_SAMPLE, TMCP_ELICIT))
    assert not refuses_inline("division by zero")


def test_a_tool_refused_at_2026_that_asks_on_a_legacy_session_asks_inline() -> None:
    f = two_era(
        ModernCall("ask_name", "tool_error", detail=FASTMCP4_ELICIT),
        CallProbe("ask_name", ("elicitation/create",), "result", "decline"),
    )
    found = classify(f)
    assert found is not None and found.asks == "asks inline"
    assert found.evidence.startswith("sent elicitation/create on a legacy session; at 2026-07-28: tool_error")
    assert needs_legacy_tools(f) == ("ask_name",)
    status, reason = by_feature(f)["tools/call ask_name"]
    assert status == "works with limits" and "goes in upstreams[].legacy_tools" in reason
    assert upstream_block(f) is not None and upstream_block(f)["legacy_tools"] == ["ask_name"]  # type: ignore[index]


def test_the_printed_yaml_with_legacy_tools_loads(tmp_path: Path) -> None:
    f = two_era(
        ModernCall("summarize", "tool_error", detail=FASTMCP4_SAMPLE),
        CallProbe("summarize", ("sampling/createMessage",), "tool_error", "no sampling"),
    )
    text = config_yaml(f)
    assert text is not None and yaml.safe_load(text)["upstreams"][0]["legacy_tools"] == ["summarize"]
    path = tmp_path / "probe.yaml"
    path.write_text(text)
    (upstream,) = load_config(path).upstreams
    assert upstream.legacy_tools == ("summarize",)


def test_a_refusal_alone_says_inline_and_a_modern_only_server_cannot_run_it() -> None:
    f = modern_only(ModernCall("ask", "error", detail=TMCP_ELICIT))
    assert classify(f) == ToolClass(
        "ask", "asks inline", f"refused to ask the legacy way at 2026-07-28: error ({TMCP_ELICIT})"
    )
    assert needs_legacy_tools(f) == ()  # no legacy side to run it on
    assert by_feature(f)["tools/call ask"][0] == "will not work"
    assert "legacy_tools" not in (upstream_block(f) or {})


def test_native_and_silent_tools() -> None:
    native = two_era(ModernCall("guard", "input_required", ("elicitation/create",)))
    assert classify(native) == ToolClass(
        "guard", "asks natively", "answered input_required at 2026-07-28 (elicitation/create)"
    )
    assert needs_legacy_tools(native) == ()
    silent = two_era(ModernCall("echo", "result"))
    assert classify(silent) == ToolClass("echo", "asks nothing", "answered at 2026-07-28 in one round")
    legacy = streamable(call=CallProbe("add", (), "result", "3"))
    assert classify(legacy) == ToolClass("add", "asks nothing", "ended with a result without asking")
    asking = streamable(call=CallProbe("ask", ("ping", "elicitation/create"), "result", ""))
    assert classify(asking) is not None and classify(asking).asks == "asks inline"  # type: ignore[union-attr]
    assert needs_legacy_tools(asking) == ()  # a legacy server: every tool is run the legacy way already
    assert classify(streamable()) is None


def test_listen_and_tasks_are_what_the_server_answered() -> None:
    refused = by_feature(two_era(listen=Check("no", "-32601: Method not found")))
    status, reason = refused["subscriptions/listen"]
    assert status == "works with limits" and "-32601: Method not found" in reason
    assert by_feature(two_era())["subscriptions/listen"][0] == "works"
    assert by_feature(two_era())["tasks"][0] == "works with limits"
    assert by_feature(two_era(tasks=Check("yes", "declared")))["tasks"][0] == "works"


def test_legacy_clients_are_judged_on_what_was_listed() -> None:
    unlisted = by_feature(modern_only(tools_listed=Check("no", "-32603: boom")))
    assert unlisted["legacy clients through the proxy"][0] == "will not work"
    assert unlisted["2026-07-28 clients"][0] == "works with limits"
    both = by_feature(two_era())["legacy clients through the proxy"]
    assert both[0] == "works" and "as it would going direct" in both[1]


def test_a_two_era_servers_legacy_side_is_judged_as_a_legacy_servers() -> None:
    """Legacy clients and legacy_tools of a `both` server run on its legacy sessions: the legacy steps'
    findings (POSTs answered JSON, no GET stream) limit what they can be asked."""
    json_only = two_era(
        legacy={
            "transports": {"streamable_http": Check("yes", "application/json")},
            "session": Session(session_id_issued=False, get_stream=Check("no", "HTTP 405")),
        }
    )
    got = by_feature(json_only)
    assert got["mid-call input (MRTR)"][0] == "will not work"
    status, reason = got["legacy clients through the proxy"]
    assert status == "works with limits" and "cannot ask mid-call" in reason
    assert "owner failover of a parked call" in by_feature(two_era())
    assert "mid-call input (MRTR)" not in by_feature(modern_only())  # no legacy side to judge

"""How a `--call` tool asks for input, judged from what its calls showed at each era. Pure.

A tool asks **natively** when it answers a 2026-07-28 call with `input_required`; **inline** when it sends
server-initiated requests (elicitation, sampling, roots) on a legacy session, or refuses a 2026-07-28 call
the way a two-era server refuses a tool that can only ask inline (the refusals of the servers tested below);
**nothing** when a call ended without asking. An inline-asking tool of a two-era server belongs in
`upstreams[].legacy_tools`: at 2026-07-28 it fails where going direct at a legacy version it works.
"""

from __future__ import annotations

from typing import Final

from proxy.probe.findings import Findings, ToolClass
from proxy.wire import mcp

# The words real two-era servers answer a 2026-07-28 call of an inline-asking tool with.
INLINE_REFUSALS: Final = (
    "unavailable on 2026-07-28",  # FastMCP 4.2.3, ctx.elicit: "elicitation via server-initiated requests …"
    "Cannot send 'sampling/createMessage'",  # FastMCP 4.2.3, session.create_message
    "Cannot send 'elicitation/create'",
    "not marked as replayable",  # tmcp 1.20.0, server.elicitation
)


def refuses_inline(detail: str) -> bool:
    """Whether a 2026-07-28 call's error or tool error is a refusal to ask the legacy way."""
    return any(words in detail for words in INLINE_REFUSALS)


def classify(f: Findings) -> ToolClass | None:
    """The `--call` tool's class (None: no `--call`)."""
    modern = f.modern.call if f.modern_era and f.modern is not None else None
    legacy = f.call
    if modern is None and legacy is None:
        return None
    name = modern.name if modern is not None else legacy.name if legacy is not None else ""
    at_2026 = (
        ""
        if modern is None
        else f"at 2026-07-28: {modern.outcome}" + (f" ({modern.detail})" if modern.detail else "")
    )
    asked = tuple(m for m in legacy.server_requests if m != mcp.PING) if legacy is not None else ()
    if modern is not None and modern.outcome == "input_required":
        return ToolClass(
            name, "asks natively", f"answered input_required at 2026-07-28 ({', '.join(modern.asks)})"
        )
    if legacy is not None and asked:
        also = f"; {at_2026}" if modern is not None else ""
        return ToolClass(name, "asks inline", f"sent {', '.join(asked)} on a legacy session{also}")
    if modern is not None and modern.outcome in ("tool_error", "error") and refuses_inline(modern.detail):
        return ToolClass(name, "asks inline", f"refused to ask the legacy way {at_2026}")
    if modern is not None and modern.outcome == "result":
        return ToolClass(name, "asks nothing", "answered at 2026-07-28 in one round")
    if legacy is not None and legacy.outcome in ("result", "tool_error"):
        return ToolClass(
            name, "asks nothing", f"ended with a {legacy.outcome.replace('_', ' ')} without asking"
        )
    what = at_2026 if modern is not None else f"{legacy.outcome} ({legacy.detail})" if legacy else ""
    return ToolClass(name, "unknown", what)


def needs_legacy_tools(f: Findings) -> tuple[str, ...]:
    """The `legacy_tools` the YAML block carries: an inline-asking tool of a two-era server."""
    found = classify(f)
    if found is not None and found.asks == "asks inline" and f.era == "both":
        return (found.name,)
    return ()

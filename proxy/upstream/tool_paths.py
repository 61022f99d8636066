"""The path each tool of a two-era upstream (era verdict `both`, era.py) takes, decided per tool.

A two-era server's older tools ask inline (FastMCP's `ctx.elicit`, `session.create_message`, tmcp's
`server.elicitation` in a tool not marked replayable): they work on a legacy session and refuse at 2026-07-28.
Its newer tools return `input_required` natively: they work at 2026-07-28 and refuse on a legacy session. So:

- a 2026-07-28 client gets the native relay; a tool named in `legacy_tools`, or learned here, goes the legacy
  way (the proxy's MRTR over a legacy session). A tool is learned when its 2026-07-28 call was refused the
  way `modern_refusal` recognises: a real server's whole refusal in its own shape, never a substring, and
  not when the call's arguments carry the refusal's words (a tool echoing its caller). That call is never
  re-run by the proxy (the tool has run up to its question): the client gets the refusal plus `HINT`, and
  the next call goes the legacy way.
- a legacy client (through the mirror) speaks legacy to the upstream for every tool, as going direct does; a
  tool refused there the way `legacy_refusal` recognises (it asks natively only) is sent again at
  2026-07-28 at once — safe, a native tool returns `input_required` before it acts — and remembered as native.

Learned names are per upstream, per replica (in memory: every replica learns on its own), at most
`MAX_LEARNED` each (the oldest goes first), and forgotten when the upstream's tool list changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping

import structlog

from proxy.config import UpstreamConfig
from proxy.wire import jsonrpc, mcp

log = structlog.get_logger(__name__)

MAX_LEARNED = 256
HINT = (
    "mrtr-proxy: this tool asks with server-initiated requests, which 2026-07-28 cannot carry; "
    "call it again and the proxy runs it the legacy way (pin it with upstreams[].legacy_tools)."
)
# What real two-era servers answer a 2026-07-28 call of a tool that asks inline, whole message and shape
# (each seen coming back from the real peer in tests/e2e/test_two_era_paths.py). Matched whole, never as a
# substring: a tool whose error carries its caller's words must not teach every user of the replica a path.
_FASTMCP4_ELICIT = "elicitation via server-initiated requests is unavailable on 2026-07-28 connections."
_BACK_CHANNEL = (  # FastMCP 4.2.3 / mcp 2.3.0 NoBackChannelError, as a tool error or a JSON-RPC -32600
    r"(?:Error calling tool '{name}': )?"
    r"Cannot send '(?:sampling/createMessage|roots/list|elicitation/create)': "
    r"this transport context has no back-channel for server-initiated requests\."
)
_TMCP_NOT_REPLAYABLE = (  # tmcp 1.20.0: a JSON-RPC -32603
    r'(?:MCP error -32603: )?tool "{name}" asked the client for [a-z /,-]+, '
    r"but it is not marked as replayable\. "
    r"The client must retry the ORIGINAL request .* This is a tmcp safety check, not an MCP requirement\."
)
# What they answer a legacy call of a tool that only asks natively: FastMCP 4.2.3, a JSON-RPC -32602 (a tool's
# own error is an isError result there, so no tool output can take this shape).
_FASTMCP4_NATIVE_ONLY = (
    r"Tool '{name}' returned an InputRequiredResult to request client input, but the multi-round-trip result "
    r"type \(SEP-2322\) only exists at MCP 2026-07-28; this connection negotiated '[^']*'\. "
    r"Use ctx\.elicit\(\) for server-initiated input on handshake-era connections\."
)
# Words that, found in a call's own arguments, mean the "refusal" may be the caller's words echoed back.
_SIGNS = ("unavailable on 2026-07-28", "back-channel for server-initiated", "not marked as replayable")


def _matches(pattern: str, name: str, text: str) -> bool:
    return re.fullmatch(pattern.format(name=re.escape(name)), text, re.DOTALL) is not None


def _tool_error_text(answer: jsonrpc.Result) -> str | None:
    """The one text block of an isError result (the shape the real refusals take), else None."""
    result = answer.result
    content = result.get("content")
    if result.get("isError") is not True or not isinstance(content, list) or len(content) != 1:
        return None
    (block,) = content
    if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
        return None
    text: str = block["text"]
    return text


def modern_refusal(answer: jsonrpc.Response, name: str, arguments: object = None) -> str | None:
    """The refusal text if `answer` (to a 2026-07-28 call of tool `name`) is a real server's refusal to ask
    inline at 2026-07-28 — the whole message, in the shape that server gives it — and the call's own
    `arguments` do not carry the refusal's words (a tool echoing its input could say the same)."""
    if isinstance(answer, jsonrpc.Error):
        text, code = answer.error.message, answer.error.code
        known = (code == jsonrpc.INTERNAL_ERROR and _matches(_TMCP_NOT_REPLAYABLE, name, text)) or (
            code == jsonrpc.INVALID_REQUEST and _matches(_BACK_CHANNEL, name, text)
        )
    else:
        found = _tool_error_text(answer)
        text = found or ""
        known = found is not None and (found == _FASTMCP4_ELICIT or _matches(_BACK_CHANNEL, name, found))
    if not known or _echoed(arguments):
        return None
    return text[:200]


def _echoed(arguments: object) -> bool:
    if not arguments:
        return False
    said = json.dumps(arguments, ensure_ascii=False)
    return any(sign in said for sign in _SIGNS)


def legacy_refusal(answer: jsonrpc.Response, name: str, own_state: Callable[[object], bool]) -> str | None:
    """The reason if `answer` (to a call of tool `name` sent the legacy way) says the tool asks natively only:
    FastMCP 4.2.3's JSON-RPC refusal (whole message), or the upstream's own `input_required` result arriving
    on a legacy session (not the proxy's: `own_state(requestState)` tells its parked call's handle, the
    legacy way's own rounds)."""
    if isinstance(answer, jsonrpc.Result):
        if answer.result.get("resultType") != mcp.RESULT_INPUT_REQUIRED:
            return None
        if own_state(answer.result.get("requestState")):
            return None
        return "input_required on a legacy session"
    text = answer.error.message
    if answer.error.code == jsonrpc.INVALID_PARAMS and _matches(_FASTMCP4_NATIVE_ONLY, name, text):
        return text[:200]
    return None


def with_hint(answer: jsonrpc.Response) -> jsonrpc.Response:
    """The upstream's refusal, with `HINT` appended (a JSON-RPC error's message, or a text block)."""
    if isinstance(answer, jsonrpc.Error):
        return jsonrpc.error(
            answer.id, answer.error.code, f"{answer.error.message} ({HINT})", answer.error.data
        )
    content = list(answer.result.get("content") or [])
    content.append({"type": "text", "text": HINT})
    return jsonrpc.Result(answer.id, {**answer.result, "content": content})


class ToolPaths:
    """Which way each tool of each upstream goes: `legacy_tools` (configured), and what was learned."""

    def __init__(self, upstreams: Mapping[str, UpstreamConfig]) -> None:
        self._configured = {name: frozenset(up.legacy_tools) for name, up in upstreams.items()}
        self._learns = {name: up.learn_legacy_tools for name, up in upstreams.items()}
        self._legacy: dict[str, dict[str, None]] = {name: {} for name in upstreams}  # insertion-ordered
        self._native: dict[str, dict[str, None]] = {name: {} for name in upstreams}
        self._answered: dict[str, dict[str, None]] = {name: {} for name in upstreams}  # legacy way worked
        self._tool_lists: dict[str, frozenset[str]] = {}

    def legacy(self, upstream: str, name: object) -> bool:
        """Whether a 2026-07-28 call of tool `name` goes the legacy way (listed or learned)."""
        return name in self._configured[upstream] or name in self._legacy[upstream]

    def native(self, upstream: str, name: object) -> bool:
        """Whether a legacy client's call of `name` goes straight at 2026-07-28 (it was seen asking natively
        only), unless it is listed in `legacy_tools`."""
        return name in self._native[upstream] and name not in self._configured[upstream]

    def answered(self, upstream: str, name: object) -> bool:
        """Whether a legacy client's call of `name` was served the legacy way already (no refusal): its
        notifications need not wait for the answer (mirror/paths.py)."""
        return name in self._answered[upstream]

    def legacy_worked(self, upstream: str, name: str) -> None:
        if name not in self._answered[upstream]:
            _bounded_add(self._answered[upstream], name)

    def learns(self, upstream: str) -> bool:
        return self._learns[upstream]

    def learn_legacy(self, upstream: str, name: str, why: str) -> bool:
        """Remember that `name` asks inline only; True the first time (the one log line per tool)."""
        if name in self._legacy[upstream] or name in self._configured[upstream]:
            return False
        _bounded_add(self._legacy[upstream], name)
        self._native[upstream].pop(name, None)
        log.warning(
            "upstream.tool_learned",
            upstream=upstream,
            tool=name,
            path="legacy",
            why=why,
            pin=f"upstreams: [{{name: {upstream}, legacy_tools: [{name}]}}]",
        )
        return True

    def learn_native(self, upstream: str, name: str, why: str) -> bool:
        if name in self._native[upstream]:
            return False
        _bounded_add(self._native[upstream], name)
        log.info("upstream.tool_learned", upstream=upstream, tool=name, path="native", why=why)
        return True

    def tool_list(self, upstream: str, names: Iterable[str]) -> None:
        """The upstream's tools as a list answer shows them: a change forgets what was learned."""
        seen = frozenset(names)
        before = self._tool_lists.get(upstream)
        self._tool_lists[upstream] = seen
        if before is not None and before != seen:
            if self._legacy[upstream] or self._native[upstream]:
                log.info("upstream.tools_forgotten", upstream=upstream, reason="the tool list changed")
            self._legacy[upstream].clear()
            self._native[upstream].clear()
            self._answered[upstream].clear()

    def learned(self) -> dict[str, dict[str, list[str]]]:
        """What was learned, by upstream (for /readyz and /metrics): {"legacy": [...], "native": [...]}."""
        return {
            name: {"legacy": list(self._legacy[name]), "native": list(self._native[name])}
            for name in self._legacy
            if self._legacy[name] or self._native[name]
        }


def _bounded_add(names: dict[str, None], name: str) -> None:
    names[name] = None
    while len(names) > MAX_LEARNED:
        del names[next(iter(names))]


__all__ = ["HINT", "MAX_LEARNED", "ToolPaths", "legacy_refusal", "modern_refusal", "with_hint"]

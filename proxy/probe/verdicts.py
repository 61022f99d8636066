"""Findings → a verdict per feature (works / works with limits / will not work, with the reason) and the
YAML upstream block for `mrtr-proxy serve --config`. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

import yaml

from proxy.probe.asks import classify, needs_legacy_tools
from proxy.probe.findings import Check, Findings, ModernSide, ToolClass
from proxy.wire import mcp

Status = Literal["works", "works with limits", "will not work"]
WORKS: Final = "works"
LIMITS: Final = "works with limits"
NO: Final = "will not work"


@dataclass(frozen=True, slots=True)
class Verdict:
    feature: str
    status: Status
    reason: str


def verdicts(f: Findings) -> tuple[Verdict, ...]:
    if f.transport is None:
        return (Verdict("fronting", NO, f.error or "no MCP server answered"),)
    if f.modern_era:
        return modern_verdicts(f)
    out = [_fronting(f)]
    if f.authorization is not None and f.negotiated is None:
        return tuple(out)  # behind OAuth and no token given: nothing else could be seen
    out += [_mid_call_input(f), _failover(f), _legacy_clients(f), _outside_calls(f), _notifications(f)]
    if f.call is not None:
        out.append(_call(f))
    return tuple(out)


def cannot_front(f: Findings) -> bool:
    """True when the proxy cannot front this server at all (the CLI exits non-zero)."""
    return any(v.feature == "fronting" and v.status == NO for v in verdicts(f))


def _fronting(f: Findings) -> Verdict:
    auth = f.authorization
    if auth is not None:
        where = ", ".join(auth.authorization_servers) or "an authorization server it does not name"
        scopes = f" with scopes {' '.join(auth.scopes)}" if auth.scopes else ""
        why = (
            f"needs OAuth (HTTP {auth.status}): clients bring a token from {where}{scopes}; auth.mode "
            "passthrough relays it and the server's challenges and serves its metadata with `resource` set "
            "to the proxy's URL, so the server must accept tokens for that audience (else auth.mode "
            "validate with a service credential upstream; docs/authorization.md)"
        )
        if f.negotiated is None:
            why += "; run probe again with --header 'Authorization: Bearer …' to see the rest"
        return Verdict("fronting", LIMITS, why)
    if f.negotiated is None:
        return Verdict("fronting", NO, f.error or "initialize did not succeed")
    if f.negotiated not in mcp.LEGACY_VERSIONS:
        return Verdict(
            "fronting",
            NO,
            f"it answers initialize with protocol version {f.negotiated}, not one of "
            f"{', '.join(mcp.LEGACY_VERSIONS)}",
        )
    return Verdict("fronting", WORKS, f"legacy MCP over {f.transport}, speaks {f.negotiated}")


def _mid_call_input(f: Findings) -> Verdict:
    versions = f.accepted_versions
    if versions and max(versions) < "2025-06-18":
        return Verdict(
            "mid-call input (MRTR)",
            LIMITS,
            "only 2024-11-05: sampling and roots become input_required rounds, elicitation does not exist",
        )
    post = f.transports.get("streamable_http")
    if post is not None and post.detail == "application/json":  # every POST answered JSON, never a stream
        if f.session.get_stream.answer != "yes":
            return Verdict(
                "mid-call input (MRTR)",
                NO,
                "POSTs answer application/json and there is no GET stream: "
                "a server request mid-call has no way back",
            )
        return Verdict(
            "mid-call input (MRTR)",
            LIMITS,
            "POSTs answer application/json: only server requests sent on the GET stream reach the client; "
            "a tool that asks inline (related to its call) never gets its answer",
        )
    return Verdict(
        "mid-call input (MRTR)",
        WORKS,
        "elicitation, sampling and roots sent mid-call become input_required rounds; every tools/call, "
        "prompts/get and resources/read is run as a call that can park",
    )


def _failover(f: Findings) -> Verdict:
    name = "owner failover of a parked call"
    if f.transport != "streamable-http":
        return Verdict(
            name,
            NO,
            f"a session over {f.transport} lives in one replica: if it dies, the call is lost, not replayed",
        )
    if f.resumability.resumable == "yes":
        return Verdict(name, WORKS, f"the server resumes a dropped stream ({f.resumability.detail})")
    if f.resumability.resumable == "unknown":
        return Verdict(
            name,
            LIMITS,
            f"not verified ({f.resumability.detail}): a parked call is taken over only if the server replays "
            "its stream after Last-Event-ID, else it is answered 'call lost, not replayed'",
        )
    return Verdict(
        name,
        NO,
        f"{f.resumability.detail}: if the owning replica dies, its parked calls are answered "
        "'call lost, not replayed'",
    )


def _legacy_clients(f: Findings) -> Verdict:
    name = "legacy clients through the proxy"
    if f.transport == "streamable-http":
        return Verdict(name, WORKS, "stateless relay: any replica serves any legacy session")
    return Verdict(
        name,
        LIMITS,
        f"bridged: a legacy session lives in the replica that opened its session over {f.transport}, "
        "so route legacy clients stickily",
    )


def _outside_calls(f: Findings) -> Verdict:
    name = "server requests outside calls"
    seen = f.session.requests_outside_calls
    if not seen:
        return Verdict(name, WORKS, "none seen while probing")
    what = ", ".join(seen)
    if set(seen) <= {mcp.ROOTS, mcp.PING}:
        return Verdict(
            name, LIMITS, f"sent {what} with no call in flight: set upstreams[].static_roots to answer it"
        )
    return Verdict(name, LIMITS, f"sent {what} with no call in flight: refused, as no client can be asked")


def _notifications(f: Findings) -> Verdict:
    name = "subscriptions/listen"
    caps = f.capabilities
    announced = [
        kind for kind in ("tools", "prompts", "resources")
        if isinstance(caps.get(kind), dict) and caps[kind].get("listChanged")
    ]  # fmt: skip
    if isinstance(caps.get("resources"), dict) and caps["resources"].get("subscribe"):
        announced.append("resources/updated")
    if f.transport == "streamable-http" and f.session.get_stream.answer != "yes":
        return Verdict(name, LIMITS, "no standalone GET stream: session-wide notifications never arrive")
    if not announced:
        return Verdict(name, LIMITS, "the server announces no list changes or subscriptions")
    return Verdict(name, WORKS, f"relays {', '.join(announced)}")


def _call(f: Findings) -> Verdict:
    call = f.call
    assert call is not None
    name = f"tools/call {call.name}"
    asked = ", ".join(call.server_requests)
    if call.outcome in ("result", "tool_error"):
        how = f"asked {asked}: becomes input_required round(s)" if asked else "asked nothing: one round"
        return Verdict(
            name, WORKS, f"{how}; ended with a {'tool error' if call.outcome == 'tool_error' else 'result'}"
        )
    return Verdict(name, LIMITS, f"{call.outcome}: {call.detail}" + (f" (asked {asked})" if asked else ""))


# -- a 2026-07-28 server ------------------------------------------------------------------------------------


def modern_verdicts(f: Findings) -> tuple[Verdict, ...]:
    """What the proxy does with a server that answers `server/discover` (era `modern`, or `both` when it
    answers the legacy `initialize` too). Each verdict is from a request the probe made, not assumed."""
    modern = f.modern
    assert modern is not None
    both = f.era == "both"
    speaks = f"2026-07-28 ({', '.join(modern.versions)})" + (
        f" and legacy ({f.negotiated})" if both else " only"
    )
    out = [
        Verdict(
            "fronting",
            WORKS,
            f"a modern MCP server over {f.transport or 'streamable-http'}: speaks {speaks}; "
            f"era: {'both (two eras)' if both else 'modern'}",
        ),
        _modern_clients(modern, both),
        _modern_legacy_clients(f, both),
        _listen(modern.listen),
        _tasks(modern.tasks),
    ]
    if both:  # legacy clients, and legacy_tools, run on its legacy sessions: what the legacy steps saw
        out += [_mid_call_input(f), _failover(f), _outside_calls(f)]
    if (found := classify(f)) is not None:
        out.append(_classified(f, found))
    return tuple(out)


def _modern_clients(modern: ModernSide, both: bool) -> Verdict:
    name = "2026-07-28 clients"
    if modern.tools_listed.answer != "yes":
        return Verdict(name, LIMITS, f"server/discover answered but tools/list at 2026-07-28 failed: "
                       f"{modern.tools_listed.detail}")  # fmt: skip
    return Verdict(
        name,
        WORKS,
        f"native relay (tools/list answered at 2026-07-28: {modern.tools_listed.detail}): each request goes "
        "upstream as it came, the server's own input_required rounds come back and retries go upstream "
        "from any replica (nothing parks in the proxy)"
        + (
            "; a tool that asks inline is refused at 2026-07-28: its first call fails as it does going "
            "direct (with a hint), the proxy learns it (upstreams[].learn_legacy_tools) and runs its next "
            "calls on a legacy session; list it in upstreams[].legacy_tools to skip that first failure "
            "(probe --call NAME classifies one)"
            if both
            else ""
        ),
    )


def _modern_legacy_clients(f: Findings, both: bool) -> Verdict:
    name = "legacy clients through the proxy"
    modern = f.modern
    assert modern is not None
    if both:
        tools = len(f.of_kind("tool"))
        inline = _mid_call_input(f)
        if inline.status == NO:
            return Verdict(
                name,
                LIMITS,
                f"the server answers their initialize itself (negotiated {f.negotiated}, {tools} tools), but "
                f"its legacy side cannot ask mid-call ({inline.reason}): its inline-asking tools fail for "
                "them as going direct; its native tools are served through the mirror",
            )
        return Verdict(
            name,
            WORKS,
            f"the server answers their initialize itself (negotiated {f.negotiated}, {tools} tools listed at "
            "that version): a legacy client speaks legacy to it as it would going direct, so its "
            "inline-asking tools ask it inline; a tool that only asks the 2026-07-28 way is served through "
            "the mirror",
        )
    if modern.tools_listed.answer != "yes":
        return Verdict(
            name,
            NO,
            "the mirror (the proxy as their legacy server, a 2026-07-28 client upstream) lists from the "
            f"server's 2026-07-28 tools/list, which failed: {modern.tools_listed.detail}",
        )
    return Verdict(
        name,
        WORKS,
        "the mirror: the proxy is their legacy server (initialize answered from server/discover, tools/list "
        f"at 2026-07-28 answered: {modern.tools_listed.detail}) and a 2026-07-28 client upstream; the "
        "server's input_required rounds are asked of them inline on the call's stream (this server refuses "
        "their initialize itself)",
    )


def _listen(check: Check) -> Verdict:
    name = "subscriptions/listen"
    if check.answer == "yes":
        return Verdict(name, WORKS, f"relayed to the server's own subscriptions/listen: {check.detail}")
    return Verdict(
        name,
        LIMITS,
        f"the server's subscriptions/listen did not open ({check.detail}): a client's listen gets the same "
        "answer through the proxy, and list changes are seen only by listing again",
    )


def _tasks(check: Check) -> Verdict:
    name = "tasks"
    if check.answer == "yes":
        return Verdict(name, WORKS, f"relayed (tasks/get, tasks/update, tasks/cancel): {check.detail}")
    return Verdict(
        name,
        LIMITS,
        f"the server has no tasks ({check.detail}): a 2026-07-28 call through the proxy is answered by the "
        "server directly, never as a task",
    )


def _classified(f: Findings, found: ToolClass) -> Verdict:
    name = f"tools/call {found.name}"
    if found.asks == "asks natively":
        return Verdict(
            name, WORKS, f"asks natively ({found.evidence}): its rounds pass through the native relay"
        )
    if found.asks == "asks nothing":
        return Verdict(name, WORKS, f"asks nothing ({found.evidence})")
    if found.asks == "asks inline" and f.era == "both":
        return Verdict(
            name,
            LIMITS,
            f"asks inline ({found.evidence}): at 2026-07-28 the server refuses it, so it goes in "
            f"upstreams[].legacy_tools (in the block below): the proxy then runs it on a legacy session, "
            "where its questions become input_required rounds, for clients of both eras",
        )
    if found.asks == "asks inline":
        return Verdict(
            name,
            NO,
            f"asks inline ({found.evidence}) and the server has no legacy side to run it on: it fails "
            "through the proxy as it does for any 2026-07-28 client",
        )
    return Verdict(name, LIMITS, f"not classified: {found.evidence}")


# -- the YAML block ---------------------------------------------------------------------------------------


def upstream_name(f: Findings) -> str:
    """A config-valid upstream name ([a-z0-9][a-z0-9-]{0,62}) from the server's name."""
    raw = str(f.server_info.get("name") or "upstream").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", raw).strip("-")[:63].strip("-")
    return slug or "upstream"


def upstream_block(f: Findings) -> dict[str, Any] | None:
    """The `upstreams:` entry for this server, or None when it cannot be fronted."""
    if f.transport is None or cannot_front(f):
        return None
    entry: dict[str, Any] = {"name": upstream_name(f)}
    if f.transport == "stdio":
        entry["command"] = f.command[0]
        if f.command[1:]:
            entry["args"] = list(f.command[1:])
        if f.env:
            entry["env"] = dict(f.env)
        if f.cwd is not None:
            entry["cwd"] = f.cwd
    else:
        entry["url"] = f.url
        entry["transport"] = f.transport
    if f.era == "modern":
        entry["era"] = "modern"  # modern only: nothing to probe for (auto would find it too)
    if legacy_tools := needs_legacy_tools(f):
        entry["legacy_tools"] = list(legacy_tools)
    accepted = f.accepted_versions
    if accepted and accepted != mcp.LEGACY_VERSIONS:
        entry["protocol_versions"] = list(accepted)
    if f.authorization is not None:
        entry["auth"] = {
            "mode": "passthrough"
        }  # the default, spelled out: the upstream is the resource server
    return entry


def config_yaml(f: Findings) -> str | None:
    """A whole configuration file serving this server (what `mrtr-proxy serve --config` reads)."""
    entry = upstream_block(f)
    if entry is None:
        return None
    head = (
        f"# mrtr-proxy probe {f.target}\n"
        "# sealing keys: add keys.files or keys.dirs (see config/example.yaml)\n"
    )
    return head + yaml.safe_dump({"upstreams": [entry]}, sort_keys=False, default_flow_style=False)

"""Findings and verdicts rendered for a person (text) or a script (JSON). Pure."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from proxy.probe.asks import classify
from proxy.probe.findings import Findings
from proxy.probe.verdicts import cannot_front, config_yaml, upstream_block, verdicts
from proxy.wire import mcp

_KINDS = (
    ("tool", "tools"),
    ("prompt", "prompts"),
    ("resource", "resources"),
    ("resource_template", "templates"),
)
_TRANSPORT_NAMES = {
    "streamable_http": "Streamable HTTP POST",
    "get_stream": "standalone GET stream",
    "http_sse": "HTTP+SSE (2024-11-05)",
    "stdio": "stdio",
    "legacy_initialize": "legacy initialize",
}


def to_json(f: Findings) -> dict[str, Any]:
    """Everything, as JSON-ready values (stable keys; scripts read this)."""
    out = dataclasses.asdict(f)
    out["items"] = {plural: [dataclasses.asdict(i) for i in f.of_kind(kind)] for kind, plural in _KINDS}
    for item_list in out["items"].values():
        for item in item_list:
            item.pop("kind")
            item["mrtr"] = (
                True  # every tools/call, prompts/get and resources/read runs as a call that can park
            )
    out["command"] = list(f.command)
    out["accepted_versions"] = list(f.accepted_versions)
    out["era"] = f.era
    found = classify(f)
    out["tool_class"] = dataclasses.asdict(found) if found is not None else None
    out["verdicts"] = [dataclasses.asdict(v) for v in verdicts(f)]
    out["frontable"] = not cannot_front(f)
    out["upstream"] = upstream_block(f)
    out["config_yaml"] = config_yaml(f)
    return out


def to_json_text(f: Findings) -> str:
    return json.dumps(to_json(f), indent=2, sort_keys=False, default=list)


def to_text(f: Findings) -> str:
    lines = [f"mrtr-proxy probe: {f.target}"]
    for section in (_era, _server, _authorization, _items, _session, _call):
        part = section(f)
        if part:
            lines += ["", *part]
    lines += [f"note: {note}" for note in f.notes]
    lines += ["", "verdicts"]
    lines += [f"  {v.feature:<34} {v.status}: {v.reason}" for v in verdicts(f)]
    block = config_yaml(f)
    if block is not None:
        lines += ["", "configuration (mrtr-proxy serve --config FILE)", block.rstrip()]
    return "\n".join(lines) + "\n"


def _era(f: Findings) -> list[str]:
    m = f.modern
    if m is None:
        return []
    if m.era == "legacy":
        return ["era", f"  legacy: server/discover is not answered the 2026-07-28 way ({m.detail})"]
    lines = [
        "era",
        f"  {f.era}: server/discover answered, supportedVersions {', '.join(m.versions) or '?'}",
        "  legacy initialize        " + ("answered too (two eras)" if f.negotiated else "refused"),
        f"  tools/list at 2026-07-28 {m.tools_listed.answer} ({m.tools_listed.detail})",
    ]
    if m.tools:
        lines.append(f"  tools ({len(m.tools)})                {', '.join(m.tools)}")
    lines.append(f"  subscriptions/listen     {m.listen.answer} ({m.listen.detail})")
    lines.append(f"  tasks                    {m.tasks.answer} ({m.tasks.detail})")
    if m.call is not None:
        asked = f"; asks {', '.join(m.call.asks)}" if m.call.asks else ""
        lines.append(
            f"  --call {m.call.name} at 2026-07-28: {m.call.outcome}{asked} {m.call.detail}".rstrip()
        )
    if (found := classify(f)) is not None:
        lines.append(f"  {found.name}: {found.asks} ({found.evidence})")
    return lines


def _server(f: Findings) -> list[str]:
    if not f.transports:
        return []
    lines = ["transports"]
    for key, check in f.transports.items():
        detail = f" ({check.detail})" if check.detail else ""
        lines.append(f"  {_TRANSPORT_NAMES.get(key, key):<24} {check.answer}{detail}")
    if f.versions:
        accepted = ", ".join(v for v in mcp.LEGACY_VERSIONS if f.versions.get(v)) or "none"
        lines.append(f"  protocol versions        {accepted} (negotiated {f.negotiated or '-'})")
    if f.server_info:
        name, version = f.server_info.get("name", "?"), f.server_info.get("version", "?")
        lines.append(f"  server                   {name} {version}")
    if f.capabilities:
        lines.append(f"  capabilities             {', '.join(sorted(f.capabilities))}")
    return lines


def _authorization(f: Findings) -> list[str]:
    a = f.authorization
    if a is None:
        return []
    lines = ["authorization", f"  HTTP {a.status}  WWW-Authenticate: {a.www_authenticate}"]
    lines.append(f"  protected-resource metadata  {a.metadata_url or 'none found'}")
    if a.authorization_servers:
        lines.append(f"  authorization servers        {', '.join(a.authorization_servers)}")
    if a.scopes:
        lines.append(f"  scopes                       {' '.join(a.scopes)}")
    if a.detail:
        lines.append(f"  {a.detail}")
    return lines


def _items(f: Findings) -> list[str]:
    if not f.items:
        return []
    lines = ["offered (each runs as a call that can go input_required through the proxy)"]
    for kind, plural in _KINDS:
        items = f.of_kind(kind)
        if items:
            lines.append(f"  {plural} ({len(items)})")
            for item in items:
                notes = ", ".join(f"{k}={json.dumps(v)}" for k, v in item.annotations.items())
                lines.append(f"    {item.name}" + (f"  [{notes}]" if notes else ""))
    return lines


def _session(f: Findings) -> list[str]:
    if f.negotiated is None:
        return []
    s = f.session
    lines = ["session and streams"]
    if s.session_id_issued is not None:
        lines.append(f"  Mcp-Session-Id issued    {'yes' if s.session_id_issued else 'no'}")
    lines.append(f"  resumable (Last-Event-ID) {f.resumability.resumable}: {f.resumability.detail}")
    lines.append(f"  requests outside calls   {', '.join(s.requests_outside_calls) or 'none seen'}")
    if s.get_stream.answer == "yes":
        lines.append(f"  requests on GET stream   {', '.join(s.requests_on_get_stream) or 'none seen'}")
    if s.delete.answer != "not tried":
        lines.append(f"  DELETE session           {s.delete.answer} ({s.delete.detail})")
    lines.append(f"  idle expiry              {s.idle_expiry}")
    return lines


def _call(f: Findings) -> list[str]:
    c = f.call
    if c is None:
        return []
    lines = [f"--call {c.name}: {c.outcome}; asked {', '.join(c.server_requests) or 'nothing'}"]
    if c.detail:
        lines.append(f"  {c.detail}")
    return lines

"""What a probe observed about one legacy MCP server: frozen values, built by the I/O edges (http, stdio).

Nothing here does I/O. `verdicts` turns findings into per-feature verdicts, `report` into text, JSON and
the YAML upstream block.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from proxy.wire import jsonrpc, mcp

Transport = Literal["streamable-http", "sse", "stdio"]
# The probe's own classification of a server's era: `both` answers `server/discover` and `initialize` (a
# two-era server: FastMCP 4.2.3, tmcp 1.20.0). The same three words the proxy's upstream verdict uses.
ProbeEra = Literal["legacy", "modern", "both"]
# How a called tool asks for input: inline (server-initiated requests on a legacy session: refused at
# 2026-07-28, so it belongs in `legacy_tools`), natively (an `input_required` result), or not at all.
Asks = Literal["asks inline", "asks natively", "asks nothing", "unknown"]
Answer = Literal["yes", "no", "not tried"]
Resumable = Literal["yes", "no", "unknown", "not applicable"]


@dataclass(frozen=True, slots=True)
class Check:
    """One transport-level question: did it answer, and what was seen (`detail`, one line)."""

    answer: Answer
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Item:
    """A tool, prompt, resource or resource template as the server listed it."""

    kind: Literal["tool", "prompt", "resource", "resource_template"]
    name: str
    title: str | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Resumability:
    """Whether a dropped response stream came back with `GET` + `Last-Event-ID`."""

    resumable: Resumable
    detail: str


@dataclass(frozen=True, slots=True)
class Authorization:
    """A 401/403 and the RFC 9728 protected-resource metadata it led to."""

    status: int
    www_authenticate: str
    metadata_url: str | None = None
    metadata: Mapping[str, Any] | None = None
    authorization_servers: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CallProbe:
    """What `--call NAME` saw: the server requests the tool sent, and how it ended."""

    name: str
    server_requests: tuple[str, ...]
    outcome: Literal["result", "tool_error", "error", "timeout"]
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Session:
    """Session behaviour: a session id issued, the standalone GET stream, server requests outside calls."""

    session_id_issued: bool | None = None  # None: the transport has no session header (sse, stdio)
    get_stream: Check = Check("not tried")
    requests_outside_calls: tuple[str, ...] = ()  # server→client methods seen with no call in flight
    requests_on_get_stream: tuple[str, ...] = ()  # those (in calls or not) that came on the GET stream
    delete: Check = Check("not tried")
    idle_expiry: str = "not observed (it would take the server's idle timeout to see)"


@dataclass(frozen=True, slots=True)
class ModernCall:
    """What `--call NAME` saw at 2026-07-28: answered `input_required` natively (asking `asks`), or not."""

    name: str
    outcome: Literal["input_required", "result", "tool_error", "error", "timeout"]
    asks: tuple[str, ...] = ()  # the methods of its inputRequests
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ToolClass:
    """The `--call` tool classified from what both eras' calls showed (`evidence`, one line)."""

    name: str
    asks: Asks
    evidence: str


@dataclass(frozen=True, slots=True)
class ModernSide:
    """What the probe's first request, a 2026-07-28 `server/discover`, found (as upstream/era.py judges)."""

    era: Literal["legacy", "modern"]
    detail: str = ""  # a legacy server's answer, or a modern server's error
    versions: tuple[str, ...] = ()  # supportedVersions
    server_info: Mapping[str, Any] = field(default_factory=dict)
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    tools_listed: Check = Check("not tried")  # `tools/list` at 2026-07-28 (what the mirror lists from)
    call: ModernCall | None = None
    listen: Check = Check("not tried")  # `subscriptions/listen`: acknowledged or held open, or refused
    tasks: Check = Check("not tried")  # the Tasks extension: declared, and `tasks/get` answered


@dataclass(frozen=True, slots=True)
class Findings:
    target: str  # the URL, or the command line
    transport: Transport | None  # the one the YAML block uses; None: nothing MCP answered
    transports: Mapping[str, Check] = field(
        default_factory=dict
    )  # streamable_http, get_stream, http_sse, stdio
    versions: Mapping[str, bool | None] = field(default_factory=dict)  # offered alone → echoed?
    negotiated: str | None = None
    server_info: Mapping[str, Any] = field(default_factory=dict)
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    items: tuple[Item, ...] = ()
    resumability: Resumability = Resumability("unknown", "not probed")
    authorization: Authorization | None = None
    session: Session = Session()
    call: CallProbe | None = None
    url: str | None = None
    command: tuple[str, ...] = ()
    cwd: str | None = None  # where the command ran (stdio), so relative paths in it resolve the same way
    env: Mapping[str, str] = field(default_factory=dict)  # stdio: the --env variables it ran with
    error: str | None = None  # why nothing could be probed (one line)
    notes: tuple[str, ...] = ()  # lesser problems met on the way (one line each)
    modern: ModernSide | None = None  # HTTP: the server/discover probe (None: not tried, or undecided)

    @property
    def modern_era(self) -> bool:
        return self.modern is not None and self.modern.era == "modern"

    @property
    def era(self) -> ProbeEra | None:
        """`both` when `server/discover` and the legacy `initialize` were both answered; None: nothing
        answered either (or only a 401/403)."""
        if self.modern_era:
            return "both" if self.negotiated is not None else "modern"
        return "legacy" if self.negotiated is not None else None

    @property
    def accepted_versions(self) -> tuple[str, ...]:
        return tuple(v for v in mcp.LEGACY_VERSIONS if self.versions.get(v))

    def of_kind(self, kind: str) -> tuple[Item, ...]:
        return tuple(i for i in self.items if i.kind == kind)


def item_from(
    kind: Literal["tool", "prompt", "resource", "resource_template"], raw: jsonrpc.JSONObject
) -> Item:
    """Parse one entry of a list result (unknown shapes become an item named '?')."""
    key = "uriTemplate" if kind == "resource_template" else "uri" if kind == "resource" else "name"
    name = raw.get(key)
    title = raw.get("title") if isinstance(raw.get("title"), str) else None
    annotations = raw.get("annotations")
    return Item(
        kind,
        name if isinstance(name, str) else "?",
        title,
        dict(annotations) if isinstance(annotations, dict) else {},
    )

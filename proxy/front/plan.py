"""Which job serves a request, decided once from what is known of it: a pure function, no I/O.

The endpoint (front/endpoint.py) learns the client's era from what the request carries, the route from the
path or Host, the upstream's era verdict (upstream/era.py) and transport from its configuration and probe,
and, for a `tools/call`, the way its tool goes (upstream/tool_paths.py). `plan` turns these into the one job
that serves the request; that job's module takes the request from there and never hands it back. A job that
finds the upstream's era was wrong before anything was processed raises `WrongEra`; the endpoint asks the era
again and plans once more, in one place.

The jobs, in the words the code, the tests and docs/architecture.md use:

- `ADAPT`: the proxy's own 2026-07-28 pipeline over a legacy session — its calls' inline requests become
  `input_required` rounds (the call service), lists and completion forwarded, `ping` and the proxy's own
  tasks answered here;
- `RELAY`: a 2026-07-28 request relayed natively to a 2026-07-28 (or two-era) upstream;
- `LISTEN`: `subscriptions/listen` served by the proxy (a legacy upstream, or every member of a route);
- `AGGREGATE`: a request on an aggregated route — the route answers it (lists, discover) or names the member
  upstream it goes to, planned again as a `MEMBER` request;
- `MIRROR`: a legacy client of a 2026-07-28 or two-era upstream (or of an aggregated route): the proxy plays
  the legacy server and drives the modern rounds;
- `PASS_THROUGH`: a legacy client relayed byte for byte to its legacy Streamable HTTP upstream;
- `BRIDGE`: a legacy client of an `sse` or `stdio` upstream;
- `REFUSE`: nothing here serves it (a legacy client of an aggregated route without the mirror).

An `UNKNOWN` era is taken as legacy, as the era book itself does when a probe decides nothing; `needs_era`
says when the verdict matters, so the endpoint probes only then.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from proxy.wire import mcp


class ClientEra(StrEnum):
    LEGACY = "legacy"  # 2024-11-05 … 2025-11-25: a session, `initialize`
    MODERN = "modern"  # 2026-07-28: every request carries its `_meta` protocol version


class RouteKind(StrEnum):
    OWN = "own"  # an upstream's own route (`/servers/<name>/mcp`, its host, or the default)
    AGGREGATED = "aggregated"  # an aggregated route (proxy/routes/), before it named a member
    MEMBER = "member"  # the member upstream an aggregated route named for the request


class UpstreamEra(StrEnum):
    LEGACY = "legacy"
    MODERN = "modern"
    BOTH = "both"  # a two-era server (era.py): answers `server/discover` and `initialize`
    UNKNOWN = "unknown"  # not probed yet (taken as legacy)


class Transport(StrEnum):
    STREAMABLE_HTTP = "streamable-http"
    SSE = "sse"  # HTTP+SSE, 2024-11-05: legacy by definition
    STDIO = "stdio"


class ToolPath(StrEnum):
    UNSET = "unset"  # not a tools/call, or its tool has no known way
    LEGACY = "legacy"  # in the upstream's `legacy_tools`, or learned asking inline only


class LegacySession(StrEnum):
    NONE = "none"  # no `Mcp-Session-Id`: an `initialize` (or a request that lost its session)
    RELAYED = "relayed"  # a session id that is not the mirror's (the relay's or the bridge's)
    MIRRORED = "mirrored"  # a mirror session id (handle/mirror_ids.py)


class Job(StrEnum):
    ADAPT = "adapt"
    RELAY = "relay"
    LISTEN = "listen"
    AGGREGATE = "aggregate"
    MIRROR = "mirror"
    PASS_THROUGH = "pass_through"  # noqa: S105 (a job's name)
    BRIDGE = "bridge"
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True)
class Situation:
    """What is known of a request when its job is chosen."""

    client: ClientEra
    route: RouteKind
    era: UpstreamEra
    transport: Transport
    method: str  # the JSON-RPC method ("" for a GET, a DELETE, or a client's response)
    tool: ToolPath = ToolPath.UNSET  # a modern client's tools/call: the way its tool goes
    session: LegacySession = LegacySession.NONE  # a legacy client's session id, by kind
    parked: bool = False  # a modern retry whose requestState is a call this proxy parked
    own_task: bool = False  # a modern tasks/* request naming one of this proxy's own task ids
    crosses: bool = True  # the proxy serves across eras: the native relay (modern) / the mirror (legacy)


class WrongEra(Exception):
    """Raised by a job that found the upstream's era wrong before anything of the request was processed: the
    endpoint suspects the verdict, asks the era again and plans once more."""

    def __init__(self, upstream: str, reason: str, cause: BaseException | None = None) -> None:
        super().__init__(reason)
        self.upstream = upstream
        self.reason = reason
        self.cause = cause


_SPEAKS_MODERN = frozenset({UpstreamEra.MODERN, UpstreamEra.BOTH})


def needs_era(s: Situation) -> bool:
    """Whether the upstream's era verdict can change the job of `s` (its own `era` aside): the endpoint probes
    for it only then. A modern request the proxy serves whatever the era (`ping`, its own tasks, a
    `legacy_tools` call, a retry of a call parked here) and a legacy client's request of a session do not
    wait on a probe."""
    if s.route is RouteKind.AGGREGATED or not s.crosses:
        return False
    if s.client is ClientEra.MODERN:
        return not (
            s.method == "ping"
            or s.own_task
            or s.parked
            or (s.method == "tools/call" and s.tool is ToolPath.LEGACY)
        )
    return s.session is LegacySession.NONE and s.transport is not Transport.SSE and s.method == "initialize"


def plan(s: Situation) -> Job:
    """The one job that serves the request `s` describes."""
    if s.client is ClientEra.LEGACY:
        return _legacy(s)
    if s.route is RouteKind.AGGREGATED:
        return Job.LISTEN if s.method == mcp.LISTEN else Job.AGGREGATE
    if s.method == "ping" or s.own_task or (s.method == "tools/call" and s.tool is ToolPath.LEGACY):
        return Job.ADAPT  # the proxy answers ping; its own tasks and a legacy_tools call are its calls
    if s.crosses and s.era in _SPEAKS_MODERN:
        return Job.RELAY
    return Job.LISTEN if s.method == mcp.LISTEN else Job.ADAPT


def _legacy(s: Situation) -> Job:
    if s.route is not RouteKind.OWN:  # the route's naming, lists and policy live in the modern front
        return Job.MIRROR if s.crosses else Job.REFUSE
    if s.transport is Transport.SSE:
        return Job.BRIDGE
    if s.crosses and (
        s.session is LegacySession.MIRRORED
        or (s.session is LegacySession.NONE and s.method == "initialize" and s.era in _SPEAKS_MODERN)
    ):
        return Job.MIRROR
    return Job.PASS_THROUGH if s.transport is Transport.STREAMABLE_HTTP else Job.BRIDGE

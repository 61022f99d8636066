"""The mirror's translation (front/legacy/mirror*.py): a legacy client in front, a 2026-07-28 server behind.

The reverse of the exchange (exchange.py): a modern upstream's `inputRequests` become the inline server
requests a legacy client knows (`elicitation/create` form and url, `sampling/createMessage`, `roots/list`),
and the client's answers become the retry's `inputResponses`. Only what the client declared at `initialize`
is asked of it; a request for an undeclared capability (which a conformant server never sends: the proxy
declares upstream exactly what the client declared) gets the answer a client without it gives, where a
result can say it — an elicitation is declined, the roots are none — and otherwise (sampling: no result
without a model) the call cannot go on. Also: the legacy client's capabilities as 2026-07-28
`clientCapabilities`, its requests with the per-request `_meta`, `initialize` answered from `server/discover`,
and results stripped of what a legacy client does not know. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.translate.capabilities import ClientCapabilities
from proxy.translate.validate import invalid_server_request
from proxy.wire import jsonrpc, mcp

# What a 2026-07-28 result carries that no legacy result has.
MODERN_ONLY_RESULT = frozenset({"resultType", "ttlMs", "cacheScope", "inputRequests", "requestState"})
# Server capabilities a legacy client knows (2025-11-25); the others (extensions, ...) are left out.
LEGACY_SERVER_CAPABILITIES = frozenset(
    {"tools", "prompts", "resources", "logging", "completions", "experimental", "tasks"}
)
UNKNOWN_SERVER = {"name": "unknown", "version": "0"}


def modern_capabilities(declared: object) -> dict[str, Any]:
    """A legacy client's declared `capabilities` as 2026-07-28 `clientCapabilities`: elicitation (its
    modes; a bare `elicitation: {}` is form mode), sampling (with its tools and context flags), roots."""
    caps = declared if isinstance(declared, dict) else {}
    out: dict[str, Any] = {}
    elicitation = caps.get("elicitation")
    if isinstance(elicitation, dict):
        modes: dict[str, Any] = {m: {} for m in ("form", "url") if isinstance(elicitation.get(m), dict)}
        out["elicitation"] = modes or {"form": {}}
    sampling = caps.get("sampling")
    if isinstance(sampling, dict):
        out["sampling"] = {k: {} for k in ("tools", "context") if isinstance(sampling.get(k), dict)}
    if isinstance(caps.get("roots"), dict):
        out["roots"] = {}
    return out


def legacy_version(requested: object) -> str:
    """The protocol version the mirror agrees with a legacy client: its own if the proxy knows it, else the
    newest legacy one (a client that does not speak it disconnects, as the lifecycle says)."""
    if isinstance(requested, str) and requested in mcp.LEGACY_VERSIONS:
        return requested
    return mcp.LEGACY_VERSIONS[0]


def client_info(params: Mapping[str, Any]) -> tuple[str, str]:
    info = params.get("clientInfo")
    info = info if isinstance(info, dict) else {}
    name, version = info.get("name"), info.get("version")
    return (
        name if isinstance(name, str) and name else "legacy-client",
        version if isinstance(version, str) else "",
    )


def modern_params(
    params: Mapping[str, Any],
    *,
    client: tuple[str, str],
    capabilities: Mapping[str, Any],
    log_level: str | None,
) -> dict[str, Any]:
    """A legacy request's params with the 2026-07-28 per-request `_meta` (the client's own `_meta`, its
    `progressToken` included, kept)."""
    meta = params.get("_meta")
    merged = dict(meta) if isinstance(meta, dict) else {}
    merged[mcp.META_PROTOCOL_VERSION] = mcp.MODERN_VERSION
    merged[mcp.META_CLIENT_INFO] = {"name": client[0], "version": client[1]}
    merged[mcp.META_CLIENT_CAPABILITIES] = dict(capabilities)
    if log_level is not None:  # a level the client asked for itself is kept
        merged.setdefault(mcp.META_LOG_LEVEL, log_level)
    return {**params, "_meta": merged}


def initialize_result(discover: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The legacy `initialize` result for a modern server's `DiscoverResult`."""
    caps = discover.get("capabilities")
    caps = caps if isinstance(caps, dict) else {}
    meta = discover.get("_meta")
    info = meta.get(mcp.META_SERVER_INFO) if isinstance(meta, dict) else None
    out: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": {k: v for k, v in caps.items() if k in LEGACY_SERVER_CAPABILITIES},
        "serverInfo": dict(info) if isinstance(info, dict) else dict(UNKNOWN_SERVER),
    }
    if isinstance(discover.get("instructions"), str):
        out["instructions"] = discover["instructions"]
    return out


def legacy_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 result as a legacy client gets it: without resultType and the caching hints."""
    return {k: v for k, v in result.items() if k not in MODERN_ONLY_RESULT}


@dataclass(frozen=True, slots=True)
class Ask:
    """One input request the client is asked inline."""

    key: str
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RoundPlan:
    """What to do with one `input_required` answer: ask the client `asks`; `answered` holds what the proxy
    answers itself (undeclared capabilities); `stop`, when set, says why the call cannot go on."""

    asks: tuple[Ask, ...] = ()
    answered: Mapping[str, Mapping[str, Any]] | None = None
    stop: str | None = None


def plan_round(input_requests: object, capabilities: Mapping[str, Any], id_prefix: str = "") -> RoundPlan:
    """The inline requests for a round's `inputRequests` (a missing or empty map: none; the retry follows
    at once with the server's `requestState`). A URL elicitation without `elicitationId` (optional at
    2026-07-28, required by 2025-11-25) gets `id_prefix` + its key."""
    if input_requests is None:
        return RoundPlan(answered={})
    if not isinstance(input_requests, dict):
        return RoundPlan(stop="the upstream sent inputRequests that is not an object")
    allowed = ClientCapabilities.from_declared(capabilities)
    asks: list[Ask] = []
    answered: dict[str, Mapping[str, Any]] = {}
    for key, entry in input_requests.items():
        method = entry.get("method") if isinstance(entry, dict) else None
        params = entry.get("params", {}) if isinstance(entry, dict) else None
        if method not in mcp.INPUT_REQUEST_METHODS or not isinstance(params, dict):
            return RoundPlan(
                stop=f"the upstream asked for input the proxy cannot relay (inputRequests[{key!r}])"
            )
        if method == mcp.ELICIT and params.get("mode") == "url" and "elicitationId" not in params:
            params = {**params, "elicitationId": f"{id_prefix}{key}"}
        problem = invalid_server_request(method, params)
        if problem is not None:
            return RoundPlan(stop=f"the upstream's inputRequests[{key!r}] is malformed: {problem}")
        if allowed.allows(method, params):
            asks.append(Ask(key, method, params))
        elif method == mcp.ELICIT:
            answered[key] = {"action": "decline"}
        elif method == mcp.ROOTS:
            answered[key] = {"roots": []}
        else:
            return RoundPlan(
                stop="the upstream asked for sampling, which your client did not declare at initialize"
            )
    return RoundPlan(tuple(asks), answered)


def input_response(method: str, answer: jsonrpc.Response) -> Mapping[str, Any] | str:
    """The `inputResponses` value for a client's answer to an inline request of `method`, or (a str) why
    the call cannot go on. The answer's result goes as it is: the upstream validates it (and asks again
    for what it finds wanting). An error stands for what a result can say where it can: an elicitation the
    client could not show is cancelled, roots it does not give are none; a refused sampling has no result."""
    if isinstance(answer, jsonrpc.Result):
        return answer.result
    if method == mcp.ELICIT:
        return {"action": "cancel"}
    if method == mcp.ROOTS:
        return {"roots": []}
    return f"your client refused {method} ({answer.error.code}: {answer.error.message[:200]})"


__all__ = [
    "Ask",
    "RoundPlan",
    "client_info",
    "initialize_result",
    "input_response",
    "legacy_result",
    "legacy_version",
    "modern_capabilities",
    "modern_params",
    "plan_round",
]

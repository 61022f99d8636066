"""Pure helpers of the legacy bridge (front/legacy/bridge/front.py): what it offers upstream, what it answers.

No I/O: the versions to offer for a legacy client's `initialize`, the capabilities to declare, the
`initialize` result to answer with, and the mapping of ids between the client and the upstream call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.upstream.base import ServerInfo
from proxy.wire import jsonrpc, mcp


def offered_versions(client_version: object, configured: tuple[str, ...]) -> tuple[str, ...]:
    """The client's protocol version first, then the older ones the upstream is configured with (newest
    first, as `upstreams[].protocol_versions` lists them; a version left out of it is never offered).

    When nothing fits — a version the proxy does not know as legacy (a typo, a newer one), or one older than
    every configured version — the configured versions are offered, and the client gets the one the upstream
    picks (a legacy client that does not support it disconnects, as the spec says)."""
    if not isinstance(client_version, str) or client_version not in mcp.LEGACY_VERSIONS:
        return configured
    return tuple(v for v in configured if v <= client_version) or configured


def declared_capabilities(params: Mapping[str, Any]) -> dict[str, Any]:
    """The client's legacy `capabilities` object as it is (not an object: none)."""
    caps = params.get("capabilities")
    return dict(caps) if isinstance(caps, dict) else {}


def initialize_result(info: ServerInfo) -> dict[str, Any]:
    """The upstream's `initialize` result, for the client."""
    out: dict[str, Any] = {
        "protocolVersion": info.protocol_version,
        "capabilities": dict(info.capabilities),
        "serverInfo": dict(info.server_info),
    }
    if info.instructions is not None:
        out["instructions"] = info.instructions
    return out


def with_id(response: jsonrpc.Response, rid: jsonrpc.RequestId) -> jsonrpc.Response:
    """The upstream's response under the client's own request id."""
    if isinstance(response, jsonrpc.Result):
        return jsonrpc.Result(rid, response.result)
    return jsonrpc.Error(rid, response.error)


def upstream_cancel(
    note: jsonrpc.Notification, client_id: jsonrpc.RequestId, upstream_id: jsonrpc.RequestId
) -> jsonrpc.Notification | None:
    """The client's `notifications/cancelled` for the upstream, when it names the call in flight (its
    client id becomes the upstream call's id); None when it names anything else — the client's ids mean
    nothing upstream, so passing it on could cancel an unrelated upstream request."""
    rid = note.params.get("requestId")
    if isinstance(rid, bool) or rid != client_id:
        return None
    return jsonrpc.Notification(note.method, {**note.params, "requestId": upstream_id})


__all__ = ["declared_capabilities", "initialize_result", "offered_versions", "upstream_cancel", "with_id"]

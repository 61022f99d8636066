"""A modern (2026-07-28) request as the front parsed and checked it (front/checks.py builds it).

It lives down here, below the call service and the Tasks extension, because both take it from the front.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from proxy.translate.capabilities import ClientCapabilities
from proxy.wire import mcp
from proxy.wire.jsonrpc import Request

_MODERN_META: Final = "io.modelcontextprotocol/"
# What never goes upstream: `task` on tools/call is the 2025-11-25 tasks opt-in, removed in SEP-2663
# (ignored: a legacy server could act on it).
_KEPT_BACK: Final = frozenset({"_meta", "requestState", "inputResponses"})
_KEPT_BACK_CALL: Final = _KEPT_BACK | {"task"}


def upstream_params(msg: Request) -> dict[str, Any]:
    """`msg`'s params as a legacy session sends them: less requestState, inputResponses (and a tools/call's
    `task`), its `_meta` less the 2026-07-28 keys (`io.modelcontextprotocol/…`)."""
    kept_back = _KEPT_BACK_CALL if msg.method == "tools/call" else _KEPT_BACK
    params = msg.params
    out = {k: v for k, v in params.items() if k not in kept_back}
    meta = params.get("_meta")
    if isinstance(meta, dict):
        upstream_meta = {k: v for k, v in meta.items() if not k.startswith(_MODERN_META)}
        if upstream_meta:
            out["_meta"] = upstream_meta
    return out


def client_info(msg: Request) -> Mapping[str, Any]:
    """The `io.modelcontextprotocol/clientInfo` of `msg`'s `_meta` ({} when it has none, or not an object)."""
    meta = msg.params.get("_meta")
    info = meta.get(mcp.META_CLIENT_INFO) if isinstance(meta, dict) else None
    return info if isinstance(info, dict) else {}


class ModernRequest:
    """A modern request that passed the front's checks, split into what goes upstream and what stays.

    `upstream_params` and `client_info` are derived from `request` when first read unless given: the native
    relay sends the request as it came and never reads them (the front's checks made them on every request).
    Treat it as frozen: nothing sets an attribute after construction but the derivation itself."""

    __slots__ = (
        "_client_info",
        "_upstream_params",
        "capabilities",
        "input_responses",
        "log_level",
        "request",
        "request_state",
    )
    FIELDS: Final = (  # every field, in constructor order
        "request",
        "upstream_params",
        "capabilities",
        "client_info",
        "request_state",
        "input_responses",
        "log_level",
    )

    def __init__(  # noqa: PLR0917 - positional as the dataclass init it replaces
        self,
        request: Request,
        upstream_params: Mapping[str, Any] | None,  # None: derived (the module's `upstream_params`)
        capabilities: ClientCapabilities,
        client_info: Mapping[str, Any] | None,  # None: derived (the module's `client_info`)
        request_state: str | None,
        input_responses: Mapping[str, Any],
        log_level: str | None = None,  # `io.modelcontextprotocol/logLevel`: the request's logging opt-in
    ) -> None:
        self.request = request
        self._upstream_params = upstream_params
        self.capabilities = capabilities
        self._client_info = client_info
        self.request_state = request_state
        self.input_responses = input_responses
        self.log_level = log_level

    @property
    def upstream_params(self) -> Mapping[str, Any]:
        """Params less requestState, inputResponses and modern _meta keys."""
        params = self._upstream_params
        if params is None:
            params = self._upstream_params = upstream_params(self.request)
        return params

    @property
    def client_info(self) -> Mapping[str, Any]:
        info = self._client_info
        if info is None:
            info = self._client_info = client_info(self.request)
        return info

    def __repr__(self) -> str:
        return f"ModernRequest({self.request!r}, request_state={self.request_state!r})"

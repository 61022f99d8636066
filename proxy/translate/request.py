"""A modern (2026-07-28) request as the front parsed and checked it (front/checks.py builds it).

It lives down here, below the call service and the Tasks extension, because both take it from the front.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.translate.capabilities import ClientCapabilities
from proxy.wire.jsonrpc import Request


@dataclass(frozen=True, slots=True)
class ModernRequest:
    """A modern request that passed the front's checks, split into what goes upstream and what stays."""

    request: Request
    upstream_params: Mapping[str, Any]  # params less requestState, inputResponses and modern _meta keys
    capabilities: ClientCapabilities
    client_info: Mapping[str, Any]
    request_state: str | None
    input_responses: Mapping[str, Any]
    log_level: str | None = None  # `io.modelcontextprotocol/logLevel`: the request's logging opt-in

"""The settings of a legacy session over HTTP, either transport (Streamable HTTP, HTTP+SSE): built from the
configuration by connect.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.config import MAX_MESSAGE_BYTES


@dataclass(frozen=True, slots=True)
class SessionSettings:
    url: str
    versions: tuple[str, ...]
    capabilities: Mapping[
        str, Any
    ]  # legacy capabilities declared at initialize; see ClientCapabilities.legacy
    headers: Mapping[str, str] = field(default_factory=dict)  # static + forwarded client headers
    initialize_timeout: float = 30.0
    connect_timeout: float = 10.0  # timeouts.connect_s (HTTP+SSE: until the stream's endpoint event)
    max_message_bytes: int = MAX_MESSAGE_BYTES  # a JSON body, an SSE line or event's data (bounded.py)


__all__ = ["SessionSettings"]

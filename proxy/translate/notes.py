"""Which of a call's upstream notifications one client request (one MRTR round) gets, and in what form.

Each round of a call is a request of its own: its progress notifications carry *its* `progressToken`, or
there are none if it gave none, and it gets `notifications/message` only if it opted in with
`io.modelcontextprotocol/logLevel`, at that level and above. Upstream, the call carries a token the proxy
chose (`call_progress_token`), stable across rounds and replicas, so every round's progress can be told
apart from anything else the session sends and re-labelled for whichever request is driving the call.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import RequestId

_RANK = {level: rank for rank, level in enumerate(mcp.LOG_LEVELS)}


def call_progress_token(call_id: str) -> str:
    """The progressToken the proxy sends upstream with a call (the client's own stay with their rounds)."""
    return f"mrtr-proxy/{call_id}"


def with_progress_token(params: Mapping[str, Any], token: RequestId) -> dict[str, Any]:
    """`params` with `_meta.progressToken` set to `token` (other `_meta` members kept)."""
    meta = params.get("_meta")
    return {**params, "_meta": {**(meta if isinstance(meta, dict) else {}), "progressToken": token}}


def log_level_problem(value: object) -> str | None:
    """Why a `_meta` logLevel value is not a log level (None: it is one)."""
    if isinstance(value, str) and value in _RANK:
        return None
    return f"params._meta[{mcp.META_LOG_LEVEL!r}] must be one of {', '.join(mcp.LOG_LEVELS)}"


def at_least(level: object, threshold: str) -> bool:
    """Is `level` (an upstream message's) at or above `threshold`? Unknown levels are not."""
    return isinstance(level, str) and level in _RANK and _RANK[level] >= _RANK[threshold]


@dataclass(frozen=True, slots=True)
class RoundScope:
    """What one client request asked to hear while it drives a call."""

    progress_token: RequestId | None = None
    log_level: str | None = None

    @classmethod
    def of(cls, params: Mapping[str, Any], log_level: str | None) -> RoundScope:
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        valid = isinstance(token, str | int) and not isinstance(token, bool)
        return cls(token if valid else None, log_level)

    def relay(self, note: jsonrpc.Notification, upstream_token: RequestId) -> jsonrpc.Notification | None:
        """The notification as this request gets it, or None when it must not see it."""
        if note.method == mcp.PROGRESS:
            if self.progress_token is None or note.params.get("progressToken") != upstream_token:
                return None
            return jsonrpc.Notification(mcp.PROGRESS, {**note.params, "progressToken": self.progress_token})
        muted = self.log_level is None or not at_least(note.params.get("level"), self.log_level)
        if note.method == mcp.LOG_MESSAGE and muted:
            return None
        return note

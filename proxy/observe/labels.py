"""The label values of the metrics, every one from a fixed set: methods, outcome classes, rejection reasons.

Anything else a client sends is counted as "other", so label cardinality is bounded whatever clients send;
upstream and tool names are the configured ones (`Metrics.upstream_label`, `metrics.tools`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from proxy.wire import jsonrpc, mcp

OTHER: Final = "other"
NONE: Final = "none"  # the request never got as far as naming a method / an upstream

METHODS: Final = frozenset(
    {
        "ping",
        "server/discover",
        "initialize",
        mcp.LISTEN,
        *mcp.MRTR_METHODS,
        *mcp.FORWARDED_METHODS,
        *mcp.TASK_METHODS,
    }
)
# The canonical line's outcome is "<class>" or "<class>:<detail>"; the class is the label.
OUTCOME_CLASSES: Final[Mapping[str, str]] = {
    "complete": "complete",
    "input_required": "input_required",
    "upstream_error": "upstream_error",  # the upstream's own JSON-RPC error, passed through
    "failed": "failed",  # ours: upstream failed or timed out, call lost, limits, bad inputResponses
    "upstream_failed": "failed",  # the same, for discover and relayed lists
    "refused": "refused",  # refused at the boundary (bad headers or body, origin, rate, draining)
    "method_not_allowed": "refused",
    "unknown_method": "unknown_method",
    "handle_rejected": "handle_rejected",
    "forwarded": "forwarded",  # relayed to the replica that owns the parked call
    "accepted": "accepted",  # a notification
    "relayed": "relayed",  # a legacy client's request, relayed as it is
    "task": "task",  # the call became a task (Tasks extension)
    "task_not_found": "task_not_found",
    "client_closed": "client_closed",  # a stream the client ended (listen, a legacy GET stream)
    "client_gone": "client_gone",  # the client hung up before its answer was written (status 499)
    "upstream_lost": "failed",  # a listen stream whose upstream session died
    "backlog_overflow": "failed",  # a listen stream whose client could not keep up
}
# HandleError reasons (handle/) and InvalidRequestState reasons (calls/outcomes.py).
REJECTION_REASONS: Final = frozenset(
    {
        "too_short", "too_long", "malformed", "unknown_version", "unknown_key", "auth_failed",
        "bad_claims", "expired", "not_yet_valid", "wrong_upstream", "wrong_principal", "wrong_target",
        "call_ended", "round_in_progress", "bad_pending_keys", "stale_round", "call_mismatch",
        "not_owner", "not_an_ask",
    }
)  # fmt: skip
UPSTREAM_ERROR_KINDS: Final = ("error_response", "failed", "timeout")  # what upstream_error_kind answers


def method_label(method: object) -> str:
    if method is None:
        return NONE
    if method in METHODS:
        return str(method)
    if isinstance(method, str) and method.startswith("notifications/"):
        return "notification"
    return OTHER


def outcome_class(outcome: object) -> str:
    if outcome is None:
        return NONE
    return OUTCOME_CLASSES.get(str(outcome).split(":", 1)[0], OTHER)


def rejection_reason(reason: object) -> str:
    return str(reason) if reason in REJECTION_REASONS else OTHER


_ERROR_KINDS: Final[Mapping[str, str]] = {
    f"failed:{jsonrpc.UPSTREAM_TIMEOUT}": "timeout",
    "upstream_failed": "failed",
    f"failed:{jsonrpc.UPSTREAM_FAILED}": "failed",
}


def upstream_error_kind(outcome: object) -> str | None:
    """What the upstream did wrong, if the line's outcome blames it: `error_response` (a JSON-RPC error of
    its own), `timeout` (silent for calls.call_timeout_s) or `failed` (unreachable, or failed mid-call)."""
    text = str(outcome)
    if text.startswith("upstream_error:"):
        return "error_response"
    return _ERROR_KINDS.get(text)

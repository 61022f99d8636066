"""The label values of the metrics, every one from a fixed set: methods, outcome classes, rejection reasons.

Anything else a client sends is counted as "other", so label cardinality is bounded whatever clients send;
upstream and tool names are the configured ones (`Metrics.upstream_label`, `metrics.tools`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from proxy.observe.line import Detail, Outcome
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
# The class of each outcome (observe/line.py) is its label; an outcome not here is counted as "other".
OUTCOME_CLASSES: Final[Mapping[Outcome, str]] = {
    Outcome.COMPLETE: "complete",
    Outcome.INPUT_REQUIRED: "input_required",
    Outcome.UPSTREAM_ERROR: "upstream_error",  # the upstream's own JSON-RPC error, passed through
    Outcome.FAILED: "failed",  # ours: upstream failed or timed out, call lost, limits, bad inputResponses
    Outcome.UPSTREAM_FAILED: "failed",  # the same, for discover and relayed lists
    Outcome.REFUSED: "refused",  # refused at the boundary (bad headers or body, origin, rate, draining)
    Outcome.UNKNOWN_METHOD: "unknown_method",
    Outcome.HANDLE_REJECTED: "handle_rejected",
    Outcome.FORWARDED: "forwarded",  # relayed to the replica that owns the parked call
    Outcome.ACCEPTED: "accepted",  # a notification
    Outcome.RELAYED: "relayed",  # a legacy client's request, relayed as it is
    Outcome.TASK: "task",  # the call became a task (Tasks extension)
    Outcome.TASK_NOT_FOUND: "task_not_found",
    Outcome.CLIENT_CLOSED: "client_closed",  # a stream the client ended (listen, a legacy GET stream)
    Outcome.CLIENT_GONE: "client_gone",  # the client hung up before its answer was written (status 499)
    Outcome.UPSTREAM_LOST: "failed",  # a listen stream whose upstream session died
    Outcome.BACKLOG_OVERFLOW: "failed",  # a listen stream whose client could not keep up
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


def outcome_class(outcome: Outcome | None) -> str:
    if outcome is None:
        return NONE
    return OUTCOME_CLASSES.get(outcome, OTHER)


def rejection_reason(reason: object) -> str:
    return str(reason) if reason in REJECTION_REASONS else OTHER


_FAILED_KINDS: Final[Mapping[Detail, str]] = {
    jsonrpc.UPSTREAM_TIMEOUT: "timeout",
    jsonrpc.UPSTREAM_FAILED: "failed",
}


def upstream_error_kind(outcome: Outcome | None, detail: Detail | None = None) -> str | None:
    """What the upstream did wrong, if the line's outcome blames it: `error_response` (a JSON-RPC error of
    its own), `timeout` (silent for calls.call_timeout_s) or `failed` (unreachable, or failed mid-call)."""
    if outcome is Outcome.UPSTREAM_ERROR:
        return "error_response" if detail is not None else None
    if outcome is Outcome.UPSTREAM_FAILED:
        return "failed" if detail is None else None
    if outcome is Outcome.FAILED and detail is not None:
        return _FAILED_KINDS.get(detail)
    return None

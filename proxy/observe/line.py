"""The request's canonical log line, typed: what the front learns about one request while serving it.

The endpoint (front/endpoint.py) makes one `RequestLine` per request; every room that serves the request sets
its attributes; at the end the line is rendered once (`render`) to the JSON log line, and the metrics
(observe/metrics.py) and the span (observe/spans.py) read its attributes. An attribute left None is not in the
rendered line, so the log line names what happened and nothing else (the JSON-RPC `id` and the handle's
`key_id` can be a real null: they are ABSENT until set).

The outcome is an `Outcome` and a `detail` (a JSON-RPC error code, an HTTP status, a reason): rendered as
`"<outcome>"` or `"<outcome>:<detail>"`, the text log readers have always had.
"""

from __future__ import annotations

import enum
import operator
from typing import Any, Final, Literal, TypeAlias

from proxy.wire.jsonrpc import RequestId


class Outcome(enum.StrEnum):
    """How a request ended: the part of the line's `outcome` before any `:`."""

    COMPLETE = "complete"
    INPUT_REQUIRED = "input_required"
    TASK = "task"  # the call became a task (Tasks extension)
    TASK_NOT_FOUND = "task_not_found"
    UPSTREAM_ERROR = "upstream_error"  # :code, the upstream's own JSON-RPC error, passed through
    FAILED = "failed"  # :code, ours: upstream failed or timed out, call lost, limits, bad inputResponses
    UPSTREAM_FAILED = "upstream_failed"  # the same, for discover and plain forwarded requests
    UPSTREAM_UNAUTHORIZED = "upstream_unauthorized"  # :status, the upstream's 401/403 relayed
    REFUSED = "refused"  # :code, refused at the boundary (bad headers or body, origin, rate, draining)
    UNAUTHORIZED = "unauthorized"  # :status or :reason, validate mode
    UNKNOWN_METHOD = "unknown_method"
    HANDLE_REJECTED = "handle_rejected"
    PEER_AUTH_FAILED = "peer_auth_failed"  # a forwarded retry whose replica signature failed
    NOT_PROCESSED = "not_processed"  # a forwarded retry this draining replica did not take
    FORWARDED = "forwarded"  # :status, relayed to the replica that owns the parked call
    ACCEPTED = "accepted"  # a notification
    RELAYED = "relayed"  # :status, a legacy client's request, relayed as it is
    PREFLIGHT = "preflight"  # a CORS preflight answered
    CLIENT_CLOSED = "client_closed"  # a stream the client ended (listen, a legacy GET stream)
    CLIENT_GONE = "client_gone"  # the client hung up before its answer was written (status 499)
    REPLACED = "replaced"  # a listen stream replaced by the client's newer one
    UPSTREAM_LOST = "upstream_lost"  # a listen stream whose upstream session died
    BACKLOG_OVERFLOW = "backlog_overflow"  # a listen stream whose client could not keep up
    ERROR = "error"  # a mirrored round ended by an exception (the mirror words it to its client)


class _Absent(enum.Enum):
    TOKEN = 0


ABSENT: Final = _Absent.TOKEN  # not in the line (as opposed to a null in it)
Absent: TypeAlias = Literal[_Absent.TOKEN]
Detail: TypeAlias = int | str


_ORDER: Final = (
    "request_id",
    "http_method",
    "path",
    "upstream",
    "route",
    "id",
    "method",
    "tool",
    "era",
    "via",
    "upstream_era",
    "learned",
    "forwarded_by",
    "key_id",
    "owner",
    "owner_unreachable",
    "owner_lost",
    "owner_refused",
    "task",
    "task_status",
    "subscription",
    "outcome",
    "detail",
    "reason",
    "refusal",
    "origin",
    "input_keys",
    "left_out",
    "unsent",
    "call",
    "round",
    "status",
    "duration_ms",
)  # the rendered order


class RequestLine:
    """One request's canonical line (its attributes rendered in _ORDER)."""

    __slots__ = _ORDER

    def __init__(
        self, request_id: str | None = None, http_method: str | None = None, path: str | None = None
    ) -> None:
        self.request_id = request_id  # the request's X-Request-Id (front/request_ids.py)
        self.http_method = http_method
        self.path = path
        self.upstream: str | None = None  # the upstream the request went to (an aggregated route's member)
        self.route: str | None = None  # the aggregated route the request came in on
        self.id: RequestId | Absent | None = ABSENT  # the JSON-RPC id (null: a body without a usable one)
        self.method: str | None = None  # the JSON-RPC method ("response": a legacy client's response)
        self.tool: str | None = None  # a tools/call's tool (cut to front/endpoint.py's MAX_TOOL_NAME)
        self.era: str | None = None  # "legacy": a legacy client
        self.via: str | None = None  # "mirror": a round the mirror sent through the modern pipeline
        self.upstream_era: str | None = None  # "modern": relayed natively to a 2026-07-28 upstream
        self.learned: str | None = None  # "legacy": a two-era upstream's tool answered the legacy way
        self.forwarded_by: str | None = None  # the replica that forwarded this retry (peer route)
        self.key_id: str | Absent | None = ABSENT  # a handle's key id this replica does not hold
        self.owner: str | None = None  # the replica that owns the parked call of this retry
        self.owner_unreachable: str | None = None  # why the owner could not be reached
        self.owner_lost: str | None = None  # why the owner took the retry and was lost
        self.owner_refused: str | None = None  # why the owner refused the forwarded retry
        self.task: str | None = None  # the task the request created or named (Tasks extension)
        self.task_status: str | None = None
        self.subscription: dict[str, Any] | None = None  # a listen's honoured subscription (list sizes)
        self.outcome: Outcome | None = None
        self.detail: Detail | None = None  # after the outcome's ":": a code, a status or a reason
        self.reason: str | None = None  # why a handle, a cursor or a name was refused
        self.refusal: str | None = None  # "pool_full", "admission": which limit refused the call
        self.origin: str | None = None  # a refused preflight's Origin (cut)
        self.round: int | None = None  # the request's round in its call
        self.input_keys: int | None = None  # an input_required answer's number of input requests
        self.left_out: list[str] | None = None  # an aggregated list's upstreams that were left out
        self.unsent: str | None = None  # the outcome decided but never delivered (client_gone)
        self.call: str | None = None  # the call's id (stable across rounds and replicas)
        self.status: int | None = None  # the HTTP status answered
        self.duration_ms: float | None = None

    def set_outcome(
        self, outcome: Outcome, detail: Detail | None = None, *, reason: str | None = None
    ) -> None:
        """How the request ended (a later outcome replaces an earlier one), and why, if there is a reason."""
        self.outcome, self.detail = outcome, detail
        if reason is not None:
            self.reason = reason

    @property
    def outcome_text(self) -> str | None:
        """The outcome as the log line has it: `"<outcome>"` or `"<outcome>:<detail>"`."""
        outcome = self.outcome
        if outcome is None:
            return None
        return outcome.value if self.detail is None else f"{outcome.value}:{self.detail}"

    @property
    def json_id(self) -> RequestId | None:
        """The JSON-RPC id to answer with (None until the body named one)."""
        return None if self.id is ABSENT else self.id

    def render(self) -> dict[str, Any]:
        """The JSON log line: every attribute that was set, in _ORDER, the outcome as its text."""
        line: dict[str, Any] = {}
        for name, value in zip(_RENDERED, _values(self), strict=False):  # both from _RENDERED
            if value is None:
                if name in _NULLABLE and getattr(self, name) is None:  # set to null: kept, as before
                    line[name] = None
                continue
            if value is not ABSENT:
                line[name] = value
        if self.outcome is not None:
            line["outcome"] = self.outcome_text  # in its place: a plain str, as the log always had it
        return line


_RENDERED: Final = tuple(name for name in _ORDER if name != "detail")
_values: Final = operator.attrgetter(*_RENDERED)  # one call for all of them
_NULLABLE: Final = frozenset({"id", "key_id"})  # ABSENT until set; a null once set to None

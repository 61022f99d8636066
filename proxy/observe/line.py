"""The request's canonical log line, typed: what the front learns about one request while serving it.

The endpoint (front/endpoint.py) makes one `RequestLine` per request; every room that serves the request sets
its attributes; at the end the line is rendered once (`render`, in the order they were set) to the JSON log
line, and the metrics (observe/metrics.py) and the span (observe/spans.py) read its attributes. An attribute
left None is not in the rendered line, so the log line names what happened and nothing else (the JSON-RPC
`id` and the handle's `key_id` can be a real null: they are ABSENT until set).

The outcome is an `Outcome` and a `detail` (a JSON-RPC error code, an HTTP status, a reason): rendered as
`"<outcome>"` or `"<outcome>:<detail>"`, the text log readers have always had.
"""

from __future__ import annotations

import enum
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


class RequestLine:
    """One request's canonical line. Its attributes default to None at the class; an instance holds only what
    was set, in the order it was set (the order the dict line had), and `render` copies just that: no slots,
    as a line sets about ten of its thirty attributes and rendering all thirty cost more than the old dict."""

    request_id: str | None = None  # the request's X-Request-Id (front/request_ids.py)
    http_method: str | None = None
    path: str | None = None
    upstream: str | None = None  # the upstream the request went to (an aggregated route's member)
    route: str | None = None  # the aggregated route the request came in on
    id: RequestId | Absent | None = ABSENT  # the JSON-RPC id (null: a body without a usable one)
    method: str | None = None  # the JSON-RPC method ("response": a legacy client's response)
    tool: str | None = None  # a tools/call's tool (cut to front/endpoint.py's MAX_TOOL_NAME)
    era: str | None = None  # "legacy": a legacy client
    via: str | None = None  # "mirror": a round the mirror sent through the modern pipeline
    upstream_era: str | None = None  # "modern": relayed natively to a 2026-07-28 upstream
    learned: str | None = None  # "legacy": a two-era upstream's tool answered the legacy way
    forwarded_by: str | None = None  # the replica that forwarded this retry (peer route)
    key_id: str | Absent | None = ABSENT  # a handle's key id this replica does not hold
    owner: str | None = None  # the replica that owns the parked call of this retry
    owner_unreachable: str | None = None  # why the owner could not be reached
    owner_lost: str | None = None  # why the owner took the retry and was lost
    owner_refused: str | None = None  # why the owner refused the forwarded retry
    task: str | None = None  # the task the request created or named (Tasks extension)
    task_status: str | None = None
    subscription: dict[str, Any] | None = None  # a listen's honoured subscription (list sizes)
    outcome: Outcome | None = None
    detail: Detail | None = None  # after the outcome's ":": a code, a status or a reason
    reason: str | None = None  # why a handle, a cursor or a name was refused
    refusal: str | None = None  # "pool_full", "admission": which limit refused the call
    origin: str | None = None  # a refused preflight's Origin (cut)
    round: int | None = None  # the request's round in its call
    input_keys: int | None = None  # an input_required answer's number of input requests
    left_out: list[str] | None = None  # an aggregated list's upstreams that were left out
    unsent: str | None = None  # the outcome decided but never delivered (client_gone)
    call: str | None = None  # the call's id (stable across rounds and replicas)
    status: int | None = None  # the HTTP status answered
    duration_ms: float | None = None

    def __init__(
        self, request_id: str | None = None, http_method: str | None = None, path: str | None = None
    ) -> None:
        self.request_id = request_id  # (None on the mirror's round lines: structlog's context names it)
        self.http_method = http_method
        self.path = path

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
        return str(outcome) if self.detail is None else f"{outcome}:{self.detail}"  # (str(): in C)

    @property
    def json_id(self) -> RequestId | None:
        """The JSON-RPC id to answer with (None until the body named one)."""
        return None if self.id is ABSENT else self.id

    def render(self) -> dict[str, Any]:
        """The JSON log line: every attribute that was set (a None dropped, but a null `id`/`key_id` kept), in
        the order it was set, the outcome as its text."""
        line = self.__dict__.copy()  # in C (a comprehension over ~15 attributes: ~1.5 % of a call)
        line.pop("detail", None)
        if None in line.values():  # a line that set some attribute back to None: rare
            line = {k: v for k, v in line.items() if v is not None or k in _NULLABLE}
        if self.outcome is not None:
            line["outcome"] = self.outcome_text  # in its place: a plain str, as the log always had it
        return line


_NULLABLE: Final = frozenset({"id", "key_id"})  # ABSENT until set; a null once set to None

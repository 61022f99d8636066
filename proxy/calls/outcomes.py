"""What the call service takes and gives: the request of one call, its outcomes, settings and errors.

Plain data (frozen where they can be) shared by the service's parts (service.py, driver.py, takeover.py,
drain.py) and its callers (the modern front, proxy/tasks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from proxy.calls.registry import LiveCall
from proxy.calls.wording import lost, outcome_unknown, shut_down, too_many_calls, too_many_inputs
from proxy.translate.exchange import Exchange
from proxy.translate.validate import invalid_input_response
from proxy.upstream.base import UpstreamAuthChallenge
from proxy.upstream.pool import PoolKey
from proxy.wire import jsonrpc
from proxy.wire.jsonrpc import ErrorObject

# The errors the call service gives are worded in calls/wording.py; named here too for its parts.
__all__ = [
    "CallLink",
    "CallObserver",
    "CallRequest",
    "CallSettings",
    "Completed",
    "Failed",
    "Forward",
    "InvalidRequestState",
    "NeedsInput",
    "NoObserver",
    "NotificationSink",
    "Outcome",
    "OwnerGone",
    "Running",
    "invalid_responses",
    "lost",
    "outcome_unknown",
    "shut_down",
    "too_many_calls",
    "too_many_inputs",
]

NotificationSink = Callable[[jsonrpc.Notification], Awaitable[None]]
# Why a retry for a call parked elsewhere is handled here: this replica itself found the owner unreachable
# (nothing reached it), or the owner took the forwarded retry and went away (the outcome is unknown).
OwnerGone = Literal["unreachable", "unknown"]


@dataclass(frozen=True, slots=True)
class Completed:
    response: jsonrpc.Response  # the upstream's own answer (result or JSON-RPC error)


@dataclass(frozen=True, slots=True)
class NeedsInput:
    input_requests: Mapping[str, Mapping[str, Any]]
    request_state: str
    round: int
    call: str = ""  # the id of the parked call


@dataclass(frozen=True, slots=True)
class Failed:
    error: ErrorObject
    undelivered: bool = False  # the upstream certainly never got the call: starting it again is safe
    challenge: UpstreamAuthChallenge | None = None  # the upstream refused the credentials: relay it
    refused: bool = False  # a new call turned away at admission before anything began: send it elsewhere


@dataclass(frozen=True, slots=True)
class Forward:
    """The call is parked on another replica: send the retry there, unchanged."""

    owner: str


@dataclass(frozen=True, slots=True)
class Running:
    """Still running when `yield_after` ran out (and not asking for input): the call stays live and
    registered, its upstream messages wait in its inbox, and nobody drives it until `CallService.drive`."""

    call: LiveCall


Outcome = Completed | NeedsInput | Failed | Forward | Running


class CallObserver(Protocol):
    """What the service reports beyond each request's own outcome (for metrics). Must be cheap."""

    def resumed(self, upstream: str, parked_for: float) -> None: ...
    def reaped(self, upstream: str, parked_for: float) -> None: ...
    def taken_over(self, upstream: str, *, ok: bool) -> None: ...


class NoObserver:
    def resumed(self, upstream: str, parked_for: float) -> None:
        pass

    def reaped(self, upstream: str, parked_for: float) -> None:
        pass

    def taken_over(self, upstream: str, *, ok: bool) -> None:
        pass


class InvalidRequestState(Exception):
    """The retry's requestState must be refused. `reason` is for the log only, never the wire."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CallSettings:
    gather_window: float
    parked_ttl: float
    call_timeout: float
    owner: str
    parked_share: float = 1.0  # calls.parked_share: of each pool's max_sessions, what parked calls may hold


@dataclass(slots=True)
class CallLink:
    """Joins the rounds of one call, which are separate client requests, in the logs and traces. The front
    may set `span` (this request's trace span, opaque here); the service fills in the rest as soon as it
    knows which call the request is for, whatever the outcome."""

    span: str | None = None
    call: str | None = None  # the call's id (stable across rounds and replicas)
    round: int | None = None  # this request's place in the call: 1 starts it, N + 1 answers round N
    first_span: str | None = None  # `span` of the call's first round (sealed in its handles)

    def joined(self, call: str, round: int, first_span: str | None) -> None:
        self.call, self.round, self.first_span = call, round, first_span


@dataclass(frozen=True, slots=True)
class CallRequest:
    """One MRTR-capable client request, as the front parsed it."""

    upstream: str
    method: str
    params: Mapping[str, Any]  # as the client sent them, less inputResponses/requestState/modern _meta
    key: PoolKey
    principal: str
    link: CallLink = field(default_factory=CallLink, compare=False)  # filled in by the service
    log_level: str | None = None  # the request's `io.modelcontextprotocol/logLevel` opt-in, if any
    address: str = ""  # the client's address, for its share of the calls ("" when unknown)


def invalid_responses(exchange: Exchange, responses: Mapping[str, Any]) -> ErrorObject | None:
    for key, pending in exchange.pending.items():
        problem = key in responses and invalid_input_response(pending.method, responses[key], pending.params)
        if problem:
            return ErrorObject(jsonrpc.INVALID_PARAMS, f"inputResponses[{key!r}] {problem}")
    return None

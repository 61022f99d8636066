"""The modern room's answers when a limit is reached: the per-principal request rate (429, shared with
legacy clients through the endpoint), a pool with no free session in time (-31003, never a 500), and a
new call turned away at admission (503 -31003, so a balancer can send it elsewhere)."""

from __future__ import annotations

import math

from proxy.calls.registry import CallRegistry
from proxy.calls.wording import too_many_calls, too_many_requests
from proxy.config import FrontConfig
from proxy.front.checks import Refusal
from proxy.front.ratelimit import RateLimiter
from proxy.observe.line import Outcome, RequestLine
from proxy.upstream.pool import PoolExhausted
from proxy.wire import jsonrpc
from proxy.wire.jsonrpc import ErrorObject


class RateGate:
    """`front.rate_limit_per_s` per principal: every request takes a token, modern or legacy."""

    def __init__(self, front: FrontConfig) -> None:
        self._per_s = front.rate_limit_per_s
        self._bucket = RateLimiter(front.rate_limit_per_s, front.rate_burst)

    def check(self, principal: str) -> None:
        """Take one request from `principal`'s bucket, or refuse it (429) when it is empty."""
        if not self._bucket.allow(principal):
            wait = self._bucket.retry_after(principal)
            raise Refusal(
                429,
                too_many_requests(self._per_s, wait),
                (("Retry-After", str(max(1, math.ceil(wait)))),),
            )


def pool_full(
    registry: CallRegistry, msg: jsonrpc.Request, exc: PoolExhausted, line: RequestLine
) -> jsonrpc.Response:
    """No session came free in time for a plain request: -31003, like a call, with its log line's outcome."""
    registry.refused("pool_full")
    line.set_outcome(Outcome.FAILED, jsonrpc.LIMIT_EXCEEDED)
    line.refusal = "pool_full"
    return jsonrpc.Error(msg.id, too_many_calls(exc))


ADMISSION_RETRY_AFTER = (("Retry-After", "1"),)  # a full replica: room comes back as calls end


def admission_refused(error: ErrorObject, line: RequestLine) -> Refusal:
    """A new call this replica turned away before anything began (its shares or pool are full): HTTP 503
    with the -31003 body and `Retry-After`, so a balancer that retries on 503 (nginx `proxy_next_upstream
    http_503 non_idempotent`, docs/scale-out.md "Balancers") sends it to another replica; safe, because
    nothing was started. A client that reaches only this replica gets the same -31003 as before."""
    line.refusal = "admission"
    return Refusal(503, error, ADMISSION_RETRY_AFTER)

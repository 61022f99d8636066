"""The span types of tracing (`proxy/observe/tracing.py`): what the front holds for each request.

The base classes are the no-op used when tracing is off; `proxy/observe/tracing_otel.py` subclasses them. Both
modules import them from here, so neither imports the other's module at load time.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from proxy.observe.line import RequestLine


class RequestSpan:
    """The span of one client request. This base class is the no-op used when tracing is off."""

    ref: str | None = None  # "<trace id><span id>" in hex: what later rounds of a call link to
    headers: Mapping[str, str] = MappingProxyType({})  # `traceparent` (+ `tracestate`) to send upstream

    def finish(
        self, line: RequestLine, *, first_round: str | None = None, error: BaseException | None = None
    ) -> None:
        """End the span, described by the request's canonical log line. `first_round`: the ref of the first
        round's span, when this request is a later round of a call (it gets a link to it)."""


NO_SPAN = RequestSpan()


class Tracing:
    """Tracing off: every request gets `NO_SPAN`."""

    def start(self, headers: Mapping[str, str]) -> RequestSpan:
        """The span of a request with these (client) headers; started now."""
        return NO_SPAN

    def shutdown(self) -> None:
        """Flush and stop exporting (on app cleanup)."""

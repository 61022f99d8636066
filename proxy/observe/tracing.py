"""Optional OpenTelemetry tracing (`tracing.enabled`): one server span per client request.

Off by default, and then nothing of OpenTelemetry is imported: every request gets the one shared no-op
`NO_SPAN`. On, `proxy/observe/tracing_otel.py` is imported (it needs the `otel` extra: `pip install
'mrtr-proxy[otel]'`) and each request gets a span named `mcp <method>`, a child of the client's W3C
`traceparent` if it sent one; its own `traceparent` goes upstream with the request's other propagated
headers (`proxy/upstream/propagation.py`).

The rounds of one MRTR call are separate requests, so separate spans (usually in separate traces: each
retry is a new client request). Every round after the first carries a span *link* to the first round's
span. That span is named by its `ref`, "<32 hex trace id><16 hex span id>", which the call keeps and seals
into each handle it hands out (claim `l`, only when tracing), so the link survives a retry landing on
another replica and a takeover.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proxy.observe.spans import NO_SPAN, RequestSpan, Tracing

if TYPE_CHECKING:
    from proxy.config import TracingConfig

__all__ = ["INSTALL_HINT", "NO_SPAN", "RequestSpan", "Tracing", "TracingUnavailable", "setup"]

INSTALL_HINT = "install the otel extra: pip install 'mrtr-proxy[otel]'"


class TracingUnavailable(Exception):
    """`tracing.enabled` is true but OpenTelemetry is not installed."""


def setup(config: TracingConfig, *, exporter: Any = None) -> Tracing:
    """The tracing `config` asks for. `exporter`: an OpenTelemetry `SpanExporter` to use instead of OTLP,
    exporting each span as it ends (tests: `InMemorySpanExporter`). Raises TracingUnavailable."""
    if not config.enabled:
        return Tracing()
    try:
        from proxy.observe.tracing_otel import OtelTracing  # noqa: PLC0415 - only imported when tracing is on

        return OtelTracing(config, exporter)
    except ImportError as exc:  # the OTLP exporter is imported by OtelTracing itself, when it needs it
        raise TracingUnavailable(
            f"tracing.enabled is true but OpenTelemetry is not installed ({exc.name or exc}); {INSTALL_HINT}"
        ) from None

"""The OpenTelemetry side of `tracing.py`; imported only when `tracing.enabled` (needs the otel extra).

A tracer provider of our own (the global one is left alone), a `ParentBased(TraceIdRatioBased)` sampler, the
W3C trace-context propagator, and OTLP over HTTP (batched) unless an exporter is handed in.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from proxy.config import TracingConfig
from proxy.observe.labels import outcome_class
from proxy.observe.line import RequestLine
from proxy.observe.spans import RequestSpan, Tracing

SCOPE = "mrtr-proxy"
_REF_LENGTH = 48  # 32 hex digits of trace id, 16 of span id


def span_ref(context: SpanContext) -> str | None:
    """The ref of a span: "<trace id><span id>" in hex, or None for an invalid context."""
    return f"{context.trace_id:032x}{context.span_id:016x}" if context.is_valid else None


def span_context(ref: str) -> SpanContext | None:
    """The (remote) span context a ref names, or None if it names none."""
    if len(ref) != _REF_LENGTH:
        return None
    try:
        trace_id, span_id = int(ref[:32], 16), int(ref[32:], 16)
    except ValueError:
        return None
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return context if context.is_valid else None


class OtelSpan(RequestSpan):
    def __init__(self, span: Span, propagator: TraceContextTextMapPropagator) -> None:
        self._span = span
        self.ref = span_ref(span.get_span_context())
        carrier: dict[str, str] = {}
        propagator.inject(carrier, context=trace.set_span_in_context(span))
        self.headers = carrier

    def finish(
        self, line: RequestLine, *, first_round: str | None = None, error: BaseException | None = None
    ) -> None:
        span = self._span
        method = line.method
        span.update_name(f"mcp {method or line.http_method or 'request'}")
        if first_round is not None and first_round != self.ref:
            target = span_context(first_round)
            if target is not None:
                span.add_link(target, {"mcp.call.link": "first_round"})
        attributes = {
            "mcp.method.name": method,
            "mcp.call.id": line.call,
            "mcp.call.round": line.round,
            "mrtr.upstream": line.upstream,
            "mrtr.outcome": line.outcome_text,
            "mrtr.request_id": line.request_id,
            "jsonrpc.request.id": None if line.json_id is None else str(line.json_id),
            "http.request.method": line.http_method,
            "url.path": line.path,
            "http.response.status_code": line.status,
        }
        span.set_attributes({k: v for k, v in attributes.items() if isinstance(v, str | int)})
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        elif outcome_class(line.outcome) == "failed" or (line.status or 0) >= 500:
            span.set_status(Status(StatusCode.ERROR, str(line.outcome_text)))
        span.end()


class OtelTracing(Tracing):
    def __init__(self, config: TracingConfig, exporter: SpanExporter | None = None) -> None:
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )

            # endpoint None: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, else http://localhost:4318/v1/traces
            processor: SimpleSpanProcessor | BatchSpanProcessor = BatchSpanProcessor(
                OTLPSpanExporter(endpoint=config.otlp_endpoint)
            )
        else:
            processor = SimpleSpanProcessor(exporter)
        self._provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: config.service_name}),
            sampler=ParentBased(TraceIdRatioBased(config.sample_ratio)),
        )
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer(SCOPE)
        self._propagator = TraceContextTextMapPropagator()

    def start(self, headers: Mapping[str, str]) -> RequestSpan:
        parent = self._propagator.extract(headers)
        span = self._tracer.start_span("mcp", context=parent, kind=SpanKind.SERVER)
        return OtelSpan(span, self._propagator)

    def shutdown(self) -> None:
        self._provider.shutdown()

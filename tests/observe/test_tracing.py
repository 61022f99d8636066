"""Optional OpenTelemetry tracing: configuration, zero cost when off, a clear refusal when the extra is
missing, and — through a real legacy server — a span per round, the rounds of one call linked, and W3C
trace context continued from the client and sent upstream."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from e2e.harness import RawClient, Reply, accept_name, running_proxy
from e2e.recording import Recording, recording_relay
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from observe.lines import line_of
from proxy.config import ConfigError, TracingConfig, load_config
from proxy.observe.tracing import NO_SPAN, Tracing, TracingUnavailable, setup
from proxy.observe.tracing_otel import span_context, span_ref
from proxy.process.app import CODEC

ROOT = Path(__file__).resolve().parents[2]
UP = "upstreams: [{name: a, url: 'http://127.0.0.1:8000/mcp'}]\n"
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
CLIENT_TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"


def ids(span: ReadableSpan) -> tuple[str, str]:
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def traceparent_of(span: ReadableSpan) -> str:
    trace_id, span_id = ids(span)
    return f"00-{trace_id}-{span_id}-{span.context.trace_flags:02x}"


# --- configuration ---------------------------------------------------------------------------------


def test_tracing_is_off_by_default_and_configurable(tmp_path: Path) -> None:
    assert load_config(None, {"upstream": "http://x/mcp"}, env={}).tracing == TracingConfig()
    assert TracingConfig() == TracingConfig(False, "mrtr-proxy", None, 1.0)
    path = tmp_path / "c.yaml"
    path.write_text(
        UP
        + textwrap.dedent("""\
        tracing:
          enabled: true
          service_name: edge-proxy
          otlp_endpoint: http://otel-collector:4318/v1/traces
          sample_ratio: 0.25
        """)
    )
    assert load_config(path, env={}).tracing == TracingConfig(
        True, "edge-proxy", "http://otel-collector:4318/v1/traces", 0.25
    )


@pytest.mark.parametrize(
    ("section", "fragment"),
    [
        ("{sample_ratio: 1.5}", "tracing.sample_ratio: 1.5 is greater than the maximum of 1"),
        ("{enabled: yes please}", "tracing.enabled: 'yes please' is not of type 'boolean'"),
        ("{otlp_endpoint: 'collector:4318'}", "tracing.otlp_endpoint: 'collector:4318' does not match"),
        ("{service_name: ''}", "tracing.service_name:"),
        ("{exporter: zipkin}", "unknown key 'exporter'"),
    ],
)
def test_bad_tracing_settings_are_refused(tmp_path: Path, section: str, fragment: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"{UP}tracing: {section}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert any(fragment in p for p in info.value.problems), info.value.problems


# --- off: nothing loaded; on without the extra: refused at start-up --------------------------------

NO_OTEL_ON_START = """
import sys
from proxy.process.app import create_app
from proxy.config import load_config
create_app(load_config(None, {"upstream": "http://127.0.0.1:1/mcp"}, env={}))
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry") or m == "proxy.observe.tracing_otel")
assert not loaded, loaded
print("ok")
"""


async def test_disabled_tracing_imports_nothing_of_opentelemetry() -> None:
    run = await peers.run_once([sys.executable, "-c", NO_OTEL_ON_START], limit_s=60, cwd=ROOT)
    assert (run.returncode, run.stdout.strip().splitlines()[-1]) == (0, "ok"), run.stderr
    assert setup(TracingConfig()).start({"traceparent": CLIENT_TRACEPARENT}) is NO_SPAN


def test_enabled_without_the_extra_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "proxy.observe.tracing_otel", raising=False)
    with pytest.raises(TracingUnavailable, match=r"not installed.*pip install 'mrtr-proxy\[otel\]'"):
        setup(TracingConfig(enabled=True))


async def test_serve_refuses_to_start_without_the_extra(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"{UP}tracing: {{enabled: true}}\n")
    hide_otel = (
        "import sys; sys.modules['opentelemetry'] = None; import proxy.cli.main as c; sys.exit(c.main())"
    )
    argv: Sequence[str] = [sys.executable, "-c", hide_otel, "serve", "--config", str(cfg)]
    run = await peers.run_once(argv, limit_s=60, cwd=ROOT)
    assert run.returncode == 2, run.stderr
    assert "tracing.enabled is true but OpenTelemetry is not installed" in run.stderr
    assert "pip install 'mrtr-proxy[otel]'" in run.stderr


# --- the span of one request, without a server --------------------------------------------------------


def test_span_refs_round_trip_and_junk_names_no_span() -> None:
    context = span_context(CLIENT_TRACE + CLIENT_SPAN)
    assert context is not None and span_ref(context) == CLIENT_TRACE + CLIENT_SPAN
    for junk in ("", "xyz", CLIENT_TRACE, "0" * 48, "g" * 48):
        assert span_context(junk) is None


def test_a_request_span_continues_the_client_trace_and_is_propagated() -> None:
    exporter = InMemorySpanExporter()
    tracing = setup(TracingConfig(enabled=True), exporter=exporter)
    span = tracing.start({"traceparent": CLIENT_TRACEPARENT})
    assert span.ref is not None and span.ref.startswith(CLIENT_TRACE)
    assert span.headers["traceparent"].startswith(f"00-{CLIENT_TRACE}-{span.ref[32:]}-")
    span.finish(line_of(method="tools/call", outcome="failed:-31001", status=200, request_id="r"))
    (done,) = exporter.get_finished_spans()
    assert done.name == "mcp tools/call" and done.kind == SpanKind.SERVER
    assert done.parent is not None and f"{done.parent.span_id:016x}" == CLIENT_SPAN
    assert done.status.status_code.name == "ERROR"  # the call failed
    assert done.resource.attributes["service.name"] == "mrtr-proxy"
    tracing.shutdown()


def test_an_unsampled_trace_is_still_propagated_but_not_exported() -> None:
    exporter = InMemorySpanExporter()
    tracing = setup(TracingConfig(enabled=True, sample_ratio=0.0), exporter=exporter)
    span = tracing.start({})
    flags = int(span.headers["traceparent"].rsplit("-", 1)[1], 16)
    assert not flags & 0x01  # not sampled, and upstream is told so
    span.finish(line_of(method="ping"))
    assert exporter.get_finished_spans() == ()
    tracing.shutdown()


# --- end to end: a two-round call through FastMCP ---------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def relay(fastmcp_url: str) -> AsyncIterator[Recording]:
    async with recording_relay(fastmcp_url) as recording:
        yield recording


async def call(client: RawClient, name: str, headers: dict[str, str] | None = None, **params: Any) -> Reply:
    body = client.body("tools/call", {"name": name, "arguments": params.pop("arguments", {}), **params})
    return await client.send(body, {**client.headers(body), **(headers or {})})


@pytest.mark.peers
async def test_the_rounds_of_a_call_are_spans_linked_to_the_first(relay: Recording) -> None:
    exporter = InMemorySpanExporter()
    tracing: Tracing = setup(TracingConfig(enabled=True), exporter=exporter)
    async with running_proxy(relay.url, tracing=tracing) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        first = await call(client, "ask_name", {"traceparent": CLIENT_TRACEPARENT, "X-Request-Id": "r-1"})
        state = first.result["requestState"]
        final = await call(
            client, "ask_name", inputResponses={"elicit-1": accept_name("Ada")}, requestState=state
        )
        assert final.result["content"][0]["text"] == "accept:Ada"
        claims = proxy.app[CODEC].open(state)
    one, two = exporter.get_finished_spans()

    # Round 1 continues the client's trace; round 2 (a new request with no traceparent) starts its own.
    assert one.name == two.name == "mcp tools/call"
    assert one.kind == two.kind == SpanKind.SERVER
    assert ids(one)[0] == CLIENT_TRACE
    assert one.parent is not None and f"{one.parent.span_id:016x}" == CLIENT_SPAN
    assert ids(two)[0] != CLIENT_TRACE and two.parent is None
    a1, a2 = dict(one.attributes or {}), dict(two.attributes or {})
    assert a1["mcp.call.id"] == a2["mcp.call.id"] == claims.call
    assert (a1["mcp.call.round"], a1["mrtr.outcome"], a1["mrtr.request_id"]) == (1, "input_required", "r-1")
    assert (a2["mcp.call.round"], a2["mrtr.outcome"]) == (2, "complete")
    assert a1["mcp.method.name"] == "tools/call" and a1["mrtr.upstream"] == "default"

    # The link: round 2 points at round 1's span, which the handle carried.
    assert one.links == ()
    (link,) = two.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == ids(one)
    assert claims.trace == "".join(ids(one))

    # Upstream: the call's POST carried round 1's span, the answer to its elicitation round 2's.
    (call_post,) = relay.posts("tools/call")
    (answer,) = relay.posts("response")
    assert call_post.headers["traceparent"] == traceparent_of(one)
    assert answer.headers["traceparent"] == traceparent_of(two)


@pytest.mark.peers
async def test_the_upstream_tool_sees_the_request_span(relay: Recording) -> None:
    exporter = InMemorySpanExporter()
    async with (
        running_proxy(relay.url, tracing=setup(TracingConfig(enabled=True), exporter=exporter)) as proxy,
        aiohttp.ClientSession() as http,
    ):
        reply = await call(RawClient(proxy.url, http), "trace_headers", {"X-Request-Id": "seen"})
    (span,) = exporter.get_finished_spans()
    assert reply.result["content"][0]["text"] == f"seen|{traceparent_of(span)}"
    assert reply.headers["X-Request-Id"] == "seen"
    assert relay.posts("initialize")[0].headers["traceparent"] == traceparent_of(span)
    assert (span.attributes or {})["mcp.call.round"] == 1

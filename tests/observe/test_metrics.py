"""`GET /metrics`: after a scripted flow through a real legacy server (FastMCP 1.30), the Prometheus
exposition shows exactly what happened — and only in the app it happened in (one registry per app)."""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import peers
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from e2e.harness import RawClient, accept_name, running_proxy
from prometheus_client.parser import text_string_to_metric_families
from waiting import eventually

from observe.lines import line_of, outcome_of
from proxy.config import Config, ListenConfig, UpstreamConfig
from proxy.handle import KeyRing
from proxy.observe import metrics as metrics_module
from proxy.observe.labels import (
    REJECTION_REASONS,
    method_label,
    outcome_class,
    rejection_reason,
    upstream_error_kind,
)
from proxy.observe.metrics import METRICS, Metrics
from proxy.process.app import CALLS, create_app

# Only the scripted flows are marked `peers` (they need the real legacy servers); the label-mapping tests
# at the end are plain unit tests.

Labels = frozenset[tuple[str, str]]


@dataclass
class Scrape:
    samples: dict[tuple[str, Labels], float]

    @classmethod
    def parse(cls, text: str) -> Scrape:
        return cls(
            {
                (s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
        )

    def __call__(self, name: str, **labels: str) -> float:
        """The sample's value; a missing sample fails the test (it should have been there, even at 0)."""
        key = (name, frozenset(labels.items()))
        assert key in self.samples, f"no sample {name}{labels}"
        return self.samples[key]

    def total(self, name: str, **labels: str) -> float:
        """Sum over every sample of `name` whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and want <= ls)


async def scrape(http: aiohttp.ClientSession, mcp_url: str) -> Scrape:
    async with http.get(mcp_url.removesuffix("/mcp") + "/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return Scrape.parse(await resp.text())


def tamper(state: str) -> str:
    """Flip one ciphertext bit: authentication must fail."""
    raw = bytearray(base64.urlsafe_b64decode(state + "=" * (-len(state) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


CALL = "tools/call"
UP = "default"


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_scripted_flow_shows_the_expected_counters(fastmcp_url: str) -> None:
    async with (
        running_proxy(fastmcp_url) as proxy,
        running_proxy(fastmcp_url, parked_ttl_s=1) as reaping,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http)
        # A plain call, and an elicitation round trip.
        assert (await client.call("echo", {"text": "hi"})).result["resultType"] == "complete"
        first = await client.call("ask_name")
        assert (await client.retry(first, {"elicit-1": accept_name()}, "ask_name")).result["resultType"] == (
            "complete"
        )
        # A call left parked, a tampered handle for it (rejected), then its owner resumes it.
        parked = await client.call("ask_name")
        mid = await scrape(http, proxy.url)
        assert mid("mrtr_proxy_parked_calls", upstream=UP) == 1
        assert mid("mrtr_proxy_running_calls", upstream=UP) == 0
        bad = await client.call(
            "ask_name",
            inputResponses={"elicit-1": accept_name()},
            requestState=tamper(parked.result["requestState"]),
        )
        assert bad.error["message"] == "Invalid requestState"
        assert (await client.retry(parked, {"elicit-1": accept_name()}, "ask_name")).result["resultType"] == (
            "complete"
        )
        # A relayed list, and a request refused at the boundary (no MCP-Protocol-Version header).
        assert (await client.request("tools/list")).result["resultType"] == "complete"
        body = client.body(CALL, {"name": "echo", "arguments": {"text": "x"}})
        headers = {k: v for k, v in client.headers(body).items() if k != "MCP-Protocol-Version"}
        assert (await client.send(body, headers)).status == 400

        # A call nobody comes back for, on another app: reaped after parked_ttl_s.
        await RawClient(reaping.url, http).call("ask_name")
        await eventually(lambda: reaping.live == 0, "the registry to reap the call")

        m = await scrape(http, proxy.url)
        requests = "mrtr_proxy_requests_total"
        assert m(requests, method=CALL, outcome="complete", upstream=UP) == 3
        assert m(requests, method=CALL, outcome="input_required", upstream=UP) == 2
        assert m(requests, method=CALL, outcome="handle_rejected", upstream=UP) == 1
        assert m(requests, method=CALL, outcome="refused", upstream=UP) == 1
        assert m(requests, method="tools/list", outcome="complete", upstream=UP) == 1
        assert m.total(requests) == 8
        duration = "mrtr_proxy_request_duration_seconds"
        assert m(f"{duration}_count", method=CALL, upstream=UP) == 7
        assert m(f"{duration}_count", method="tools/list", upstream=UP) == 1
        assert m(f"{duration}_bucket", method=CALL, upstream=UP, le="+Inf") == 7
        assert 0 < m(f"{duration}_sum", method=CALL, upstream=UP) < 60
        assert m("mrtr_proxy_input_required_rounds_total", upstream=UP) == 2
        assert m("mrtr_proxy_handle_rejections_total") == 1  # the public /metrics: no reason label
        private = Scrape.parse(proxy.app[METRICS].render().decode())  # what the admin listener serves
        assert private("mrtr_proxy_handle_rejections_total", reason="auth_failed") == 1
        assert private.total("mrtr_proxy_handle_rejections_total") == 1
        age = "mrtr_proxy_parked_call_age_seconds"
        assert m(f"{age}_count", upstream=UP, end="resumed") == 2
        assert 0 < m(f"{age}_sum", upstream=UP, end="resumed") < 60
        assert m("mrtr_proxy_parked_calls", upstream=UP) == 0
        assert m("mrtr_proxy_running_calls", upstream=UP) == 0
        assert m("mrtr_proxy_upstream_sessions", upstream=UP) >= 1
        assert m("mrtr_proxy_reaped_calls_total", upstream=UP) == 0  # the reaped call was on the other app
        assert m.total("mrtr_proxy_upstream_errors_total") == 0
        for result in ("ok", "unreachable"):
            assert m("mrtr_proxy_peer_forwards_total", result=result) == 0
        for result in ("ok", "lost"):
            assert m("mrtr_proxy_takeovers_total", result=result) == 0

        r = await scrape(http, reaping.url)
        assert r("mrtr_proxy_reaped_calls_total", upstream=UP) == 1
        assert r(f"{age}_count", upstream=UP, end="reaped") == 1
        assert r(f"{age}_sum", upstream=UP, end="reaped") >= 1  # parked at least parked_ttl_s
        assert r("mrtr_proxy_parked_calls", upstream=UP) == 0
        assert r.total(requests) == 1  # only its own request: nothing of the other app leaks in
        assert r(requests, method=CALL, outcome="input_required", upstream=UP) == 1


@dataclass
class Replica:
    url: str
    app: web.Application
    server: TestServer


@contextlib.asynccontextmanager
async def replica(upstream_url: str, ring: KeyRing) -> AsyncIterator[Replica]:
    """An in-process replica whose replica address is its real listening address."""
    port = peers.free_port()
    config = Config(
        upstreams=(UpstreamConfig(name=UP, url=upstream_url),),
        listen=ListenConfig(host="127.0.0.1", port=port),
    )
    app = create_app(config, ring=ring)
    server = TestServer(app, host="127.0.0.1", port=port)
    await server.start_server()
    try:
        yield Replica(f"http://127.0.0.1:{port}/mcp", app, server)
    finally:
        await server.close()


@pytest.mark.peers
@pytest.mark.asyncio(loop_scope="session")
async def test_peer_forwards_and_takeovers_are_counted(fastmcp_url: str) -> None:
    ring = KeyRing.ephemeral()
    async with (
        peers.start_fastmcp(event_store=True) as resumable_url,
        replica(resumable_url, ring) as owner,
        replica(resumable_url, ring) as other,
        replica(fastmcp_url, ring) as plain,
        aiohttp.ClientSession() as http,
    ):
        via_other = RawClient(other.url, http)
        # A retry that lands on a replica that does not own the call is forwarded to its owner.
        first = await RawClient(owner.url, http).call("ask_name")
        final = await via_other.retry(first, {"elicit-1": accept_name()}, "ask_name")
        assert final.result["resultType"] == "complete"
        # The owner leaves its parked call for takeover and goes away: forwarding fails, it is taken over.
        moving = await RawClient(owner.url, http).call("ask_name")
        await owner.app[CALLS].drain(0)
        await owner.server.close()
        final = await via_other.retry(moving, {"elicit-1": accept_name()}, "ask_name")
        assert final.result["resultType"] == "complete"
        # The owner of a call on a non-resumable upstream goes away: the call is lost (and not re-run).
        stuck = await RawClient(plain.url, http).call("ask_name")
        await plain.server.close()
        lost = await via_other.retry(stuck, {"elicit-1": accept_name()}, "ask_name")
        assert lost.error["code"] == -31002

        m = await scrape(http, other.url)
        assert m("mrtr_proxy_peer_forwards_total", result="ok") == 1
        assert m("mrtr_proxy_peer_forwards_total", result="unreachable") == 2
        assert m("mrtr_proxy_takeovers_total", result="ok") == 1
        assert m("mrtr_proxy_takeovers_total", result="lost") == 1
        requests = "mrtr_proxy_requests_total"
        assert m(requests, method=CALL, outcome="forwarded", upstream=UP) == 1
        assert m(requests, method=CALL, outcome="complete", upstream=UP) == 1
        assert m(requests, method=CALL, outcome="failed", upstream=UP) == 1
        assert m.total(requests) == 3


# -- label mapping (no I/O) -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "label"),
    [
        ("complete", "complete"),
        ("input_required", "input_required"),
        ("upstream_error:-32603", "upstream_error"),
        ("failed:-31001", "failed"),
        ("failed:-31003", "failed"),
        ("upstream_failed", "failed"),
        ("refused:-32020", "refused"),
        ("handle_rejected", "handle_rejected"),
        ("forwarded:200", "forwarded"),
        ("unknown_method", "unknown_method"),
        ("accepted", "accepted"),
        ("relayed:200", "relayed"),
        ("replaced", "other"),
        ("unauthorized:401", "other"),
        ("preflight", "other"),
        (None, "none"),
    ],
)
def test_outcome_class(outcome: str | None, label: str) -> None:
    assert outcome_class(None if outcome is None else outcome_of(outcome)[0]) == label


@pytest.mark.parametrize(
    ("method", "label"),
    [
        ("tools/call", "tools/call"),
        ("prompts/get", "prompts/get"),
        ("resources/read", "resources/read"),
        ("tools/list", "tools/list"),
        ("completion/complete", "completion/complete"),
        ("server/discover", "server/discover"),
        ("ping", "ping"),
        ("initialize", "initialize"),
        ("notifications/cancelled", "notification"),
        ("tools/call/../../x", "other"),
        ("a" * 10_000, "other"),
        (42, "other"),
        (None, "none"),
    ],
)
def test_method_label(method: object, label: str) -> None:
    assert method_label(method) == label


def test_rejection_reasons_are_a_fixed_set_covering_every_reason_in_the_code() -> None:
    for reason in ("auth_failed", "wrong_principal", "stale_round", "expired", "round_in_progress"):
        assert rejection_reason(reason) == reason
    assert rejection_reason("made-up reason") == "other"
    assert rejection_reason(None) == "other"
    source = "".join(p.read_text() for p in Path(__file__).parents[2].joinpath("proxy").rglob("*.py"))
    raised = set(re.findall(r'(?:HandleError|InvalidRequestState)\("(\w+)"\)', source))
    assert raised  # the pattern still finds them
    assert raised <= REJECTION_REASONS, raised - REJECTION_REASONS


def test_upstream_error_kind() -> None:
    assert upstream_error_kind(*outcome_of("upstream_error:-32603")) == "error_response"
    assert upstream_error_kind(*outcome_of("failed:-31001")) == "failed"
    assert upstream_error_kind(*outcome_of("upstream_failed")) == "failed"
    assert upstream_error_kind(*outcome_of("failed:-31004")) == "timeout"
    assert (
        upstream_error_kind(*outcome_of("failed:-31003")) is None
    )  # our own limit, not the upstream's fault
    assert upstream_error_kind(*outcome_of("complete")) is None


def test_unknown_labels_stay_bounded_and_registries_are_per_instance() -> None:
    one, two = Metrics(["a"]), Metrics(["a"])
    one.observe_request(
        line_of(**{"method": "x/" + "y" * 100, "upstream": "nope", "outcome": "replaced", "duration_ms": 1.5})
    )
    one.observe_request(
        line_of(**{"method": "tools/call", "upstream": "a", "outcome": "handle_rejected", "reason": "z"})
    )
    m, n = Scrape.parse(one.render().decode()), Scrape.parse(two.render().decode())
    assert m("mrtr_proxy_requests_total", method="other", outcome="other", upstream="other") == 1
    assert m("mrtr_proxy_handle_rejections_total", reason="other") == 1
    assert m("mrtr_proxy_request_duration_seconds_sum", method="other", upstream="other") == 0.0015
    assert n.total("mrtr_proxy_requests_total") == 0
    assert m("mrtr_proxy_parked_calls", upstream="a") == 0  # gauges read nothing before the app starts


def test_lines_count_the_same_however_often_their_series_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The children a kind of line counts in are looked up once (`_series_of`), for a bounded number of
    kinds; an unknown method, a kind past the bound, a route added later: all still counted right."""
    monkeypatch.setattr(metrics_module, "MAX_SERIES_KEYS", 2)
    metrics = Metrics(["a"])
    line = {"method": "tools/call", "upstream": "a", "outcome": "complete", "tool": "t", "duration_ms": 2.0}
    for _ in range(3):
        metrics.observe_request(line_of(**line))
    for n in range(3):  # more kinds than are kept
        metrics.observe_request(line_of(**{**line, "outcome": f"upstream_error:{n}"}))
    metrics.observe_request(line_of(**{**line, "method": "made/up"}))
    metrics.observe_request(line_of(**{"method": "ping", "upstream": "r", "outcome": "complete"}))
    metrics.route_members({"r": ("a",)})  # "r" is a label from now on
    metrics.observe_request(line_of(**{"method": "ping", "upstream": "r", "outcome": "complete"}))
    metrics.observe_request(line_of(**{**line, "outcome": "input_required"}))
    m = Scrape.parse(metrics.render().decode())
    assert m("mrtr_proxy_requests_total", method="tools/call", outcome="complete", upstream="a") == 3
    assert m("mrtr_proxy_requests_total", method="tools/call", outcome="upstream_error", upstream="a") == 3
    assert m("mrtr_proxy_upstream_errors_total", upstream="a", kind="error_response") == 3
    assert m("mrtr_proxy_tool_calls_total", upstream="a", tool="other", outcome="complete") == 3
    assert m("mrtr_proxy_requests_total", method="other", outcome="complete", upstream="a") == 1
    assert m("mrtr_proxy_requests_total", method="ping", outcome="complete", upstream="other") == 1
    assert m("mrtr_proxy_requests_total", method="ping", outcome="complete", upstream="r") == 1
    assert m("mrtr_proxy_input_required_rounds_total", upstream="a") == 1
    assert m("mrtr_proxy_request_duration_seconds_count", method="tools/call", upstream="a") == 7


def test_resumed_calls_counted_under_their_upstream_before_and_after_a_route_is_added() -> None:
    """A retry's parked age goes to a child looked up once per upstream: an unknown name under "other",
    and under its own label once `route_members` has made it one."""
    metrics = Metrics(["a"])
    for age in (1.0, 2.0):
        metrics.resumed("a", age)
    metrics.resumed("r", 4.0)
    metrics.route_members({"r": ("a",)})
    metrics.resumed("r", 8.0)
    m = Scrape.parse(metrics.render().decode())
    age = "mrtr_proxy_parked_call_age_seconds"
    assert m(f"{age}_count", upstream="a", end="resumed") == 2
    assert m(f"{age}_sum", upstream="a", end="resumed") == 3.0
    assert m(f"{age}_sum", upstream="other", end="resumed") == 4.0
    assert m(f"{age}_sum", upstream="r", end="resumed") == 8.0


def test_durations_summed_between_scrapes_equal_one_observe_each() -> None:
    """A line adds its duration to plain numbers, handed to the histogram at each scrape: the buckets, sum
    and count are those of `Histogram.observe` once per line, bounds included (a bucket is `le`)."""
    durations_ms = [0.1, 0.5, 0.50001, 1, 7.3, 250, 1000, 300_000, 400_000, 0]
    counted, reference = Metrics(["a"]), Metrics(["a"])
    line = {"method": "tools/call", "upstream": "a", "outcome": "complete", "tool": "t"}
    for n, ms in enumerate(durations_ms):
        counted.observe_request(line_of(**{**line, "duration_ms": ms}))
        reference.duration.labels("tools/call", "a").observe(ms / 1000)
        if n == 4:  # a scrape between them changes nothing
            counted.render()
    got, want = Scrape.parse(counted.render().decode()), Scrape.parse(reference.render().decode())
    histogram = [k for k in want.samples if k[0].startswith("mrtr_proxy_request_duration_seconds")]
    assert len(histogram) == 21  # 18 bounds, +Inf, sum and count
    for key in histogram:
        assert got.samples[key] == pytest.approx(want.samples[key]), key
    assert got("mrtr_proxy_requests_total", method="tools/call", outcome="complete", upstream="a") == 10
    assert Scrape.parse(counted.render().decode()).samples == got.samples  # nothing counted twice


def test_limits_and_drain_are_gauges_alerts_can_compare_against() -> None:
    metrics = Metrics(["a", "b"])
    before = Scrape.parse(metrics.render().decode())
    assert before("mrtr_proxy_draining_seconds") == 0
    assert not any(n == "mrtr_proxy_max_calls" for n, _ in before.samples)  # no limits known: none exported
    metrics.limits(max_calls=500, max_sessions={"a": 8, "b": 16}, drain_grace_s=30)
    metrics.drain_started()
    m = Scrape.parse(metrics.render().decode())
    assert m("mrtr_proxy_max_calls") == 500
    assert m("mrtr_proxy_upstream_max_sessions", upstream="a") == 8
    assert m("mrtr_proxy_upstream_max_sessions", upstream="b") == 16
    assert m("mrtr_proxy_drain_grace_seconds") == 30
    assert m("mrtr_proxy_draining_seconds") >= 0
    # every known labelled series starts at 0 (rate() and ratio alerts work before the first event)
    assert m("mrtr_proxy_upstream_errors_total", upstream="b", kind="timeout") == 0
    assert m("mrtr_proxy_handle_rejections_total", reason="expired") == 0


def test_public_render_sums_rejections_without_reason_and_tools_stay_bounded() -> None:
    metrics = Metrics(["a"], tools=["known"])
    for reason in ("auth_failed", "expired", "expired", "made-up"):
        metrics.observe_request(
            line_of(
                **{"method": "tools/call", "upstream": "a", "outcome": "handle_rejected", "reason": reason}
            )
        )
    for tool in ("known", "x" * 300, "another"):
        metrics.observe_request(
            line_of(**{"method": "tools/call", "upstream": "a", "outcome": "complete", "tool": tool})
        )
    public = Scrape.parse(metrics.render(public=True).decode())
    rejections = [k for k in public.samples if k[0] == "mrtr_proxy_handle_rejections_total"]
    assert rejections == [("mrtr_proxy_handle_rejections_total", frozenset())]
    assert public("mrtr_proxy_handle_rejections_total") == 4
    private = Scrape.parse(metrics.render().decode())
    assert private("mrtr_proxy_handle_rejections_total", reason="expired") == 2
    assert private("mrtr_proxy_handle_rejections_total", reason="other") == 1
    calls = "mrtr_proxy_tool_calls_total"
    assert private(calls, upstream="a", tool="known", outcome="complete") == 1
    assert private(calls, upstream="a", tool="other", outcome="complete") == 2
    assert {dict(labels)["tool"] for name, labels in private.samples if name == calls} == {"known", "other"}


def test_no_created_series_on_either_port() -> None:
    """prometheus_client adds `<name>_created` to every counter and histogram series: undocumented, read by
    nothing, 15 of 44 public samples and 33 of 79 admin ones, and the handle rejections had one only on the
    admin port. None now, on both."""
    metrics = Metrics(["a", "b"])
    metrics.observe_request(
        line_of(**{"method": "tools/call", "upstream": "a", "outcome": "handle_rejected"})
    )
    metrics.reaped("a", 3.0)
    for public in (True, False):
        text = metrics.render(public=public).decode()
        assert "_created" not in text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert families["mrtr_proxy_handle_rejections"].type == "counter"  # still a counter
        assert any(
            s.name == "mrtr_proxy_parked_call_age_seconds_count"
            for s in families["mrtr_proxy_parked_call_age_seconds"].samples
        )

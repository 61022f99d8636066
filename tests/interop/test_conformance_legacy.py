"""The conformance suite's legacy server scenarios (`--spec-version 2025-11-25`): parity, proxy vs direct.

`@modelcontextprotocol/conformance@0.2.0-alpha.12` applies 33 server scenarios at 2025-11-25 (the stateful
wire: `initialize`, `Mcp-Session-Id`, GET stream, DELETE). Each runs three times, the three at once:

- **direct** against `@modelcontextprotocol/server-everything` (streamableHttp);
- **relay**: a legacy client of mrtr-proxy (`…/mcp`) in front of a second server-everything (streamableHttp):
  the stateless byte-for-byte relay with sealed session ids (proxy/front/legacy/passthrough.py);
- **bridge**: the same proxy's `…/servers/bridge/mcp` in front of a third server-everything speaking the
  2024-11-05 HTTP+SSE transport: the stateful bridge (proxy/front/legacy/bridge/front.py). Its baseline is the
  direct run too (the same server, the transport the suite speaks).

Parity: a check that is SUCCESS directly must be SUCCESS through the proxy; a WARNING directly must not turn
into a FAILURE (nor go missing). Checks are matched by id and occurrence; INFO/SKIPPED entries are trace, not
verdicts. A scenario that fails directly is reported (docs/conformance.md), not required; its checks that do
pass directly (e.g. `wire-schema-valid`) are still held to parity. Differences that are inherent to what the
proxy is are listed in EXPECTED_DIFFERENCES with their reason, and must keep occurring (so the list stays
true). ~30-60 s. `MRTR_CONFORMANCE_KEEP=<dir>` keeps every run's checks.json under <dir>/<leg>/.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import peers
import pytest
import pytest_asyncio
import yaml

from interop.conformance import (
    ScenarioResult,
    list_server_scenarios_at,
    required_peers,
    run_scenario,
    start_proxy_config,
)

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(300)]

SPEC_VERSION = "2025-11-25"
# `conformance list --server --spec-version 2025-11-25`, in the suite's order (pending ones included:
# json-schema-2020-12, server-sse-polling; server-session-lifecycle was added after the release).
LEGACY_SCENARIOS: tuple[str, ...] = (
    "server-initialize",
    "server-session-lifecycle",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
)
# Scenarios server-everything passes directly (the rest ask for the suite's own fixture tools, prompts and
# resources — `test_image_content`, `test_simple_prompt`, `test://static-text`, … — which server-everything
# does not have). If this set shrinks, parity covers less: the test says so.
DIRECT_PASSES = frozenset(
    {
        "server-initialize",
        "logging-set-level",
        "ping",
        "tools-list",
        "tools-call-simple-text",  # vacuously: the suite accepts an isError "Tool test_simple_text not found"
        "tools-call-error",
        "server-sse-multiple-streams",
        "resources-list",
        "resources-subscribe",
        "resources-unsubscribe",
        "prompts-list",
    }
)
FRONTS = ("relay", "bridge")
# (front, scenario, check id) -> why the proxy cannot, or should not, match the direct run there.
EXPECTED_DIFFERENCES: dict[tuple[str, str, str], str] = {
    ("bridge", "server-sse-polling", "server-sse-priming-event"): (
        "SUCCESS directly, WARNING through the bridge ('Server did not send priming event with id and empty "
        "data on POST SSE stream'). Direct, server-everything's event store primes every POST stream with an "
        "event id. The bridge answers from an HTTP+SSE upstream, which has no event ids and no replay, so it "
        "sends none and a dropped reply cannot be resumed (front/legacy/bridge/front.py, module docstring: "
        "'Without event ids its reply cannot be resumed'); a priming id would promise a Last-Event-ID "
        "resumption it cannot keep. A SHOULD (WARNING), in a scenario the suite itself lists as pending"
    ),
}
_HELD = {"SUCCESS": frozenset({"SUCCESS"}), "WARNING": frozenset({"SUCCESS", "WARNING"})}


@dataclass
class LegacyRuns:
    scenarios: list[str]
    direct: dict[str, ScenarioResult] = field(default_factory=dict)
    fronts: dict[str, dict[str, ScenarioResult]] = field(default_factory=lambda: {f: {} for f in FRONTS})
    proxy_log: str = ""
    duration_s: float = 0.0


@dataclass(frozen=True)
class Regression:
    check: str  # "id" or "id#n" for the n-th (0-based, n > 0) check with that id
    check_id: str
    direct: str
    proxied: str  # "missing" when the proxied run has no such check
    error: str | None

    def __str__(self) -> str:
        why = f": {self.error}" if self.error else ""
        return f"{self.check}: {self.direct} directly, {self.proxied} through the proxy{why}"


def _by_occurrence(result: ScenarioResult) -> dict[str, tuple[str, str, str | None]]:
    seen: Counter[str] = Counter()
    out: dict[str, tuple[str, str, str | None]] = {}
    for check in result.checks:
        n = seen[check.id]
        seen[check.id] += 1
        out[check.id if n == 0 else f"{check.id}#{n}"] = (check.id, check.status, check.error)
    return out


def regressions(direct: ScenarioResult, proxied: ScenarioResult) -> list[Regression]:
    """Every check SUCCESS directly but not through the proxy, or WARNING directly but FAILURE (or missing)
    through it."""
    theirs = _by_occurrence(proxied)
    out = []
    for key, (check_id, status, _) in _by_occurrence(direct).items():
        if status not in _HELD:
            continue
        _, got, error = theirs.get(key, (check_id, "missing", None))
        if got not in _HELD[status]:
            out.append(Regression(key, check_id, status, got, error))
    return out


def _details(result: ScenarioResult, check_id: str) -> str:
    found = [c for c in result.checks if c.id == check_id]
    return json.dumps(found[0].details)[:1500] if found else "(no such check)"


async def _leg(url: str, scenario: str, keep: Path | None, leg: str) -> ScenarioResult:
    return await run_scenario(
        url, scenario, spec_version=SPEC_VERSION, keep_dir=None if keep is None else keep / leg
    )


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def legacy() -> AsyncIterator[LegacyRuns]:
    peers.require_peers({**required_peers(), "server-everything": peers.server_everything_entry()})
    started = time.monotonic()
    keep = Path(os.environ["MRTR_CONFORMANCE_KEEP"]) if os.environ.get("MRTR_CONFORMANCE_KEEP") else None
    runs = LegacyRuns(await list_server_scenarios_at(SPEC_VERSION))
    with tempfile.TemporaryDirectory(prefix="mrtr-legacy-conformance-") as tmp:
        config = Path(tmp) / "proxy.yaml"
        async with (
            peers.start_server_everything() as direct_url,
            peers.start_server_everything() as relayed_url,
            peers.start_server_everything("sse") as bridged_url,
        ):
            upstreams = [
                {"name": "relay", "transport": "streamable-http", "url": str(relayed_url)},
                {"name": "bridge", "transport": "sse", "url": str(bridged_url)},
            ]
            config.write_text(yaml.safe_dump({"upstreams": upstreams}))
            async with start_proxy_config(config) as proxy_url:
                urls: Mapping[str, str] = {
                    "relay": str(proxy_url),
                    "bridge": str(proxy_url).removesuffix("/mcp") + "/servers/bridge/mcp",
                }
                for scenario in runs.scenarios:  # the three legs of a scenario at once, scenarios in turn
                    direct, *proxied = await asyncio.gather(
                        _leg(direct_url, scenario, keep, "direct"),
                        *(_leg(urls[front], scenario, keep, front) for front in FRONTS),
                    )
                    runs.direct[scenario] = direct
                    for front, result in zip(FRONTS, proxied, strict=True):
                        runs.fronts[front][scenario] = result
                runs.proxy_log = proxy_url.peer.log_text(tail=None)
    runs.duration_s = time.monotonic() - started
    yield runs


def _table(runs: LegacyRuns) -> str:
    rows = [f"{'scenario':32} {'direct':6} {'relay':6} {'bridge':6}"]
    for s in runs.scenarios:
        rows.append(
            f"{s:32} {runs.direct[s].verdict:6} " + " ".join(f"{runs.fronts[f][s].verdict:6}" for f in FRONTS)
        )
    return "\n".join(rows) + f"\n({runs.duration_s:.1f}s)"


async def test_the_suite_applies_these_scenarios_at_2025_11_25(legacy: LegacyRuns) -> None:
    assert legacy.scenarios == list(LEGACY_SCENARIOS)


async def test_server_everything_passes_the_baseline_directly(legacy: LegacyRuns) -> None:
    """Parity is only as wide as the direct baseline: the scenarios documented as passing still pass."""
    passed = {s for s, r in legacy.direct.items() if r.passed}
    lost = sorted(DIRECT_PASSES - passed)
    assert not lost, "no longer pass directly:\n" + "\n".join(legacy.direct[s].describe() for s in lost)
    assert all(r.completed for r in legacy.direct.values()), _table(legacy)


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("scenario", LEGACY_SCENARIOS)
async def test_parity(legacy: LegacyRuns, front: str, scenario: str) -> None:
    if scenario not in legacy.direct:
        pytest.fail(f"the suite no longer applies {scenario} at {SPEC_VERSION}")
    direct = legacy.direct[scenario]
    if not direct.completed:
        pytest.skip(f"the direct run did not complete, nothing to compare:\n{direct.describe()}")
    proxied = legacy.fronts[front][scenario]
    assert proxied.completed, f"{proxied.describe()}\n--- proxy log:\n{legacy.proxy_log[-3000:]}"
    expected = {c for (f, s, c) in EXPECTED_DIFFERENCES if (f, s) == (front, scenario)}
    found = regressions(direct, proxied)
    unexpected = [r for r in found if r.check_id not in expected]
    assert not unexpected, (
        f"{scenario}: passed directly, not through the proxy's {front}:\n"
        + "\n".join(
            f"  {r}\n    direct details:  {_details(direct, r.check_id)}\n"
            f"    proxied details: {_details(proxied, r.check_id)}"
            for r in unexpected
        )
        + f"\n--- direct:\n{direct.describe()}\n--- through the {front}:\n{proxied.describe()}"
    )
    gone = expected - {r.check_id for r in found}
    assert not gone, (
        f"expected differences no longer occur (update EXPECTED_DIFFERENCES and the docs): {gone}"
    )
    if direct.passed and not expected:
        assert proxied.passed, f"{scenario} passed directly:\n{proxied.describe()}"


async def test_the_relay_hands_out_sealed_session_ids(legacy: LegacyRuns) -> None:
    """The one difference on the relay's wire a check sees: `Mcp-Session-Id` is the upstream's id sealed with
    the principal (longer, opaque, still visible ASCII), never the upstream's own."""
    ids = {}
    for leg, result in (("direct", legacy.direct), ("relay", legacy.fronts["relay"])):
        details = [c for c in result["server-initialize"].checks if c.id == "server-session-id-visible-ascii"]
        assert details and details[0].status == "SUCCESS", result["server-initialize"].describe()
        ids[leg] = details[0].details["sessionId"]
    assert len(ids["direct"]) == 36  # server-everything: a UUID
    assert len(ids["relay"]) > 100 and ids["relay"] != ids["direct"]


@pytest.mark.parametrize("front", FRONTS)
async def test_the_proxy_rejects_dns_rebinding(legacy: LegacyRuns, front: str) -> None:
    """Where the proxy does better than the upstream: server-everything answers a request with Host and Origin
    `evil.example.com` (200); the proxy's Origin check refuses it (403) before it reaches either front."""
    result = legacy.fronts[front]["dns-rebinding-protection"]
    assert result.passed, result.describe()
    assert not legacy.direct["dns-rebinding-protection"].passed


async def test_the_proxy_relayed_and_logged_no_errors(legacy: LegacyRuns) -> None:
    lines = [json.loads(line) for line in legacy.proxy_log.splitlines() if line.startswith("{")]
    eras = Counter(
        (line.get("upstream"), line.get("era")) for line in lines if line.get("event") == "request"
    )
    assert eras[("relay", "legacy")] > len(LEGACY_SCENARIOS), eras
    assert eras[("bridge", "legacy")] > len(LEGACY_SCENARIOS), eras
    errors = [line for line in lines if line.get("level") == "error"]
    assert not errors, "\n".join(json.dumps(e) for e in errors)

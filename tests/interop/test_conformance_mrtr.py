"""The official conformance suite's MRTR server scenarios, run against mrtr-proxy in front of a legacy server.

`@modelcontextprotocol/conformance@0.2.0-alpha.12`, its 14 `input-required-result-*` scenarios, against
`tests/fixtures/conformance_legacy_server.py` (FastMCP 1.30, asks inline) behind `mrtr-proxy serve`. One run
of the whole set (~16 s) is shared by the module. What each scenario checks: docs/conformance.md.

A scenario passes when every check is SUCCESS: WARNING (the suite's SHOULD-level checks, exit code 0) counts
as not passing. The two a faithful proxy cannot pass are strict xfails that must fail with exactly the
expected check, so a different failure in them is still reported.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from unhandled import is_error

from interop.conformance import (
    SCENARIOS,
    ConformanceRun,
    ScenarioResult,
    list_server_scenarios,
    run_against_proxy,
)

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]


class ScenarioFailed(AssertionError):
    """The scenario did not pass (raised only after its failure was checked to be the expected one)."""


@dataclass(frozen=True)
class KnownGap:
    check_id: str  # the one check that does not pass
    message: str  # a substring of its errorMessage


# Scenarios no proxy in front of a legacy server can pass, and why.
KNOWN_GAPS: dict[str, tuple[KnownGap, str]] = {
    "input-required-result-basic-elicitation": (
        KnownGap("sep-2322-elicitation-incomplete", 'inputRequests missing expected key "user_name"'),
        "the scenario requires the inputRequests key to be exactly `user_name` (a name only the original "
        "server could choose); a legacy server sends a JSON-RPC request with no key at all, so the proxy "
        "mints `elicit-1`. SEP-2322 makes keys server-chosen and opaque (every other scenario retries with "
        "whatever key the server returned; this one hard-codes `user_name` in its retry too)",
    ),
    "input-required-result-ignore-extra-params": (
        KnownGap("sep-2322-ignore-unexpected-params", "Server did not return complete result"),
        "the scenario's FIRST request already carries `inputResponses: {user_name: …, +2 unknown keys}` "
        "with no requestState and expects a complete result; only a server that itself chose the key "
        "`user_name` can consume an answer it never asked for. Without a requestState the proxy starts a "
        "fresh legacy call, which asks (elicit-1) → input_required. A WARNING-level (SHOULD) check",
    ),
}

# What the legacy tool returned, proving the client's answers reached it through the proxy (the suite
# itself only checks that the final result is `complete`): scenario -> (check id, text in its details).
ANSWERS_REACHED_THE_TOOL: dict[str, tuple[str, str]] = {
    "input-required-result-basic-sampling": (
        "sep-2322-sampling-complete",
        "Sampling said: The capital of France is Paris.",
    ),
    "input-required-result-basic-list-roots": (
        "sep-2322-list-roots-complete",
        "Roots (1): Test Root<file:///test/root>",
    ),
    "input-required-result-request-state": ("sep-2322-request-state-complete", "state-ok: confirmed=True"),
    "input-required-result-multiple-input-requests": (
        "sep-2322-multiple-inputs-complete",
        "name=Alice; greeting=Hello there!; roots=Test Root<file:///test/root>",
    ),
    "input-required-result-multi-round": ("sep-2322-multi-round-r3", "Alice likes blue"),
    "input-required-result-non-tool-request": (
        "sep-2322-non-tool-complete",
        "Use this context: test context",
    ),
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def conformance() -> AsyncIterator[ConformanceRun]:
    yield await run_against_proxy(SCENARIOS)


def _texts(result: Any) -> list[str]:
    """Every text content of a CallToolResult / GetPromptResult (as the suite recorded it)."""
    if not isinstance(result, dict):
        return []
    parts = list(result.get("content") or []) + [m.get("content", {}) for m in result.get("messages") or []]
    return [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"]


def _check(result: ScenarioResult, check_id: str) -> Any:
    found = [c for c in result.checks if c.id == check_id]
    assert found, f"no check {check_id!r}\n{result.describe()}"
    return found[0]


async def test_the_suite_offers_exactly_these_scenarios() -> None:
    assert await list_server_scenarios() == list(SCENARIOS)


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(s, marks=pytest.mark.xfail(strict=True, raises=ScenarioFailed, reason=KNOWN_GAPS[s][1]))
        if s in KNOWN_GAPS
        else s
        for s in SCENARIOS
    ],
)
async def test_scenario(conformance: ConformanceRun, scenario: str) -> None:
    result = conformance.results[scenario]
    assert result.completed, f"{result.describe()}\n--- proxy log:\n{conformance.proxy_log[-3000:]}"
    if scenario in KNOWN_GAPS:
        gap = KNOWN_GAPS[scenario][0]
        assert [c.id for c in result.problems] == [gap.check_id], result.describe()
        assert gap.message in (result.problems[0].error or ""), result.describe()
    if not result.passed:
        raise ScenarioFailed(result.describe())


@pytest.mark.parametrize("scenario", list(ANSWERS_REACHED_THE_TOOL))
async def test_answers_reached_the_legacy_tool(conformance: ConformanceRun, scenario: str) -> None:
    result = conformance.results[scenario]
    check_id, expected = ANSWERS_REACHED_THE_TOOL[scenario]
    details = _check(result, check_id).details
    assert isinstance(details, dict)
    assert expected in _texts(details.get("result")), result.describe()


async def test_tampered_state_gets_the_one_invalid_request_state_error(conformance: ConformanceRun) -> None:
    result = conformance.results["input-required-result-tampered-state"]
    details = _check(result, "sep-2322-reject-tampered-state").details
    assert details == {"tamperedResponse": {"code": -32602, "message": "Invalid requestState"}}


async def test_capability_check_asks_only_through_sampling(conformance: ConformanceRun) -> None:
    """The client declared only `sampling`: the proxy declared only that upstream, the legacy tool saw it."""
    result = conformance.results["input-required-result-capability-check"]
    details = _check(result, "sep-2322-respect-client-capabilities").details
    requests = details["result"]["inputRequests"]
    assert [r["method"] for r in requests.values()] == ["sampling/createMessage"], requests


async def test_keys_are_the_proxys_own(conformance: ConformanceRun) -> None:
    """Three requests outstanding at once (one inline, two on the GET stream) → one round, three keys."""
    result = conformance.results["input-required-result-multiple-input-requests"]
    details = _check(result, "sep-2322-multiple-inputs-incomplete").details
    requests = details["result"]["inputRequests"]
    prefixes = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}
    assert sorted(key.rsplit("-", 1)[0] for key in requests) == ["elicit", "roots", "sample"], requests
    for key, request in requests.items():
        prefix, number = key.rsplit("-", 1)
        assert (prefix, number.isdigit()) == (prefixes[request["method"]], True), requests


async def test_the_proxy_logged_no_errors(conformance: ConformanceRun) -> None:
    errors = [line for line in conformance.proxy_log.splitlines() if is_error(line)]
    assert not errors, "\n".join(errors)

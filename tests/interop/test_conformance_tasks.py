"""The official conformance suite's Tasks scenarios (SEP-2663), against mrtr-proxy before a legacy server.

`@modelcontextprotocol/conformance@0.2.0-alpha.12`, its 10 `tasks-*` server scenarios (extension scenarios:
run with `--force` at spec version 2026-07-28), against `tests/fixtures/conformance_tasks_server.py` (FastMCP
1.30: plain tools that sleep, fail, or elicit inline) behind `mrtr-proxy serve` with `calls.tasks` set as
`TASKS_CONFIG` says. One run of the whole set (~20 s) is shared by the module. What each scenario checks
and how the proxy meets it: docs/conformance.md.

A scenario passes when every check is SUCCESS (WARNING counts as not passing). `tasks-status-notifications`
is skipped by the suite itself (its harness awaits a rewrite for `subscriptions/listen`); the proxy's
`notifications/tasks` on listen streams are tested in tests/e2e/test_listen.py.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import peers
import pytest
import pytest_asyncio
import yaml
from unhandled import is_error

from interop.conformance import ConformanceRun, ScenarioResult, list_server_scenarios, run_against_proxy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

TASK_SCENARIOS: tuple[str, ...] = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
# The proxy's policy for the fixture: a call still running after 300 ms becomes a task (slow_compute,
# protocol_error_job, and test_tool_with_task once its MRTR round is answered); the tools the suite wants as
# tasks from the start, or requires the extension for, are forced.
TASKS_CONFIG: dict[str, Any] = {
    "policy": "after_ms",
    "after_ms": 300,
    "poll_interval_ms": 100,
    "tools": ["failing_job", "confirm_delete", "multi_input"],
}
FIXTURE = peers.FIXTURES_DIR / "conformance_tasks_server.py"
SKIPPED_BY_THE_SUITE = {"tasks-status-notifications"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def conformance() -> AsyncIterator[ConformanceRun]:
    with tempfile.TemporaryDirectory(prefix="mrtr-tasks-conformance-") as tmp:
        config = Path(tmp) / "proxy.yaml"
        config.write_text(
            yaml.safe_dump(
                {"calls": {"tasks": TASKS_CONFIG}, "upstreams": [{"name": "default", "url": "http://x/mcp"}]}
            )
        )
        yield await run_against_proxy(TASK_SCENARIOS, fixture=FIXTURE, config=config, force=True)


def _check(result: ScenarioResult, check_id: str) -> Any:
    found = [c for c in result.checks if c.id == check_id]
    assert found, f"no check {check_id!r}\n{result.describe()}"
    return found[0]


async def test_the_suite_offers_exactly_these_task_scenarios() -> None:
    assert await list_server_scenarios("tasks-") == list(TASK_SCENARIOS)


@pytest.mark.parametrize("scenario", TASK_SCENARIOS)
async def test_scenario(conformance: ConformanceRun, scenario: str) -> None:
    result = conformance.results[scenario]
    assert result.completed, f"{result.describe()}\n--- proxy log:\n{conformance.proxy_log[-3000:]}"
    assert result.passed, f"{result.describe()}\n--- proxy log:\n{conformance.proxy_log[-3000:]}"
    statuses = {c.status for c in result.checks}
    if scenario in SKIPPED_BY_THE_SUITE:
        assert statuses == {"SKIPPED"}, result.describe()
    else:
        assert statuses == {"SUCCESS"}, result.describe()
        assert "wire-schema-valid" in {c.id for c in result.checks}


async def test_cancel_reaches_the_cancelled_status(conformance: ConformanceRun) -> None:
    details = _check(conformance.results["tasks-lifecycle"], "sep-2663-cancel-ack-empty-result").details
    assert details == {"cancelAck": {"resultType": "complete"}, "statusAfterCancel": "cancelled"}


async def test_task_ids_are_the_proxys_sealed_handles(conformance: ConformanceRun) -> None:
    details = _check(conformance.results["tasks-lifecycle"], "sep-2663-result-type-task-on-create").details
    assert details["resultType"] == "task" and details["status"] == "working"
    assert len(details["taskId"]) > 100  # a sealed claims blob, not a counter or a uuid


async def test_the_proxy_logged_no_errors(conformance: ConformanceRun) -> None:
    errors = [line for line in conformance.proxy_log.splitlines() if is_error(line)]
    assert not errors, "\n".join(errors)

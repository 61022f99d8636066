"""What `/readyz` calls a reachable stdio upstream (upstream/reachability.py): its command starts and
answers `initialize`. A command that is on PATH but dies at once, or never answers, is not reachable."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from proxy.config import TimeoutsConfig, UpstreamConfig
from proxy.upstream.pool_sessions import no_call_answer
from proxy.upstream.reachability import RECHECK_S, InitializeChecks, command_answers

pytestmark = pytest.mark.asyncio(loop_scope="session")
FAKE = Path(__file__).parent / "fakes" / "fake_stdio_server.py"


def stdio(*args: str, command: str = sys.executable) -> UpstreamConfig:
    timeouts = TimeoutsConfig(connect_s=1, initialize_s=1)
    return UpstreamConfig(name="s", transport="stdio", command=command, args=args, timeouts=timeouts)


@pytest.mark.parametrize(
    ("upstream", "reachable"),
    [
        pytest.param(stdio(str(FAKE)), True, id="answers-initialize"),
        pytest.param(stdio("-c", "raise SystemExit(3)"), False, id="dies-at-once"),
        pytest.param(stdio("-c", "import time; time.sleep(60)"), False, id="never-answers"),
        pytest.param(stdio(command="/nonexistent/mcp-server"), False, id="not-installed"),
    ],
)
async def test_a_command_is_reachable_when_it_answers_initialize(
    upstream: UpstreamConfig, reachable: bool
) -> None:
    async with asyncio.timeout(30):
        assert (await command_answers(upstream, no_call_answer(upstream)) is None) is reachable


async def test_results_are_kept_and_concurrent_probes_share_one_check() -> None:
    now = [0.0]
    checks = InitializeChecks(clock=lambda: now[0])
    upstream = stdio(str(FAKE))
    answer = no_call_answer(upstream)
    probes = (checks.problem("s", lambda: command_answers(upstream, answer)) for _ in range(3))
    assert await asyncio.gather(*probes) == [None] * 3
    gone = stdio(command="/nonexistent/x")  # same name: within RECHECK_S the kept result answers
    assert await checks.problem("s", lambda: command_answers(gone, answer)) is None
    now[0] = RECHECK_S + 1
    assert await checks.problem("s", lambda: command_answers(gone, answer))  # checked again: why not
    await checks.close()

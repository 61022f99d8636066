"""Shared test configuration: the ``peers`` marker's install check, and fixtures for the real peers.

``tests/`` has no ``__init__.py``, so pytest puts it on ``sys.path`` and test modules anywhere below
import the harness as ``import peers`` (see tests/peers.py).

Tests marked ``peers`` FAIL (they are not skipped) when the peers are not installed: run
``scripts/setup-peers.sh``.

Any error-level ``request.unhandled`` a proxy logs during the run fails the run and names the test
(tests/unhandled.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import peers
import pytest
import pytest_asyncio
from unhandled_hooks import (  # noqa: F401 - hooks: the session-wide request.unhandled check
    pytest_configure,
    pytest_runtest_protocol,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("peers") is None:
        return
    missing = peers.missing_peers()
    if missing:
        pytest.fail(
            f"MCP test peers are not installed: {', '.join(missing)}.\n{peers.SETUP_HINT}",
            pytrace=False,
        )


# Module-scoped peers, shared by the tests of one module; they run on the session event loop
# (pyproject sets asyncio_default_fixture_loop_scope = "session").


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp_url() -> AsyncIterator[peers.PeerUrl]:
    """FastMCP 1.30 fixture server over streamable-http: ``http://127.0.0.1:PORT/mcp``."""
    async with peers.start_fastmcp() as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp_resumable_url() -> AsyncIterator[peers.PeerUrl]:
    """Same server with an event store (SSE ``id:``s, priming events, Last-Event-ID replay)."""
    async with peers.start_fastmcp(event_store=True, retry_ms=200) as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fastmcp_sse_url() -> AsyncIterator[peers.PeerUrl]:
    """Same server over the 2024-11-05 HTTP+SSE transport: ``http://127.0.0.1:PORT/sse``."""
    async with peers.start_fastmcp("sse") as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def server_everything_url() -> AsyncIterator[peers.PeerUrl]:
    """``@modelcontextprotocol/server-everything`` over streamable-http: ``http://127.0.0.1:PORT/mcp``."""
    async with peers.start_server_everything() as url:
        yield url

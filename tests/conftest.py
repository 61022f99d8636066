"""Shared test configuration: the ``peers`` marker (applied and checked here), and fixtures for the peers.

``tests/`` has no ``__init__.py``, so pytest puts it on ``sys.path`` and test modules anywhere below
import the harness as ``import peers`` (see tests/peers.py).

Every test that starts a real peer or a real proxy process is marked ``peers`` at collection
(``pytest_collection_modifyitems`` below), so ``pytest -m "not peers"`` (``make test-fast``) is the fast lane
of in-process tests. Tests marked ``peers`` FAIL (they are not skipped) when the peers are not installed: run
``scripts/setup-peers.sh``.

Any error-level ``request.unhandled`` a proxy logs during the run fails the run and names the test
(tests/unhandled.py).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

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

TESTS = Path(__file__).resolve().parent
# Whole rooms whose every test runs real processes (peers, proxies, nginx, helm, the interop clients).
PEER_ROOMS = ("e2e", "interop", "soak", "helm")
# What starting a real peer or proxy process looks like in test code (tests/peers.py and helpers above it).
STARTS_PROCESS = re.compile(
    r"create_subprocess_(exec|shell)|subprocess\.Popen|\bPopen\(|\brun_peer\(|\brun_once\(|\bpeers\.start_\w+"
    r"|\bPeerProcess\b|\b(fastmcp|fastmcp_resumable|fastmcp_sse|server_everything)_url\b"
)


def _defined_in_tests(obj: object) -> bool:
    code = getattr(obj, "__code__", None)
    if code is not None:
        return str(code.co_filename).startswith(str(TESTS))
    source = getattr(inspect.getmodule(obj), "__file__", None) or ""
    return inspect.isclass(obj) and source.startswith(str(TESTS))


def _names(code: Any) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if inspect.iscode(const):
            yield from _names(const)


def _starts_process(obj: object, seen: set[int]) -> bool:
    """Does this test-code function (or class), or any test-code function it names, start a peer/proxy?"""
    obj = inspect.unwrap(obj) if callable(obj) else obj  # type: ignore[arg-type]
    if id(obj) in seen or not _defined_in_tests(obj):
        return False
    seen.add(id(obj))
    try:
        if STARTS_PROCESS.search(inspect.getsource(obj)):  # type: ignore[arg-type]
            return True
    except (OSError, TypeError):
        return False
    code = getattr(obj, "__code__", None)
    scope = getattr(obj, "__globals__", None) or vars(inspect.getmodule(obj) or object)
    names = _names(code) if code is not None else iter(())
    return any(_starts_process(scope[name], seen) for name in names if name in scope)


def _needs_processes(item: pytest.Item) -> bool:
    path = Path(str(item.path)).resolve()
    if path.is_relative_to(TESTS) and path.relative_to(TESTS).parts[0] in PEER_ROOMS:
        return True
    funcs: list[Callable[..., Any]] = [item.obj] if isinstance(item, pytest.Function) else []
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        funcs.extend(d.func for d in defs)
    seen: set[int] = set()
    return any(_starts_process(f, seen) for f in funcs)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("peers") is None and _needs_processes(item):
            item.add_marker(pytest.mark.peers)


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

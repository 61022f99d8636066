"""The pytest hooks of the session-wide request.unhandled check (tests/unhandled.py holds the book they
keep; it imports no pytest, so tests/peers.py and the bench that uses it need none)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from unhandled import BETWEEN_TESTS, BOOK, EXPECTED, RecordingLogger


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{EXPECTED}: the test provokes request.unhandled on purpose")
    from proxy.front import fallback

    if not isinstance(fallback.log, RecordingLogger):
        fallback.log = RecordingLogger(fallback.log, BOOK)  # type: ignore[assignment]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    BOOK.current = item.nodeid
    try:
        yield
    finally:
        BOOK.scan()  # what the subprocess proxies logged meanwhile is this test's
        BOOK.current = BETWEEN_TESTS
        if item.get_closest_marker(EXPECTED) is not None:  # the bug is the test's own, on purpose
            BOOK.found = [(test, what) for test, what in BOOK.found if test != item.nodeid]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    BOOK.scan()
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:  # a pytest-xdist worker: the controller judges the whole run
        worker_output["unhandled"] = list(BOOK.found)
        return
    if BOOK.found and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist (controller): what a worker found is the run's."""
    found = getattr(node, "workeroutput", {}).get("unhandled", [])
    BOOK.found.extend((str(test), str(what)) for test, what in found)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not BOOK.found:
        return
    terminalreporter.section("request.unhandled logged at error level: the run fails", red=True)
    for test, what in BOOK.found:
        terminalreporter.write_line(f"{test}: {what}")

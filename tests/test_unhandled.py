"""The session-wide check of tests/unhandled.py, performed for real: an inner pytest run whose tests all pass
but whose proxies log `request.unhandled` (an in-process one through the real fallback middleware, a
subprocess with a log file, a short-lived command) fails, and its summary names each test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

INNER = """
import asyncio
import json
import sys

import aiohttp
import peers
import pytest
from aiohttp import web
from waiting import eventually
from aiohttp.test_utils import TestServer

from proxy.front.fallback import json_answers

LINE = json.dumps({"event": "request.unhandled", "level": "error", "path": "/mcp"})


async def boom(request: web.Request) -> web.Response:
    raise RuntimeError("a bug")


def test_a_bug_in_process() -> None:
    async def main() -> None:
        app = web.Application(middlewares=[json_answers])
        app.router.add_post("/mcp", boom)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            async with aiohttp.ClientSession() as http, http.post(server.make_url("/mcp")) as resp:
                assert resp.status == 500
        finally:
            await server.close()

    asyncio.run(main())


def test_a_bug_in_a_served_subprocess() -> None:
    code = (
        "import http.server, sys; print(sys.argv[2], file=sys.stderr, flush=True); "
        "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), http.server.BaseHTTPRequestHandler)"
        ".serve_forever()"
    )

    async def main() -> None:
        async with peers.run_peer("liar", lambda port: [sys.executable, "-c", code, str(port), LINE]) as liar:
            await eventually(lambda: LINE in liar.log_text(None), "the subprocess's line in its log", 10)

    asyncio.run(main())


def test_a_bug_in_a_short_run() -> None:
    code = f"import sys; print({LINE!r}, file=sys.stderr)"
    assert asyncio.run(peers.run_once([sys.executable, "-c", code], limit_s=30)).returncode == 0


@pytest.mark.unhandled_expected
def test_a_bug_on_purpose() -> None:
    assert asyncio.run(peers.run_once([sys.executable, "-c", f"print({LINE!r})"], limit_s=30)).returncode == 0


def test_a_warning_is_not_a_bug() -> None:
    line = json.dumps({"event": "request.unhandled", "level": "info"})
    assert asyncio.run(peers.run_once([sys.executable, "-c", f"print({line!r})"], limit_s=30)).returncode == 0
"""

HOOKS = (
    "from unhandled_hooks import pytest_configure, pytest_runtest_protocol, pytest_sessionfinish, "
    "pytest_terminal_summary  # noqa: F401\n"
)


def test_request_unhandled_fails_a_green_run_and_names_the_tests(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(HOOKS)
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = run.stdout + run.stderr
    assert "5 passed" in out, out
    assert run.returncode == 1, out  # every test passed, and the run failed
    assert "request.unhandled logged at error level: the run fails" in out, out
    for name in ("test_a_bug_in_process", "test_a_bug_in_a_served_subprocess", "test_a_bug_in_a_short_run"):
        said = [line for line in out.splitlines() if line.startswith(f"test_inner.py::{name}: ")]
        assert len(said) == 1 and "request.unhandled" in said[0], out
    assert "test_inner.py::test_a_warning_is_not_a_bug:" not in out, out
    assert "test_inner.py::test_a_bug_on_purpose:" not in out, out

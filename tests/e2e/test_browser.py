"""Browsers through the proxy: CORS for `front.allowed_origins`, in a real browser.

Headless Chromium (Debian's `chromium` package, installed by `scripts/setup-peers.sh browser`) driven by
Playwright for Python (.peers/browser) loads a page from another origin (an aiohttp server on another
127.0.0.1 port) whose JavaScript completes an MRTR round trip with `fetch` through the real proxy in front of
FastMCP 1.30: `tools/call ask_name` → `input_required` → the retry with `inputResponses` and `requestState`
→ `accept:Chromium`; a legacy (2025-11-25) client on the same page reads its `Mcp-Session-Id`, calls a tool
in that session and ends it with DELETE. A page from an origin that is not allowed is refused: its
preflighted request and its simple request both reject in the page, and the proxy logged both refusals.

The same round trip with an aiohttp client (the headers a browser relies on) runs without the browser.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from structlog.testing import capture_logs

from e2e.flows import text_of
from e2e.harness import RawClient, RunningProxy, accept_name, running_proxy
from proxy.config import FrontConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

CHROMIUM = Path("/usr/bin/chromium")
PAGE = peers.FIXTURES_DIR / "browser" / "mrtr_page.html"
DRIVER = Path(__file__).resolve().parent / "clients" / "browser_driver.py"


def browser_python() -> Path:
    return peers.peers_dir() / "browser" / "bin" / "python"


def os_has_chromium_package() -> bool:
    """Whether this OS's package manager offers `chromium` (Debian and derivatives: apt)."""
    if shutil.which("apt-cache") is None:
        return False
    shown = subprocess.run(
        ["apt-cache", "show", "chromium"], capture_output=True, text=True, timeout=30, check=False
    )
    return shown.returncode == 0 and "Package: chromium" in shown.stdout


def require_browser() -> None:
    if not CHROMIUM.exists():
        if not os_has_chromium_package():
            pytest.skip(
                "this OS has no chromium package (apt-cache show chromium): real-browser test skipped"
            )
        pytest.fail(f"{CHROMIUM} is missing: run `scripts/setup-peers.sh browser`", pytrace=False)
    if not browser_python().exists():
        pytest.fail(f"{browser_python()} is missing (Playwright): run `scripts/setup-peers.sh browser`")


@dataclass
class Site:
    origin: str  # scheme://host:port, as a browser sends it in Origin


@contextlib.asynccontextmanager
async def page_server() -> AsyncIterator[Site]:
    """Serves the page at / from its own 127.0.0.1 port: an origin other than the proxy's."""

    async def page(_: web.Request) -> web.Response:
        return web.Response(body=PAGE.read_bytes(), content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield Site(str(server.make_url("")).rstrip("/"))
    finally:
        await server.close()


@dataclass
class Setup:
    proxy: RunningProxy
    allowed: Site
    other: Site


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def setup(fastmcp_url: str) -> AsyncIterator[Setup]:
    async with contextlib.AsyncExitStack() as stack:
        allowed = await stack.enter_async_context(page_server())
        other = await stack.enter_async_context(page_server())
        front = FrontConfig(allowed_origins=(allowed.origin,))
        # A wide gather window: the round must not depend on how loaded the machine is.
        proxy = await stack.enter_async_context(running_proxy(fastmcp_url, front=front, gather_window_ms=300))
        yield Setup(proxy, allowed, other)


async def test_an_allowed_origin_does_mrtr_with_the_headers_a_browser_needs(setup: Setup) -> None:
    async with aiohttp.ClientSession() as http:
        client = RawClient(setup.proxy.url, http)
        origin = {"Origin": setup.allowed.origin}
        first_body = client.body("tools/call", {"name": "ask_name", "arguments": {}})
        first = await client.send(first_body, {**client.headers(first_body), **origin})
        assert first.result["resultType"] == "input_required"
        assert first.headers["Access-Control-Allow-Origin"] == setup.allowed.origin
        assert "x-request-id" in first.headers["Access-Control-Expose-Headers"].lower()
        retry_body = client.body(
            "tools/call",
            {
                "name": "ask_name",
                "arguments": {},
                "inputResponses": {"elicit-1": accept_name("Origin")},
                "requestState": first.result["requestState"],
            },
        )
        final = await client.send(retry_body, {**client.headers(retry_body), **origin})
        assert text_of(final.result) == "accept:Origin"
        assert final.headers["Access-Control-Allow-Origin"] == setup.allowed.origin
        assert "Origin" in final.headers["Vary"]


async def run_pages(*urls: str) -> list[dict[str, Any]]:
    run = await peers.run_once([str(browser_python()), str(DRIVER), *urls], limit_s=120)
    assert run.returncode == 0 and not run.timed_out, f"browser driver failed:\n{run.stderr[-4000:]}"
    results: list[dict[str, Any]] = json.loads(run.stdout)
    return results


async def test_chromium_page_on_an_allowed_origin_completes_an_mrtr_round_trip(setup: Setup) -> None:
    live_before = setup.proxy.live  # the module's proxy: what this test leaves
    require_browser()
    allowed_url = f"{setup.allowed.origin}/?proxy={setup.proxy.url}&mode=mrtr"
    other_url = f"{setup.other.origin}/?proxy={setup.proxy.url}&mode=refused"
    legacy_url = f"{setup.allowed.origin}/?proxy={setup.proxy.url}&mode=legacy"
    with capture_logs() as logs:
        allowed, legacy, other = await run_pages(allowed_url, legacy_url, other_url)

    done = allowed["result"]
    assert "error" not in done, allowed
    assert done["origin"] == setup.allowed.origin
    assert done["first"] == {
        "status": 200,
        "resultType": "input_required",
        "keys": ["elicit-1"],
        "method": "elicitation/create",
        "message": "What is your name?",
        "requestStateLength": done["first"]["requestStateLength"],
        "requestId": done["first"]["requestId"],
    }
    assert done["first"]["requestStateLength"] > 0
    assert done["first"]["requestId"]  # readable by the page: exposed
    assert done["final"]["status"] == 200
    assert done["final"]["resultType"] == "complete"
    assert done["final"]["text"] == "accept:Chromium"
    assert setup.proxy.live == live_before

    session = legacy["result"]
    assert "error" not in session, legacy
    assert session["initialize"]["status"] == 200
    assert session["initialize"]["protocolVersion"] == "2025-11-25"
    assert session["initialize"]["sessionIdLength"] > 60  # read by the page (exposed): the sealed id
    assert (session["notification"], session["delete"]) == (202, 200)
    assert session["call"] == {"status": 200, "text": "from a page"}

    refused = other["result"]
    assert refused["origin"] == setup.other.origin
    assert refused["preflighted"]["rejected"] is True, refused  # fetch rejects: TypeError: Failed to fetch
    assert "TypeError" in refused["preflighted"]["error"]
    assert refused["simple"]["rejected"] is True, refused
    requests = [e for e in logs if e.get("event") == "request"]
    preflights = [e for e in requests if e["http_method"] == "OPTIONS"]
    assert {(e["status"], e.get("origin")) for e in preflights} >= {(403, setup.other.origin)}
    assert any(e["status"] == 204 for e in preflights), "the allowed page's preflight was answered"
    refused_posts = [e for e in requests if e["http_method"] == "POST" and e["status"] == 403]
    assert [e["outcome"] for e in refused_posts] == ["refused:-32600"]  # the simple request, not preflighted
    served = [
        e for e in requests if e["http_method"] == "POST" and e.get("era") != "legacy" and e["status"] != 403
    ]
    assert [(e["status"], e["outcome"]) for e in served] == [(200, "input_required"), (200, "complete")]
    relayed = [(e["http_method"], e["outcome"]) for e in requests if e.get("era") == "legacy"]
    assert relayed == [
        ("POST", "relayed:200"),
        ("POST", "relayed:202"),
        ("POST", "relayed:200"),
        ("DELETE", "relayed:200"),
    ]

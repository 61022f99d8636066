"""CORS on the wire (proxy/front/cors.py): what a browser on an allowed origin is told, and that any other
origin is told nothing. These requests never need the upstream (a closed port): preflights, refusals,
errors, 404s and 401 challenges. The full MRTR round trip with CORS is in tests/e2e/test_browser.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import peers
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from e2e.harness import RawClient, RunningProxy, running_proxy
from structlog.testing import capture_logs

from proxy.config import AuthConfig, FrontConfig, UpstreamConfig
from proxy.front.cors import ALLOW_HEADERS, EXPOSE_HEADERS, MAX_AGE_S, Cors, is_mcp_path

APP = "https://app.example"
EVIL = "https://evil.example"
PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}


@pytest.mark.parametrize(
    ("path", "mcp"),
    [
        ("/mcp", True),
        ("/servers/a/mcp", True),
        ("/servers//mcp", False),
        ("/servers/a/b/mcp", False),
        ("/_mrtr/mcp", False),  # the peer route: replicas only, never a browser
        ("/_mrtr/servers/a/mcp", False),
        ("/healthz", False),
        ("/.well-known/oauth-protected-resource/mcp", False),
        ("/mcpx", False),
    ],
)
def test_which_paths_are_mcp_routes(path: str, mcp: bool) -> None:
    assert is_mcp_path(path) is mcp


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy() -> AsyncIterator[RunningProxy]:
    closed = f"http://127.0.0.1:{peers.closed_port()}/mcp"
    async with running_proxy(closed, front=FrontConfig(allowed_origins=(APP,)), names=("a", "b")) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def listed(value: str) -> set[str]:
    return {v.strip().lower() for v in value.split(",")}


def no_cors(headers: Any) -> None:
    assert [n for n in headers if n.lower().startswith("access-control-")] == []


@pytest.mark.parametrize("route", ["/mcp", "/servers/b/mcp"])
async def test_preflight_of_an_allowed_origin(
    proxy: RunningProxy, http: aiohttp.ClientSession, route: str
) -> None:
    url = proxy.url.removesuffix("/mcp") + route
    async with http.options(url, headers={"Origin": APP, **PREFLIGHT}) as resp:
        assert resp.status == 204
        assert await resp.read() == b""
        h = resp.headers
        assert h["Access-Control-Allow-Origin"] == APP
        assert listed(h["Access-Control-Allow-Methods"]) == {"post", "get", "delete", "options"}
        assert {
            "content-type",
            "authorization",
            "mcp-session-id",
            "mcp-method",
            "mcp-name",
            "mcp-protocol-version",
            "last-event-id",
        } <= listed(h["Access-Control-Allow-Headers"])
        assert listed(h["Access-Control-Allow-Headers"]) == {n.lower() for n in ALLOW_HEADERS}
        assert h["Access-Control-Max-Age"] == str(MAX_AGE_S)
        assert "origin" in listed(h["Vary"])
        assert "Access-Control-Allow-Credentials" not in h  # no cookies, ever
        assert h["X-Request-Id"]


async def test_preflight_of_another_origin_is_refused_with_json_and_logged(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    with capture_logs() as logs:
        async with http.options(proxy.url, headers={"Origin": EVIL, **PREFLIGHT}) as resp:
            assert resp.status == 403
            assert resp.content_type == "application/json"
            assert await resp.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Origin not allowed"},
            }
            no_cors(resp.headers)
            assert "origin" in listed(resp.headers["Vary"])
            rid = resp.headers["X-Request-Id"]
    (line,) = [e for e in logs if e.get("request_id") == rid]
    assert line["event"] == "request"
    assert (line["http_method"], line["path"], line["status"]) == ("OPTIONS", "/mcp", 403)
    assert (line["outcome"], line["origin"]) == ("refused:-32600", EVIL)


async def test_options_without_origin_says_what_is_allowed(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    async with http.options(proxy.url) as resp:
        assert resp.status == 204
        assert listed(resp.headers["Allow"]) == {"post", "get", "delete", "options"}
        no_cors(resp.headers)
        assert "Vary" not in resp.headers  # nothing changes for a client that sends no Origin


async def test_an_allowed_origin_reads_errors_and_their_headers(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    client = RawClient(proxy.url, http)
    body = client.body("tools/list")
    headers = {**client.headers(body), "Origin": APP, "X-Request-Id": "cors-1"}
    async with http.post(proxy.url, json=body, headers=headers) as resp:  # the upstream is down
        payload = await resp.json()
        assert payload["error"]["code"] == -31001, payload
        assert resp.headers["Access-Control-Allow-Origin"] == APP
        assert listed(resp.headers["Access-Control-Expose-Headers"]) == {n.lower() for n in EXPOSE_HEADERS}
        assert "origin" in listed(resp.headers["Vary"])
        assert resp.headers["X-Request-Id"] == "cors-1"
    async with http.post(proxy.url, data=b"{not json", headers={**headers, "Origin": APP}) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == -32700
        assert resp.headers["Access-Control-Allow-Origin"] == APP
    async with http.get(proxy.url, headers={"Origin": APP}) as resp:  # no session: 405, still readable
        assert resp.status == 405
        assert resp.headers["Access-Control-Allow-Origin"] == APP
    unknown = proxy.url.removesuffix("/mcp") + "/servers/nope/mcp"
    async with http.post(unknown, json=body, headers=headers) as resp:
        assert resp.status == 404
        assert resp.headers["Access-Control-Allow-Origin"] == APP
        assert resp.headers["X-Request-Id"] == "cors-1"


async def test_another_origin_is_refused_and_told_nothing(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    client = RawClient(proxy.url, http)
    body = client.body("tools/list")
    async with http.post(proxy.url, json=body, headers={**client.headers(body), "Origin": EVIL}) as resp:
        assert resp.status == 403
        assert (await resp.json())["error"] == {"code": -32600, "message": "Origin not allowed"}
        no_cors(resp.headers)
        assert "origin" in listed(resp.headers["Vary"])


async def test_a_loopback_page_on_the_proxy_itself_needs_no_cors(
    proxy: RunningProxy, http: aiohttp.ClientSession
) -> None:
    """Same origin (the loopback host:port the proxy serves): allowed as before, no CORS headers needed."""
    origin = proxy.url.removesuffix("/mcp")
    async with http.options(proxy.url, headers={"Origin": origin, **PREFLIGHT}) as resp:
        assert resp.status == 204
        no_cors(resp.headers)


async def test_probes_and_metadata_are_untouched(proxy: RunningProxy, http: aiohttp.ClientSession) -> None:
    base = proxy.url.removesuffix("/mcp")
    async with http.get(base + "/healthz", headers={"Origin": APP}) as resp:
        assert resp.status == 200
        no_cors(resp.headers)
        assert "Vary" not in resp.headers


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def validating() -> AsyncIterator[RunningProxy]:
    """Validate mode: a request without a token is answered 401 with a challenge, before the upstream."""
    auth = AuthConfig(
        mode="validate",
        public_url="https://mcp.example.test/mcp",
        authorization_servers=("https://as.example.test",),
        jwks_url=f"http://127.0.0.1:{peers.closed_port()}/jwks",
    )
    up = UpstreamConfig(name="default", url=f"http://127.0.0.1:{peers.closed_port()}/mcp", auth=auth)
    async with running_proxy(up, front=FrontConfig(allowed_origins=(APP,))) as running:
        yield running


async def test_a_401_challenge_is_readable_by_an_allowed_origin(
    validating: RunningProxy, http: aiohttp.ClientSession
) -> None:
    client = RawClient(validating.url, http)
    body = client.body("tools/list")
    async with http.post(validating.url, json=body, headers={**client.headers(body), "Origin": APP}) as resp:
        assert resp.status == 401
        assert "resource_metadata=" in resp.headers["WWW-Authenticate"]
        assert resp.headers["Access-Control-Allow-Origin"] == APP
        assert "www-authenticate" in listed(resp.headers["Access-Control-Expose-Headers"])
    async with http.post(validating.url, json=body, headers={**client.headers(body), "Origin": EVIL}) as resp:
        assert resp.status == 403
        no_cors(resp.headers)


# ---- the response hook on its own (aiohttp's mocked request: no server needed) ---------------------------


async def _prepared(path: str, headers: dict[str, str], response_headers: dict[str, str]) -> Any:
    response = web.Response(status=200, headers=response_headers)
    Cors((APP,)).on_prepare(make_mocked_request("POST", path, headers=headers), response)
    return response.headers


async def test_another_origin_loses_any_access_control_header_whoever_set_it() -> None:
    got = await _prepared(
        "/mcp",
        {"Origin": EVIL},
        {"Access-Control-Allow-Origin": "*", "access-control-allow-credentials": "true"},
    )
    no_cors(got)
    assert got["Vary"] == "Origin"


async def test_an_allowed_origin_gets_its_own_origin_never_a_wildcard() -> None:
    got = await _prepared(
        "/servers/a/mcp", {"Origin": APP}, {"Access-Control-Allow-Origin": "*", "Vary": "Accept"}
    )
    assert got["Access-Control-Allow-Origin"] == APP
    assert got["Vary"] == "Accept, Origin"  # appended, once
    again = await _prepared("/mcp", {"Origin": APP}, {"Vary": "accept, origin"})
    assert again["Vary"] == "accept, origin"


async def test_other_paths_are_left_alone() -> None:
    got = await _prepared(
        "/.well-known/oauth-protected-resource", {"Origin": EVIL}, {"Access-Control-Allow-Origin": "*"}
    )
    assert got["Access-Control-Allow-Origin"] == "*"  # the public metadata document keeps its own
    assert "Vary" not in got

"""The era probe is the proxy's own request (upstream/era.py): one client's headers never decide the era every
user then shares.

The upstream is the mcp 2.3.0 SDK's server (2026-07-28 only) behind a real nginx that, like many front
proxies, refuses a header line over 2 KB (`large_client_header_buffers 4 2k`: HTTP 400 "Request Header Or
Cookie Too Large", an HTML page). A client's `Via` of 2,040 characters passes the proxy's own limit
(front/loops.py, 2,048); with the proxy's entry appended it no longer passes nginx's. Before the probe was the
proxy's own, it carried that `Via`, nginx refused it, and the refusal (no MCP answer: "legacy") became the
verdict for every user: the requests of others went the legacy way to a server that has none, and failed,
until a legacy session failed to open and the upstream was probed again.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import peers
import pytest

from e2e.harness import RawClient, running_proxy
from e2e.replicas import NGINX
from proxy.config import UpstreamConfig
from proxy.process.appstate import ERAS

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

LONG = 2040  # under the proxy's own MAX_VIA (2,048), over nginx's 2 KB line once the proxy's entry is added


@contextlib.asynccontextmanager
async def strict_nginx(upstream: str) -> AsyncIterator[str]:
    """nginx on 127.0.0.1 in front of `upstream` (…/mcp), refusing any header line over 2 KB."""
    if not NGINX.exists():
        raise peers.PeersMissingError(f"nginx is not installed: {peers.SETUP_HINT}")
    target = upstream.rsplit("/mcp", 1)[0]
    with tempfile.TemporaryDirectory(prefix="mrtr-nginx-") as tmp:

        def argv(port: int) -> list[str]:
            conf = Path(tmp) / "nginx.conf"
            conf.write_text(f"""
user root root;
worker_processes 1;
error_log {tmp}/error.log warn;
pid {tmp}/nginx.pid;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fcgi;
  uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  large_client_header_buffers 4 2k;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass {target};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }}
  }}
}}
""")
            return [str(NGINX), "-p", tmp, "-c", str(conf), "-g", "daemon off;"]

        async with peers.run_peer("nginx", argv) as front:
            yield f"http://127.0.0.1:{front.port}/mcp"


async def _tools(client: RawClient, **headers: str) -> dict[str, Any]:
    body = client.body("tools/list")
    reply = await client.send(body, {**client.headers(body), **headers})
    return reply.body


async def test_a_long_via_from_one_client_does_not_make_the_upstream_legacy_for_the_next() -> None:
    async with (
        peers.start_mcp2_server() as direct,
        strict_nginx(direct) as behind_nginx,
        running_proxy(behind_nginx) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http)
        # the first client's own request carries its Via: nginx refuses that, and it alone is told
        first = await _tools(client, Via="1.1 " + "x" * (LONG - 4))
        assert "error" in first, first
        assert proxy.app[ERAS].describe()["default"] == "modern"
        second = await _tools(client)  # an ordinary client
        assert "result" in second, second
        tools = second["result"]["tools"]
        assert {"echo", "guard_name"} <= {t["name"] for t in tools}


async def test_a_forwarded_header_nginx_refuses_is_asked_again_without_it() -> None:
    """A header the operator forwards (`forward_headers`) that one client makes too long for the upstream's
    front proxy: the probe that carried it was refused before any MCP answer, so it is asked again with the
    upstream's own headers, and that answer (modern) is the verdict."""
    async with peers.start_mcp2_server() as direct, strict_nginx(direct) as behind_nginx:
        upstream = UpstreamConfig(
            name="default", url=behind_nginx, forward_headers=("authorization", "x-tenant")
        )
        async with running_proxy(upstream) as proxy, aiohttp.ClientSession() as http:
            client = RawClient(proxy.url, http)
            await _tools(client, **{"X-Tenant": "t" * 2100})
            assert proxy.app[ERAS].describe()["default"] == "modern"
            second = await _tools(client, **{"X-Tenant": "acme"})
            assert "result" in second, second
